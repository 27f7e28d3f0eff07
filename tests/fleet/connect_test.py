"""The Spark engine through a real Spark Connect server (the one pyspark's pip package ships),
started on a free port and stopped by PID: the same tables as the local engine."""

from __future__ import annotations

import math
import time

import pytest

from kqplan.fleet.changes import read_parquet
from tests.helpers import fleet_cli

pytestmark = pytest.mark.slow


def test_no_regular_spark_session_runs_before_these():
    """pyspark refuses a Connect session beside a regular one in the process: this module runs
    before any test that starts the session-scoped ``spark`` fixture (files named after it)."""
    from pyspark.sql import SparkSession

    assert SparkSession.getActiveSession() is None


def test_plan_and_impact_through_spark_connect_match_the_local_engine(fleet, connect_server):
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


def test_a_heavy_units_quantile_through_spark_connect_is_the_local_engines(fleet, connect_server,
                                                                          monkeypatch):
    """kqplan/fleet/spark_heavy.py's passes (a sample, a broadcast frame of units, a null-safe
    join, a frame made from the driver's rows) on a Connect server: every unit taken as heavy."""
    import pyarrow.parquet as pq

    from kqplan.fleet import spark_heavy

    monkeypatch.setattr(spark_heavy, "HEAVY", 1)
    monkeypatch.setattr(spark_heavy, "SAMPLED", 1.0)
    found, bounded = [], spark_heavy.bounded

    def recorded(*args, **kwargs):  # what the bounded way itself gave (not Spark's percentile after it)
        passes = bounded(*args, **kwargs)
        found.append({unit: dict(stats) for unit, stats in passes[2].items()})  # before any fallback
        return passes

    monkeypatch.setattr(spark_heavy, "bounded", recorded)
    usage = fleet / "heavy.csv"
    rows = [f"east,{user},{client},{(i * 7919) % 1000 / 7},{1_700_000_000 + i * 13}"
            for i in range(10_000) for user, client in (("a", "x"), ("b", ""), ("a", ""))]
    usage.write_text("cluster,user,client_id,producer_byte_rate,ts\n" + "\n".join(rows) + "\n")
    tables = []
    for engine in ("local", "spark"):
        out = fleet / f"heavy-{engine}"
        args = ["--spark-remote", connect_server] if engine == "spark" else []
        done = fleet_cli(fleet, "impact", "--cluster", "east", "--usage", usage, "--stat", "p99",
                         "--out", out, "--engine", engine, *args)
        assert done.exit_code == 0, done.stdout + done.stderr
        tables.append(pq.read_table(out / "impact.parquet").to_pylist())
    assert len(tables[0]) == len(tables[1]) == 12  # three principals, four keys
    for mine, theirs in zip(tables[0], tables[1], strict=True):  # Spark's other quantiles: within 1e-12
        assert mine.keys() == theirs.keys()
        pairs = zip(mine.values(), theirs.values(), strict=True)
        assert all(a == b or math.isclose(a, b, rel_tol=1e-12) for a, b in pairs), (mine, theirs)
    assert sum(1 for r in tables[1] if r["usage"]) == 3
    quantiles = [v for stats in found for unit in stats.values() for v in unit.values() if v is not None]
    assert len(quantiles) == 3, found  # the three principals' producer rates, through the bounded way
    assert not any(v is spark_heavy.UNBOUNDED for v in quantiles), found


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


def test_a_relative_usage_path_reaches_the_connect_server_whole(fleet, connect_server, monkeypatch):
    """The server resolves a relative path against its own working directory: kqplan makes it
    absolute first, so `--usage usage.csv` means this directory's file."""
    (fleet / "usage.csv").write_text("cluster,user,client_id,producer_byte_rate,ts\neast,a,app,3,1\n")
    monkeypatch.chdir(fleet)
    done = fleet_cli(fleet, "impact", "--cluster", "east", "--usage", "usage.csv", "--out", "out",
                     "--engine", "spark", "--spark-remote", connect_server)
    assert done.exit_code == 0, done.stdout + done.stderr
    assert (fleet / "out" / "impact.parquet").exists()


def test_spark_remote_in_the_environment_is_honoured_and_named(fleet, connect_server, monkeypatch):
    monkeypatch.setenv("SPARK_REMOTE", connect_server)
    connected = fleet_cli(fleet, "plan", "--cluster", "east", "--engine", "spark")
    assert connected.exit_code == 0, connected.stdout + connected.stderr
    assert f"Spark Connect {connect_server} (from SPARK_REMOTE)" in connected.stderr
    # an explicit --spark-master wins over the environment (pyspark would refuse the two together)
    here = fleet_cli(fleet, "plan", "--cluster", "east", "--engine", "spark", "--spark-master", "local[1]")
    assert here.exit_code == 0, here.stdout + here.stderr
    assert "SPARK_REMOTE" not in here.stderr
    assert here.stdout == connected.stdout


def test_another_master_is_not_silently_replaced_by_this_process_session(spark):
    # a process that already runs a session (a test suite, an application embedding kqplan) cannot
    # honour --spark-master spark://…: an error says so, rather than running on the session it has
    from kqplan.core.errors import KqplanError
    from kqplan.fleet.spark import session

    elsewhere = session(master="spark://127.0.0.1:7")
    with pytest.raises(KqplanError, match=r"already runs a Spark session on local\[1\]: --spark-master "
                                          r"spark://127\.0\.0\.1:7 cannot be used from it"), elsewhere:
        pass
    with session(master="local[*]") as reused:  # a local master: the running session serves
        assert reused is spark

