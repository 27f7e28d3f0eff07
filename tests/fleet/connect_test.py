"""The Spark engine through a real Spark Connect server (the one pyspark's pip package ships),
started on a free port and stopped by PID: the same tables as the local engine."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kqplan.fleet.changes import read_parquet
from tests.fleet.cli_test import fleet, fleet_cli  # noqa: F401  (fleet is a fixture)
from tests.kafka.broker import free_ports

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    import pyspark

    home = Path(pyspark.__file__).parent
    work = tmp_path_factory.mktemp("spark-connect")
    port = free_ports(1)[0]
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_PID_DIR": str(work), "SPARK_LOG_DIR": str(work), "SPARK_IDENT_STRING": "kqplan-test",
           "PYSPARK_PYTHON": sys.executable}  # a test's UDF runs with this venv's pyarrow
    subprocess.run([str(home / "sbin" / "start-connect-server.sh"), "--master", "local[1]",
                    "--conf", f"spark.connect.grpc.binding.port={port}", "--conf", "spark.ui.enabled=false"],
                   env=env, check=True, capture_output=True, timeout=120)
    pid_file = next(work.glob("*.pid"))
    pid = int(pid_file.read_text())
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"Spark Connect did not listen on {port}: "
                                       + "".join(p.read_text() for p in work.glob("*.out"))[-2000:]) from None
                time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
        else:
            os.kill(pid, signal.SIGKILL)


def test_plan_and_impact_through_spark_connect_match_the_local_engine(fleet, connect_server):  # noqa: F811
    local = fleet_cli(fleet, "plan", "--cluster", "east", "--cluster", "west", "--out", fleet / "local")
    remote = fleet_cli(fleet, "plan", "--cluster", "east", "--cluster", "west", "--out", fleet / "remote",
                       "--engine", "spark", "--spark-remote", connect_server)
    assert remote.exit_code == local.exit_code == 0, remote.stdout + remote.stderr
    assert remote.stdout == local.stdout
    assert read_parquet(fleet / "remote" / "changes.parquet") == read_parquet(
        fleet / "local" / "changes.parquet")
    usage = fleet / "usage.jsonl"
    usage.write_text('{"cluster": "east", "user": "a", "client_id": null, "producer_byte_rate": 3}\n'
                     '{"cluster": "east", "user": "a", "client_id": "x", "request_percentage": 4}\n')
    import pyarrow.parquet as pq

    tables = []
    for engine in ("local", "spark"):
        out = fleet / f"impact-{engine}"
        args = ["--spark-remote", connect_server] if engine == "spark" else []
        done = fleet_cli(fleet, "impact", "--cluster", "east", "--usage", usage, "--out", out, "--engine",
                         engine, *args)
        assert done.exit_code == 0, done.stdout + done.stderr
        tables.append(pq.read_table(out / "impact.parquet").to_pylist())
    assert tables[0] == tables[1]


def test_progress_comes_from_the_connect_servers_messages(connect_server):
    """Connect has no status tracker: the server's progress messages feed the spinner instead."""
    import re

    from pyspark.sql import functions as F

    from kqplan.fleet.spark import session, watch

    heard: list[str] = []
    with session(remote=connect_server) as spark, watch(spark, heard.append, "Resolving"):
        slow = F.udf(lambda x: time.sleep(0.6) or x, "long")  # the server reports every 2 s
        assert spark.range(0, 8, 1, 4).select(F.sum(slow("id"))).collect()[0][0] == 28
    assert heard[0] == "Resolving"
    assert any(re.fullmatch(r"Resolving: [0-3]/4 tasks", m) for m in heard), heard
