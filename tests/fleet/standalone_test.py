"""The Spark engine on a real Spark standalone cluster: a master and two workers started from
pyspark's own package (``spark_cluster``, tests/fleet/conftest.py), kqplan's driver connecting to
``spark://127.0.0.1:PORT``, its executors on the workers. ``fleet impact`` and ``fleet plan`` write
the local engine's rows, and the master's and workers' records show the work ran there.

The Spark runs are the installed ``kqplan`` console script in a subprocess: one SparkContext per
process, and kqplan's session reuses an active one whatever its master (the ``spark`` fixture's
``local[1]`` when an earlier fleet test started it), so an in-process ``--spark-master spark://…``
could run locally unseen."""

from __future__ import annotations

import datetime as dt
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fleet.conftest import QUICK_JVM, SparkCluster, ui_state
from tests.helpers import Result, fleet_cli, run_kqplan, write_manifest

pytestmark = pytest.mark.slow

APP = "kqplan-fleet"
"""The application name kqplan's session gives Spark (kqplan/fleet/spark.py)."""
P, C, R = "producer_byte_rate", "consumer_byte_rate", "request_percentage"
T0 = 1_790_000_000  # seconds since the epoch, on a minute boundary
# (cluster, user, client_id, key, value, seconds after T0): user a's three clients and its clients
# without a client-id share {user=a}; u1 and u2 share {client-id=shared}; gone's quota is deleted;
# a principal without any rate; rows of the unreachable cluster and of one not in the inventory
SAMPLES = [
    *[("east", "a", c, P, v, t) for c, v, t in (("x", 1.0, 0), ("x", 3.0, 30), ("y", 2.0, 10), ("y", 0.5, 70),
                                                ("z", 4.0, 65), ("", 0.25, 5), ("", 1.5, 125))],
    ("east", "a", "x", R, 4.0, 0), ("east", "a", "y", C, 9.0, 61),
    *[("east", u, "shared", P, v, t) for u, v, t in (("u1", 60.0, 0), ("u2", 50.0, 20), ("u1", 30.0, 80),
                                                     ("u2", 80.0, 90))],
    ("east", "gone", "g", P, 2.0, 0), ("east", "quiet", "app", None, None, 0),
    ("west", "w", "c1", C, 5.0, 0), ("west", "w", "c2", C, 4.0, 30), ("west", "w", "c1", C, 1.0, 60),
    *[("west", u, "shared", P, 70.0, t) for u in ("u1", "u2") for t in (0, 61)],
    ("west", "a", "", P, 2.5, 0), ("down", "a", "x", P, 9.0, 0), ("nowhere", "n", "n", P, 1.0, 0)]


def write_usage(path: Path) -> Path:
    """SAMPLES as wide usage tables, every other row in each format (a bucket's samples come from
    both): ``usage.csv``, its ts in seconds and in ISO 8601 by turns, and ``one.parquet`` and
    ``two.parquet`` (one schema), its ts a timestamp."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    keys = (P, C, R)
    rows = [{"cluster": cl, "user": u, "client_id": c, "ts": T0 + t,
             **{k: (v if k == key else None) for k in keys}} for cl, u, c, key, v, t in SAMPLES]
    path.mkdir(parents=True)

    def cell(v: Any, i: int) -> str:
        if isinstance(v, int) and i % 2:
            return dt.datetime.fromtimestamp(v, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return "" if v is None else str(v)

    header = ["cluster", "user", "client_id", "ts", *keys]
    (path / "usage.csv").write_text("\n".join([",".join(header)] + [
        ",".join(cell(r[h], i) for h in header) for i, r in enumerate(rows[::2])]) + "\n")
    timed = [r | {"ts": dt.datetime.fromtimestamp(r["ts"], dt.UTC)} for r in rows[1::2]]
    schema = pa.schema([(k, pa.string()) for k in ("cluster", "user", "client_id")]
                       + [("ts", pa.timestamp("us", "UTC"))] + [(k, pa.float64()) for k in keys])
    half = len(timed) // 2
    for name, part in (("one.parquet", timed[:half]), ("two.parquet", timed[half:])):
        pq.write_table(pa.Table.from_pylist(part, schema=schema), path / name)
    return path


def on_cluster(fleet: Path, cluster: SparkCluster, *args: str | Path, conf: Path | None = None) -> Result:
    """``kqplan fleet ARGS --engine spark --spark-master CLUSTER`` in a subprocess, checked to have
    run there: the master records one new application of kqplan's, and each worker ran one executor
    of it (a job run in the driver's own process, as local[*] runs it, leaves neither)."""
    before = {a["id"] for a in ui_state(cluster.ui)["completedapps"]}
    env = {k: v for k, v in os.environ.items() if k not in (  # no session or gateway of this process
        "SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE", "PYSPARK_GATEWAY_PORT",
        "PYSPARK_GATEWAY_SECRET")}
    env |= {"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
            # small executors: one of 512 MiB per worker (a worker offers 1 GiB and 1 core)
            "PYSPARK_SUBMIT_ARGS": "--conf spark.executor.memory=512m "
                                   f"--conf spark.executor.extraJavaOptions={QUICK_JVM} pyspark-shell"}
    if conf is not None:  # the deployment's spark-defaults.conf (its catalog), as Spark users set it
        env["SPARK_CONF_DIR"] = str(conf)
    done = run_kqplan("--config", fleet / "kqplan.toml", "fleet", *args, "--engine", "spark",
                      "--spark-master", cluster, env=env, timeout=240, cwd=fleet)
    shown = done.stdout + done.stderr
    # the master and the workers hear of the application's end asynchronously
    apps = until(lambda: [a for a in ui_state(cluster.ui)["completedapps"] if a["id"] not in before])
    assert [(a["name"], a["state"], a["memoryperexecutor"]) for a in apps] == [(APP, "FINISHED", 512)], (
        apps, shown)
    for worker in cluster.workers:
        def ran(worker: str = worker) -> list[dict[str, Any]]:
            state = ui_state(worker)
            return [e for e in state["finishedexecutors"] + state["executors"] if e["appid"] == apps[0]["id"]]

        assert [e["memory"] for e in until(ran)] == [512], (worker, ui_state(worker), shown)
    return done


def until(found: Callable[[], list[Any]], timeout: float = 15) -> list[Any]:
    """``found()`` once it is not empty, or its last answer after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (result := found()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return result


def sorted_rows(path: Path) -> list[dict[str, Any]]:
    """A table's rows, in one order whatever the engine wrote."""
    import pyarrow.parquet as pq

    rows = pq.read_table(path).to_pylist()
    assert rows, f"{path} is empty: nothing compared"
    return sorted(rows, key=lambda r: tuple((v is None, v if v is not None else 0) for v in r.values()))


@pytest.fixture
def shared(fleet: Path) -> Path:
    """The fleet, with a quota on a client-id that two users share."""
    write_manifest(fleet / "base" / "shared.yaml",
                   "entities:\n  - client-id: shared\n    quotas: {producer_byte_rate: 100}\n")
    return fleet


def untimed(output: str) -> str:
    """A command's output without the time its attempts on the unreachable cluster took (the
    cluster "down": "… attempts (0.9 s in all)"), which varies from run to run."""
    return re.sub(r"\(\d+\.\d s in all\)", "(… s in all)", output)


def test_impact_on_the_standalone_cluster_writes_the_local_engines_rows(shared, spark_cluster):
    usage = write_usage(shared / "usage")
    # "nowhere" is not in the inventory: its rows left out (by default an error: unknown_clusters_test)
    args = ("impact", "--usage", usage, "--stat", "p50", "--window", "30", "--allow-unknown-clusters")
    local = fleet_cli(shared, *args, "--out", shared / "local")
    remote = on_cluster(shared, spark_cluster, *args, "--out", shared / "spark")
    # the unreachable cluster fails on both engines: exit 1, the other clusters' tables written
    assert remote.exit_code == local.exit_code == 1, remote.stdout + remote.stderr
    assert "down: error:" in remote.stdout
    moved = local.stdout.replace(str(shared / "local"), str(shared / "spark"))
    assert untimed(remote.stdout) == untimed(moved)
    for table in ("impact.parquet", "unused.parquet"):
        assert sorted_rows(shared / "spark" / table) == sorted_rows(shared / "local" / table), table
    # what the usage was written to exercise: buckets of several principals, on both clusters
    rows = sorted_rows(shared / "local" / "impact.parquet")
    assert {(r["cluster"], r["user"], r["client_id"]) for r in rows} >= {
        ("east", "a", "x"), ("east", "a", "z"), ("east", "a", ""), ("east", "u2", "shared"),
        ("east", "quiet", "app"), ("west", "u1", "shared")}
    assert {("east", "{user=a}"), ("east", "{client-id=shared}"), ("west", "{client-id=shared}")} <= {
        (r["cluster"], r["after_group"]) for r in rows}
    assert any(r["would_throttle"] for r in rows)


def test_plan_runs_on_both_workers_and_writes_the_local_engines_changes(shared, spark_cluster):
    local = fleet_cli(shared, "plan", "--out", shared / "local")
    remote = on_cluster(shared, spark_cluster, "plan", "--out", shared / "spark")
    assert remote.exit_code == local.exit_code == 1, remote.stdout + remote.stderr
    assert untimed(remote.stdout) == untimed(local.stdout)
    changes = sorted_rows(shared / "local" / "changes.parquet")
    assert sorted_rows(shared / "spark" / "changes.parquet") == changes
    assert {(r["cluster"], r["action"]) for r in changes} >= {
        ("east", "add"), ("east", "update"), ("east", "delete"), ("west", "add")}


WAREHOUSE_TABLE = """\
import sys
from pyspark.sql import SparkSession

spark = SparkSession.builder.master("local[1]").appName("kqplan-test-warehouse").getOrCreate()
spark.read.parquet(*sys.argv[1:]).write.saveAsTable("kq_usage")
spark.stop()
"""


def warehouse(root: Path, *parquet: Path) -> Path:
    """A Hive metastore (embedded Derby) and a warehouse under ``root``, configured as a deployment
    configures them (``SPARK_CONF_DIR/spark-defaults.conf``), holding the table ``kq_usage`` saved
    from ``parquet`` by another Spark application: the conf directory."""
    import subprocess

    conf = root / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text(
        "spark.sql.catalogImplementation hive\n"
        f"spark.sql.warehouse.dir {(root / 'warehouse').as_uri()}\n"
        "spark.hadoop.javax.jdo.option.ConnectionURL "
        f"jdbc:derby:;databaseName={root / 'metastore'};create=true\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_GATEWAY"))}
    env |= {"SPARK_CONF_DIR": str(conf), "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run([sys.executable, "-c", WAREHOUSE_TABLE, *map(str, parquet)], cwd=root, env=env,
                          capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return conf


def test_impact_reads_a_uri_and_a_warehouse_table_and_writes_to_a_uri(shared, spark_cluster):
    # the CSV half of the usage by a file:// URI, the Parquet half from a table of the deployment's
    # catalog; the tables written by the executors to a file:// URI: the local engine's rows
    usage = write_usage(shared / "usage")
    conf = warehouse(shared, usage / "one.parquet", usage / "two.parquet")
    local = fleet_cli(shared, "impact", "--usage", usage, "--out", shared / "local",
                      "--allow-unknown-clusters")
    remote = on_cluster(shared, spark_cluster, "impact", "--usage", (usage / "usage.csv").as_uri(),
                        "--usage-table", "kq_usage", "--out", (shared / "spark").as_uri(),
                        "--allow-unknown-clusters", conf=conf)
    assert remote.exit_code == local.exit_code == 1, remote.stdout + remote.stderr
    assert untimed(remote.stdout) == untimed(local.stdout)  # the summaries, computed by Spark's aggregations
    assert "charts are drawn only into a local --out directory" in remote.stderr
    for table in ("impact.parquet", "unused.parquet"):
        assert (shared / "spark" / table).is_dir()  # Spark's parts
        assert sorted_rows(shared / "spark" / table) == sorted_rows(shared / "local" / table), table
