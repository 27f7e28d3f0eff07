"""kqplan fleet snapshot and plan over TCP: two sandbox clusters and one unreachable address."""

from __future__ import annotations

import json

import pytest

from kqplan.fleet.changes import ChangeRow, read_parquet
from tests.helpers import fleet_cli, write_manifest


def test_snapshot_writes_each_cluster_and_reports_the_unreachable_one(fleet):
    result = fleet_cli(fleet, "snapshot", "--out", fleet / "snaps")
    assert result.exit_code == 1
    assert "east: 3 entities" in result.stdout
    assert result.stdout.splitlines()[2].startswith("down: failed: cannot connect to 127.0.0.1:1")
    assert "Fleet snapshot: 2 of 3 clusters written." in result.stdout
    assert json.loads((fleet / "snaps" / "west.json").read_text())["cluster_id"] == "west"
    assert not (fleet / "snaps" / "down.json").exists()


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_plan_summary_table_and_exit_codes(fleet, engine):
    out = fleet / f"out-{engine}"
    result = fleet_cli(fleet, "plan", "--engine", engine, "--out", out, "--cluster", "east",
                       "--cluster", "west", "--detailed-exitcode")
    assert result.exit_code == 2, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        "east  0 to add, 1 to change, 1 to delete, 1 unmanaged",
        "west  1 to add, 1 to change, 1 to delete, 1 unmanaged",
        "Fleet: 2 clusters, 2 with changes, 0 failed; 5 changed keys."]
    assert read_parquet(out / "changes.parquet") == [
        ChangeRow("east", "{user=a}", "update", "producer_byte_rate", 1.0, 2.0),
        ChangeRow("east", "{user=gone}", "delete", "producer_byte_rate", 3.0, None),
        ChangeRow("west", "{user=a}", "update", "producer_byte_rate", 1.0, 2.0),
        ChangeRow("west", "{user=gone}", "delete", "producer_byte_rate", 3.0, None),
        ChangeRow("west", "{user=w}", "add", "consumer_byte_rate", None, 7.0)]
    everything = fleet_cli(fleet, "plan", "--engine", engine, "--format", "json")
    assert everything.exit_code == 1  # one cluster is unreachable
    down = next(c for c in everything.json["clusters"] if c["cluster"] == "down")
    assert down["error"].startswith("cannot connect to 127.0.0.1:1")


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_impact_tables_chart_and_the_throttle_gate(fleet, engine):
    usage = fleet / "usage.csv"
    # a's producer quota goes 1 -> 2 (1.5 is throttled now, not after); a's request_percentage has
    # no limit; 'gone' loses its limit (deleted); mallory is unmanaged (5% request quota).
    usage.write_text("cluster,user,client_id,producer_byte_rate,request_percentage,ts\n"
                     "east,a,app,1.5,15,1\neast,a,app,0.5,1,2\neast,gone,,9,,1\neast,mallory,x,,9,1\n"
                     "west,w,app,,,1\n")
    out = fleet / f"impact-{engine}"

    def impact(*extra: str):  # samples 1 s apart: windows of 1 s keep them apart
        return fleet_cli(fleet, "impact", "--usage", usage, "--out", out, "--engine", engine,
                         "--cluster", "east", "--fail-on-throttle", "--window", "1", *extra)

    result = impact()
    assert result.exit_code == 0, result.stdout + result.stderr
    # a's raise and gone's deletion relieve them (over their quota before, not after); mallory's
    # request bucket is over its quota before and after: counted, as on the chart, not listed
    assert result.stdout == ("east: 3 principals observed; 1 of 2 buckets over their quota after the plan; "
                             "newly throttled buckets: none; relieved buckets: {user=a} producer_byte_rate "
                             "(1 principal), {user=gone} producer_byte_rate (1 principal); 2 principals "
                             "unlimited after the plan (a key they use has no quota); 0 unused quota "
                             "entries\n")
    import pyarrow.parquet as pq

    table = pq.read_table(out / "impact.parquet").to_pylist()
    rows = {(r["user"], r["client_id"], r["key"]): r for r in table}
    assert len(rows) == 12  # 3 principals x 4 keys
    a = rows[("a", "app", "producer_byte_rate")]
    assert (a["usage"], a["before_value"], a["after_value"], a["after_source"]) == (1.5, 1.0, 2.0, "{user=a}")
    assert (a["utilization"], a["would_throttle"]) == (0.75, False)
    assert (a["before_group"], a["before_group_usage"], a["after_group"], a["after_group_usage"]) == (
        "{user=a}", 1.5, "{user=a}", 1.5)
    gone = rows[("gone", "", "producer_byte_rate")]
    assert (gone["before_source"], gone["after_value"], gone["would_throttle"]) == (
        "{user=gone}", None, False)
    mallory = rows[("mallory", "x", "request_percentage")]
    assert (mallory["usage"], mallory["after_value"], mallory["would_throttle"]) == (9.0, 5.0, True)
    assert (out / "east-utilization.png").stat().st_size > 1000
    # a PR that limits a's request_percentage to 10: max(15, 1) is over it, p50 (8) is not
    write_manifest(fleet / "base" / "q.yaml", "ownership: {prune: true, scope: [{user: 'g*'}]}\n"
                   "entities:\n  - user: a\n    quotas: {producer_byte_rate: 2, request_percentage: 10}\n")
    assert impact("--stat", "p50").exit_code == 0
    gate = impact()
    assert gate.exit_code == 1
    assert "newly throttled buckets: {user=a} request_percentage (1 principal)" in gate.stdout


@pytest.mark.parametrize("gate", [(), ("--fail-on-throttle",)])
def test_impact_exits_1_when_any_cluster_fails_even_when_all_do(fleet, gate):
    """A CI gate must not pass when it computed nothing: every cluster refused (the deletion
    brake: 'gone' is pruned and [policy] max-delete = 0) exits 1, naming each failure."""
    toml = fleet / "kqplan.toml"
    toml.write_text(toml.read_text() + "\n[policy]\nmax-delete = 0\nmax-delete-percent = 0\n")
    usage = fleet / "usage.csv"
    usage.write_text("cluster,user,client_id,producer_byte_rate,ts\neast,a,app,1.5,1\n")
    out = fleet / "impact-refused"
    result = fleet_cli(fleet, "impact", "--usage", usage, "--out", out, "--cluster", "east",
                       "--cluster", "west", *gate)
    assert result.exit_code == 1, result.stdout + result.stderr
    assert "east: error: the plan deletes 1 entities" in result.stdout
    assert "west: error: the plan deletes 1 entities" in result.stdout
    # one cluster failing among working ones: exit 1 too, the others' tables written
    partial = fleet_cli(fleet, "impact", "--usage", usage, "--out", out, "--cluster", "east",
                        "--cluster", "down", *gate)
    assert partial.exit_code == 1
    assert "down: error:" in partial.stdout
    assert (out / "impact.parquet").exists()


@pytest.mark.parametrize("window", ["0", "0.0001", "nan", "-60"])
def test_a_window_too_short_to_count_is_refused(fleet, window):
    usage = fleet / "usage.csv"
    usage.write_text("cluster,user,client_id,producer_byte_rate,ts\neast,a,app,1.5,1\n")
    result = fleet_cli(fleet, "impact", "--usage", usage, "--out", fleet / "out", "--cluster", "east",
                       "--window", window)
    assert result.exit_code == 1
    assert "--window" in result.stderr
    assert "at least 0.001" in result.stderr
    assert "Traceback" not in result.stderr
