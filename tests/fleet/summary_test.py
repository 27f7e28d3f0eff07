"""The fleet summaries' words (issue 32): ``fleet impact`` says what "unlimited" counts, counts
buckets as its chart does, and lists the buckets a plan relieves (throttled before, not after)
beside those it newly throttles — on both engines, to a local directory or a URI; ``fleet plan
--format markdown`` leaves a failed cluster's counts empty instead of printing Python's None."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kqplan.commands.fleet import FleetFormat, render
from kqplan.core.entity import Entity
from kqplan.fleet.impact import ImpactRow
from kqplan.fleet.tables import histogram
from kqplan.snapshot.file import write_snapshot
from tests.helpers import fleet_cli, write_manifest


def test_plan_markdown_leaves_a_failed_cluster_s_counts_empty():
    markdown = render({}, {"down": "cannot connect to 127.0.0.1:1"}, 0, FleetFormat.MARKDOWN)
    assert "None" not in markdown
    assert markdown.splitlines()[-1] == "| `down` |  |  |  |  | cannot connect to 127.0.0.1:1 |"


def test_plan_markdown_of_a_fleet_with_an_unreachable_cluster(fleet):
    result = fleet_cli(fleet, "plan", "--format", "markdown")
    assert result.exit_code == 1
    assert "None" not in result.stdout
    down = next(line for line in result.stdout.splitlines() if line.startswith("| `down`"))
    assert down.startswith("| `down` |  |  |  |  | cannot connect to 127.0.0.1:1")
    assert "| `east` | 0 | 1 | 1 | 1 |" in result.stdout


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """One cluster whose plan raises a's quota (over it now: relieved) and lowers b's (newly
    throttled); z uses a key no quota limits (unlimited)."""
    write_snapshot(tmp_path / "c.json", {Entity.user("a"): {"producer_byte_rate": 1.0},
                                         Entity.user("b"): {"producer_byte_rate": 10.0}}, "c-id")
    write_manifest(tmp_path / "m" / "q.yaml", "entities:\n  - user: a\n    quotas: {producer_byte_rate: 2}\n"
                   "  - user: b\n    quotas: {producer_byte_rate: 3}\n")
    (tmp_path / "kqplan.toml").write_text(
        '[clusters.c]\nid = "c-id"\nsnapshot = "c.json"\nmanifests = ["m"]\n')
    (tmp_path / "usage.csv").write_text("cluster,user,client_id,ts,producer_byte_rate,request_percentage\n"
                                        "c,a,app,1,1.5,\nc,a,cli,1,,\nc,b,x,1,5,\nc,z,q,1,,3\n")
    return tmp_path


TEXT = ("c: 4 principals observed; 1 of 2 buckets over their quota after the plan; newly throttled buckets: "
        "{user=b} producer_byte_rate (1 principal); relieved buckets: {user=a} producer_byte_rate "
        "(2 principals); 1 principals unlimited after the plan (a key they use has no quota); "
        "0 unused quota entries\n")


def impact(project: Path, engine: str, out: Path | str, fmt: str):
    return fleet_cli(project, "impact", "--usage", project / "usage.csv", "--out", out, "--engine", engine,
                     "--format", fmt)


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_impact_counts_the_chart_s_buckets_and_lists_what_the_plan_relieves(project, engine):
    out = project / f"out-{engine}"
    text = impact(project, engine, out, "text")
    assert text.exit_code == 0, text.stderr
    assert text.stdout == TEXT
    summary = impact(project, engine, out, "json").json["clusters"]["c"]
    assert summary["buckets"] == {"with_quota": 2, "over_quota": 1}
    rows = [ImpactRow(**r) for r in pq.read_table(out / "impact.parquet").to_pylist()]
    drawn = histogram(rows)  # what the chart draws, and its title counts
    assert drawn is not None
    assert (drawn.total, drawn.over) == (2, 1)
    assert summary["relieved"] == [{"bucket": "{user=a}", "key": "producer_byte_rate", "members": 2,
                                    "usage": 1.5, "quota": 1.0}]
    assert summary["newly_throttled"] == [{"bucket": "{user=b}", "key": "producer_byte_rate", "members": 1,
                                           "usage": 5.0, "quota": 3.0}]
    assert summary["unlimited"] == 1
    markdown = impact(project, engine, out, "markdown").stdout.splitlines()
    assert markdown[2] == (
        "| cluster | principals | buckets over their quota after the plan | newly throttled buckets "
        "| relieved buckets | principals unlimited after the plan (a key they use has no quota) "
        "| unused quota entries |")
    assert markdown[4] == (
        "| `c` | 4 | 1 of 2 | `{user=b}` producer\\_byte\\_rate (1 principal) | `{user=a}` "
        "producer\\_byte\\_rate (2 principals) | 1 | 0 |")


def test_spark_writing_to_a_uri_gives_the_same_summary(project):
    local = impact(project, "local", project / "local", "json")
    remote = impact(project, "spark", f"file://{project / 'uri'}", "json")
    assert remote.exit_code == 0, remote.stderr
    assert remote.json["clusters"] == local.json["clusters"]
    assert json.loads(json.dumps(remote.json["charts"])) == []  # charts: local --out only
