"""A lowering needs evidence (issue 32): ``fleet rightsize`` lowered ``{user=orders}`` from 1 MiB to
60 KiB on ONE sample, which would throttle every client of that user not seen in it. Each proposal
now carries its bucket's sample and window counts, and below ``--min-samples`` (default: one day of
windows, ``86400 // --window``) a lowering is held — nothing written, the quota kept — and the
summaries say why. Both engines agree (the generated fleets of rightsize_test.py cover it too)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kqplan.core.entity import Entity
from kqplan.core.errors import KqplanError
from kqplan.fleet.proposals import read_proposals
from kqplan.fleet.rightsize import Rules, default_min_samples, proposal_rows
from kqplan.fleet.spark_rightsize import spark_proposal_rows
from kqplan.fleet.spark_usage import samples_frame
from kqplan.fleet.usage import Sample
from kqplan.snapshot.file import write_snapshot
from tests.helpers import fleet_cli

P = "producer_byte_rate"
MiB = 1024.0**2
STATE = {Entity.user("orders"): {P: 1 * MiB}}


def rules(min_samples: int) -> Rules:
    return Rules.of(stat="p99", headroom=1.5, tolerance=0.5, min_samples=min_samples)


@pytest.mark.parametrize(("window", "expected"), [(60.0, 1440), (10.0, 8640), (3600.0, 24), (86400.0, 1),
                                                   (100000.0, 1), (0.5, 172800)])
def test_the_default_is_one_day_of_windows(window, expected):
    assert default_min_samples(window) == expected


def test_one_sample_holds_the_lowering_and_says_how_much_it_rests_on():
    one = [Sample("prod", "orders", "checkout", P, 40000.0, 0.0)]
    [held] = proposal_rows({"prod": STATE}, one, rules(1440))
    assert (held.action, held.samples, held.windows) == ("hold", 1, 1)
    assert (held.proposal, held.after_value, held.after_source) == (60 * 1024, 1 * MiB, "{user=orders}")
    [lowered] = proposal_rows({"prod": STATE}, one, rules(1))
    assert (lowered.action, lowered.after_value) == ("lower", 60 * 1024)


def test_a_bucket_counts_its_members_samples_and_its_windows():
    usage = [Sample("prod", "orders", "a", P, 1000.0, 0.0), Sample("prod", "orders", "a", P, 1000.0, 30.0),
             Sample("prod", "orders", "b", P, 1000.0, 10.0), Sample("prod", "orders", "b", P, 1000.0, 70.0)]
    rows = proposal_rows({"prod": STATE}, usage, rules(2))
    assert {(r.client_id, r.samples, r.windows, r.action) for r in rows} == {
        ("a", 4, 2, "lower"), ("b", 4, 2, "lower")}  # windows 0 and 1 of the bucket {user=orders}
    assert {r.action for r in proposal_rows({"prod": STATE}, usage, rules(3))} == {"hold"}


def test_without_ts_the_samples_are_the_evidence():
    usage = [Sample("prod", "orders", "a", P, 1000.0) for _ in range(3)]
    assert [(r.samples, r.windows, r.action) for r in proposal_rows({"prod": STATE}, usage, rules(3))] == [
        (3, None, "lower")]
    assert proposal_rows({"prod": STATE}, usage, rules(4))[0].action == "hold"


def test_only_a_lowering_waits_for_evidence():
    usage = [Sample("prod", u, "x", P, value, 0.0) for u, value in (("orders", 4 * MiB), ("new", 1000.0))]
    rows = proposal_rows({"prod": STATE}, usage, rules(1440))
    assert {(r.user, r.action) for r in rows} == {("orders", "raise"), ("new", "limit")}


def test_spark_gives_the_same_counts_and_holds(spark):
    # cluster d has a sample without ts: not windowed, its samples are the evidence
    usage = [Sample("c", "u", "a", P, 1000.0, 0.0), Sample("c", "u", "b", P, 1000.0, 61.0),
             Sample("c", "v", "", P, 50.0, 5.0), Sample("d", "w", "x", P, 9.0, None),
             Sample("d", "w", "x", P, 8.0, 3.0)]
    state = {Entity.user("u"): {P: 1 * MiB}, Entity.user("v"): {P: 1 * MiB}, Entity.user(None): {P: 1 * MiB}}
    states = {"c": state, "d": state}
    for need in (0, 2, 3):
        local = proposal_rows(states, usage, rules(need))
        assert spark_proposal_rows(spark, states, samples_frame(spark, usage), rules(need)) == local
        assert {r.action for r in local} == ({"lower"} if need <= 1 else {"lower", "hold"} if need == 2
                                             else {"hold"})
    assert {(r.user, r.samples, r.windows) for r in local} == {("u", 2, 2), ("v", 1, 1), ("w", 2, None)}


def test_a_negative_min_samples_is_refused():
    with pytest.raises(KqplanError, match="--min-samples -1 must be a count of at least 0"):
        rules(-1)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write_snapshot(tmp_path / "prod.json", STATE, "prod-id")
    (tmp_path / "kqplan.toml").write_text('[clusters.prod]\nid = "prod-id"\nsnapshot = "prod.json"\n')
    (tmp_path / "usage.csv").write_text("cluster,user,client_id,ts,producer_byte_rate\n"
                                        "prod,orders,checkout,2026-11-22T10:00:00Z,40000\n")
    return tmp_path


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_the_issue_s_one_sample_through_the_command(project, engine):
    out = project / f"out-{engine}"
    usage = project / "usage.csv"
    result = fleet_cli(project, "rightsize", "--usage", usage, "--out", out, "--engine", engine)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[:2] == [
        f"prod: 1 principals, 1 keys observed: 0 to raise, 0 to lower, 0 to limit, 0 pinned, 0 kept, 1 held "
        f"(too few samples to lower); 0 entities in {out}/prod/rightsize.yaml",
        "  hold   {user=orders} producer_byte_rate: 1MiB from {user=orders} stays: not lowered to 60KiB on 1 "
        "of the 1440 windows --min-samples asks for"]
    assert (out / "prod" / "rightsize.yaml").read_text().endswith(
        "# held: {user=orders} producer_byte_rate stays 1MiB, not lowered to 60KiB: 1 of the 1440 windows "
        "--min-samples asks for\nentities: []\n")
    table = pq.read_table(out / "proposals.parquet")
    assert (str(table.schema.field("samples").type), str(table.schema.field("windows").type)) == ("int64",
                                                                                                  "int64")
    [row] = read_proposals(out / "proposals.parquet")
    assert (row.action, row.samples, row.windows) == ("hold", 1, 1)
    markdown = (out / "proposals.md").read_text()
    assert ("| `{user=orders}` | 1 | `producer_byte_rate` | ≈39.06 KiB/s | 1 | 1 | ≈58.59 KiB/s | "
            "1MiB from {user=orders} | 60KiB | hold: 1 of the 1440 windows --min-samples asks for |"
            ) in markdown
    hourly = fleet_cli(project, "rightsize", "--usage", usage, "--out", out, "--engine", engine,
                       "--window", "3600", "--format", "json")
    assert hourly.json["clusters"]["prod"]["hold"] == 1
    lowered = fleet_cli(project, "rightsize", "--usage", usage, "--out", out, "--engine", engine,
                        "--min-samples", "1")
    assert "  lower  {user=orders} producer_byte_rate: 1MiB from {user=orders} -> 60KiB" in lowered.stdout


def test_both_engines_write_the_same_files_with_holds(project):
    for engine in ("local", "spark"):
        done = fleet_cli(project, "rightsize", "--usage", project / "usage.csv", "--out", project / engine,
                         "--engine", engine)
        assert done.exit_code == 0, done.stderr
    assert read_proposals(project / "local" / "proposals.parquet") == read_proposals(
        project / "spark" / "proposals.parquet")
    for name in ("prod/rightsize.yaml", "proposals.md"):
        assert (project / "local" / name).read_text() == (project / "spark" / name).read_text()
