"""The fleet tests' fixtures: one local SparkSession (a JVM start costs seconds), a Spark Connect
server, and a fleet of two sandbox clusters and one unreachable address."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from kqplan.core.entity import Entity
from kqplan.sandbox import Sandbox, SandboxConfig
from tests.helpers import write_manifest
from tests.kafka.broker import free_ports


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from kqplan.fleet.spark import session

    with session(master="local[1]") as active:
        yield active


SEED = {Entity.user("a"): {"producer_byte_rate": 1.0}, Entity.user("gone"): {"producer_byte_rate": 3.0},
        Entity.user("mallory"): {"request_percentage": 5.0}}


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Path]:
    with ExitStack() as stack:
        boxes = {n: stack.enter_context(Sandbox.start(SandboxConfig(seed=SEED, cluster_id=n)))
                 for n in ("east", "west")}
        write_manifest(tmp_path / "base" / "q.yaml", "ownership: {prune: true, scope: [{user: 'g*'}]}\n"
                       "entities:\n  - user: a\n    quotas: {producer_byte_rate: 2}\n")
        write_manifest(tmp_path / "west" / "q.yaml",
                       "entities:\n  - user: w\n    quotas: {consumer_byte_rate: 7}\n")
        layers = {"east": '["base"]', "west": '["base", "west"]'}
        text = "".join(f'[clusters.{n}]\nid = "{n}"\nbootstrap-server = "{b.bootstrap}"\n'
                       f"manifests = {layers[n]}\n\n" for n, b in boxes.items())
        text += '[clusters.down]\nbootstrap-server = "127.0.0.1:1"\nmanifests = ["base"]\n'
        (tmp_path / "kqplan.toml").write_text(text)
        yield tmp_path


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
