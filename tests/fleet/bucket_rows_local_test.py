"""Quota buckets' usage rows on the local engine (DuckDB): ``impact_of_files`` gives the reference's
``impact_rows(states, read_usage(paths, buckets=True), q)`` — rows, unused entries, untimed clusters
and buckets — for usage mixing principals' rows with ``{user=U}`` and ``{client-id=C}`` buckets'
rows, written as Parquet (read by DuckDB itself) and as CSV or JSON lines (read by Python); known
answers for a measured bucket kept, merged and split by a plan; and ``fleet rightsize`` still
refuses a bucket's row, where it is, in the Python reader's words."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kqplan.core.entity import Entity
from kqplan.fleet.columnar import HELD, impact_of_files
from kqplan.fleet.columnar_read import kinds
from kqplan.fleet.impact import BucketRow, Impact, Throttled, impact_rows, newly_throttled, summarize
from kqplan.fleet.tables import write_buckets, write_impact
from kqplan.fleet.usage import USAGE_KEYS, Sample, Usage, parse_stat, read_usage
from kqplan.fleet.usage_schema import BUCKETS, CLIENT_BUCKET, USER_BUCKET
from kqplan.snapshot.file import write_snapshot
from tests.fleet.columnar_test import (
    assert_read_alike,
    assert_same_impact,
    usage_rows,
    write_files,
    write_parquet,
)
from tests.fleet.impact_test import TIMES, clients, states, users
from tests.helpers import run_cli, write_manifest

P = "producer_byte_rate"


# -- generated: principals' rows and buckets' rows, the reference's impact ---------------------------

@st.composite
def bucket_usages(draw: Any) -> Usage:
    """Samples of up to two clusters, each timed, untimed or (rarely) both: principals' rows and
    ``{user=U}``/``{client-id=C}`` buckets' rows (of the names the states use, so plans keep, merge
    and split them); and principals and buckets seen without any rate."""
    samples: list[Sample] = []
    seen: list[tuple[str, str, str]] = []
    quiet: set[tuple[str, str, str, str]] = set()
    for cluster in draw(st.sampled_from([["c"], ["c", "d"]])):
        timing = draw(st.sampled_from(["timed", "timed", "untimed", "mixed"]))

        def when() -> float | None:
            return (draw(st.sampled_from(TIMES)) if timing == "timed" else None if timing == "untimed"  # noqa: B023
                    else draw(st.sampled_from([None, *TIMES])))

        def bucket() -> tuple[str, str, str]:
            kind = draw(st.sampled_from(BUCKETS))
            return (draw(users), "", kind) if kind == USER_BUCKET else ("", draw(clients.filter(bool)), kind)

        for _ in range(draw(st.integers(0, 10))):
            samples.append(Sample(cluster, draw(users), draw(clients), draw(st.sampled_from(USAGE_KEYS)),
                                  draw(st.sampled_from([1.0, 50.0, 500.0, 5000.0])), when()))
        for _ in range(draw(st.integers(1, 8))):
            user, client_id, kind = bucket()
            samples.append(Sample(cluster, user, client_id, draw(st.sampled_from(USAGE_KEYS)),
                                  draw(st.sampled_from([1.0, 50.0, 500.0, 5000.0])), when(), kind))
        seen += draw(st.lists(st.tuples(st.just(cluster), users, clients), max_size=2))
        quiet |= {(cluster, *bucket()) for _ in range(draw(st.integers(0, 1)))}
    observed = Usage.of(samples, seen)
    return Usage(observed.samples, observed.principals, observed.buckets | quiet)


@st.composite
def mixed_formats(draw: Any) -> list[tuple[str, int]]:
    """One Parquet file and one CSV or JSON lines file at least, in any order."""
    parts = [("parquet", draw(st.integers(0, 83))), (draw(st.sampled_from(["csv", "jsonl"])),
                                                     draw(st.integers(0, 59)))]
    parts += draw(st.lists(st.tuples(st.sampled_from(["csv", "jsonl", "parquet"]), st.integers(0, 83)),
                           max_size=2))
    return draw(st.permutations(parts))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(["c", "d"]), st.tuples(states, states), min_size=1),
       bucket_usages(), st.sampled_from(["max", "p50", "p99", "p1"]), st.sampled_from([1.0, 60.0]),
       mixed_formats(), st.lists(st.booleans(), max_size=40), st.sampled_from([HELD, 0, 4]))
def test_generated_bucket_rows_give_the_reference_impact(tmp_path, fleet, usage, stat, window, parts, merge,
                                                         held):
    directory = Path(tempfile.mkdtemp(dir=tmp_path))
    paths = write_files(directory, usage_rows(usage, merge), parts)
    read = assert_read_alike(paths, buckets=True)  # DuckDB's reader: the Python reader's samples
    assert sorted(read.samples, key=Sample.sort_key) == sorted(usage.samples, key=Sample.sort_key)
    assert read.units == usage.units
    q = parse_stat(stat)
    expected = impact_rows(fleet, read, q, window=window)
    assert {r.bucket for r in expected.rows} <= {"", *BUCKETS}
    assert_same_impact(expected, impact_of_files(fleet, paths, q, window=window, held=held),
                       exact_usage=q is None or held == HELD)


# -- known answers ----------------------------------------------------------------------------------

def user_bucket(user: str, value: float, ts: float | None = 0.0) -> dict[str, Any]:
    return {"cluster": "prod", "user": user, "client_id": "", "bucket": USER_BUCKET, "ts": ts, P: value}


def pair(user: str, client_id: str, value: float, ts: float | None = 0.0) -> dict[str, Any]:
    return {"cluster": "prod", "user": user, "client_id": client_id, "bucket": "", "ts": ts, P: value}


def local_impact(tmp_path: Path, before: Any, after: Any, rows: list[dict[str, Any]], suffix: str,
                 style: int = 0) -> Impact:
    """The local engine's impact of ``rows`` written as one file, checked equal to the reference's."""
    directory = Path(tempfile.mkdtemp(dir=tmp_path))
    paths = write_files(directory, rows, [(suffix, style)])
    fleet = {"prod": (before, after)}
    got = impact_of_files(fleet, paths, None)
    assert_same_impact(impact_rows(fleet, read_usage(paths, buckets=True), None), got)
    return got


def produce(impact: Impact) -> list[Any]:
    return [r for r in impact.rows if r.key == P]


SUFFIXES = ["parquet", "csv", "jsonl"]


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_a_user_bucket_kept_raised_is_not_throttled_and_lowered_is(tmp_path, suffix):
    before = {Entity.user("alice"): {P: 100.0}}
    rows = [user_bucket("alice", 60.0), user_bucket("alice", 100.0, 30.0)]  # its minute's mean: 80
    raised = local_impact(tmp_path, before, {Entity.user("alice"): {P: 200.0}}, rows, suffix)
    [row] = produce(raised)
    assert (row.user, row.client_id, row.bucket, row.usage) == ("alice", "", USER_BUCKET, 100.0)
    assert (row.before_group, row.before_group_usage, row.before_split, row.throttled_before) == (
        "{user=alice}", 80.0, False, False)
    assert (row.after_value, row.after_group, row.after_group_usage, row.after_split, row.utilization,
            row.would_throttle) == (200.0, "{user=alice}", 80.0, False, 0.4, False)
    assert raised.buckets == [
        BucketRow("prod", P, "after", "{user=alice}", 200.0, "{user=alice}", 80.0, None, False, 1, 0),
        BucketRow("prod", P, "before", "{user=alice}", 100.0, "{user=alice}", 80.0, None, False, 1, 0)]
    lowered = local_impact(tmp_path, before, {Entity.user("alice"): {P: 50.0}}, rows, suffix)
    [row] = produce(lowered)
    assert (row.after_value, row.after_group_usage, row.throttled_before, row.would_throttle) == (
        50.0, 80.0, False, True)
    assert newly_throttled(lowered.rows) == [row]
    assert [b.throttled for b in lowered.buckets] == [True, False]  # after, before


@pytest.mark.parametrize("suffix", SUFFIXES)
@pytest.mark.parametrize("timed", [True, False])
def test_pair_rows_merged_into_a_new_user_bucket_are_summed(tmp_path, suffix, timed):
    """In one window, or without ts (the members' statistics summed): 70 + 60 in {user=alice}."""
    before = {Entity.user_client("alice", "a1"): {P: 100.0}, Entity.user_client("alice", "a2"): {P: 100.0}}
    after = {Entity.user("alice"): {P: 100.0}}
    rows = [pair("alice", "a1", 70.0, 0.0 if timed else None),
            pair("alice", "a2", 60.0, 10.0 if timed else None)]
    impact = local_impact(tmp_path, before, after, rows, suffix, style=1)
    assert impact.untimed == (frozenset() if timed else {"prod"})
    assert [(r.client_id, r.before_group, r.before_group_usage, r.throttled_before, r.after_group,
             r.after_group_usage, r.would_throttle) for r in produce(impact)] == [
        ("a1", "{user=alice, client-id=a1}", 70.0, False, "{user=alice}", 130.0, True),
        ("a2", "{user=alice, client-id=a2}", 60.0, False, "{user=alice}", 130.0, True)]
    assert [(b.side, b.bucket, b.usage, b.throttled, b.members) for b in impact.buckets] == [
        ("after", "{user=alice}", 130.0, True, 2), ("before", "{user=alice, client-id=a1}", 70.0, False, 1),
        ("before", "{user=alice, client-id=a2}", 60.0, False, 1)]


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_a_user_bucket_split_by_a_new_pair_entity_is_split_unknown(tmp_path, suffix):
    """{user=alice, client-id=a1} takes an unknown share of the measured {user=alice}'s 80: past its
    50 or not, no metric says; {user=alice} keeps at most 80 of its 100: not throttled."""
    before = {Entity.user("alice"): {P: 100.0}}
    after = {Entity.user("alice"): {P: 100.0}, Entity.user_client("alice", "a1"): {P: 50.0}}
    impact = local_impact(tmp_path, before, after, [user_bucket("alice", 80.0)], suffix, style=2)
    [row] = produce(impact)
    assert (row.before_group, row.before_group_usage, row.before_split, row.throttled_before) == (
        "{user=alice}", 80.0, False, False)
    assert (row.after_value, row.after_source, row.after_group, row.after_group_usage,
            row.after_group_usage_max, row.after_split, row.utilization, row.would_throttle) == (
        None, None, None, None, None, True, None, None)
    assert impact.buckets == [
        BucketRow("prod", P, "after", "{user=alice, client-id=a1}", 50.0, "{user=alice, client-id=a1}", None,
                  80.0, None, 0, 1),
        BucketRow("prod", P, "after", "{user=alice}", 100.0, "{user=alice}", None, 80.0, False, 0, 1),
        BucketRow("prod", P, "before", "{user=alice}", 100.0, "{user=alice}", 80.0, None, False, 1, 0)]
    assert summarize(impact, ["prod"])["prod"].unknown == (
        Throttled("{user=alice, client-id=a1}", P, 1, None, 50.0, 80.0),)
    # more than {user=alice}'s 100 in all: its share may pass it too
    over = local_impact(tmp_path, before, after, [user_bucket("alice", 120.0)], suffix)
    assert [(b.bucket, b.usage, b.usage_max, b.throttled) for b in over.buckets if b.side == "after"] == [
        ("{user=alice, client-id=a1}", None, 120.0, None), ("{user=alice}", None, 120.0, None)]
    assert [(r.throttled_before, r.would_throttle) for r in produce(over)] == [(True, None)]


def test_client_id_buckets_without_ts_and_without_users(tmp_path):
    """A file of {client-id=C} buckets' rows only, without ts, its user column all null (a Parquet
    null type, read by DuckDB itself): each bucket's usage is its statistic."""
    rows = [{"cluster": "prod", "user": "", "client_id": c, "bucket": CLIENT_BUCKET, "ts": None, P: v}
            for c, v in (("shared", 70.0), ("shared", 40.0), ("other", 45.0))]
    path = tmp_path / "clients.parquet"
    write_parquet(path, rows, 10)
    assert pq.read_schema(path).field("user").type == pa.null()
    assert kinds(path) is not None
    fleet = {"prod": ({}, {Entity.client(None): {P: 60.0}})}
    impact = impact_of_files(fleet, [path], None)
    assert_same_impact(impact_rows(fleet, read_usage([path], buckets=True), None), impact)
    assert impact.untimed == {"prod"}
    assert [(r.client_id, r.bucket, r.usage, r.before_group, r.after_source, r.after_group,
             r.after_group_usage, r.throttled_before, r.would_throttle) for r in produce(impact)] == [
        ("other", CLIENT_BUCKET, 45.0, None, "{client-id=<default>}", "{client-id=other}", 45.0, False,
         False),
        ("shared", CLIENT_BUCKET, 70.0, None, "{client-id=<default>}", "{client-id=shared}", 70.0, False,
         True)]


def test_the_tables_carry_the_new_columns(tmp_path):
    before = {Entity.user("alice"): {P: 100.0}}
    after = {Entity.user("alice"): {P: 100.0}, Entity.user_client("alice", "a1"): {P: 50.0}}
    impact = local_impact(tmp_path, before, after, [user_bucket("alice", 80.0)], "parquet")
    write_impact(impact.rows, tmp_path / "impact.parquet")
    write_buckets(impact.buckets, tmp_path / "buckets.parquet")
    table = pq.read_table(tmp_path / "impact.parquet")
    assert str(table.schema.field("would_throttle").type) == "bool"
    written = {r["key"]: r for r in table.to_pylist()}[P]
    assert [written[c] for c in ("bucket", "after_split", "throttled_before", "would_throttle")] == [
        USER_BUCKET, True, False, None]
    buckets = pq.read_table(tmp_path / "buckets.parquet")
    assert buckets.column_names == list(BucketRow._fields)
    assert [BucketRow(**r) for r in buckets.to_pylist()] == impact.buckets


# -- fleet rightsize still refuses a bucket's row (fleet impact reads it) -----------------------------

def test_rightsize_refuses_a_bucket_row_where_it_is_and_impact_reads_it(tmp_path):
    write_snapshot(tmp_path / "s.json", {Entity.user("alice"): {P: 100.0}}, "prod-id")
    config = tmp_path / "kqplan.toml"
    write_manifest(tmp_path / "m" / "q.yaml",
                   "entities:\n  - user: alice\n    quotas: {producer_byte_rate: 50}\n")
    config.write_text('[clusters.prod]\nid = "prod-id"\nsnapshot = "s.json"\nmanifests = ["m"]\n',
                      encoding="utf-8")
    usage = tmp_path / "usage.csv"
    usage.write_text("cluster,user,client_id,bucket,ts,producer_byte_rate\nprod,alice,a1,,1,30\n"
                     "prod,alice,,user,1,80\n", encoding="utf-8")
    refused = run_cli("--config", config, "fleet", "rightsize", "--usage", usage, "--out", tmp_path / "out",
                      "--min-samples", "1")
    assert refused.exit_code == 1
    assert "internal error" not in refused.stderr
    assert f"{usage}: row 2: a row of the quota bucket {{user=alice}} (bucket user)" in refused.stderr
    assert "{user=<default>, client-id=<default>}" in refused.stderr  # the hint: how to give pair rows
    assert not (tmp_path / "out").exists()
    read = run_cli("--config", config, "fleet", "impact", "--usage", usage, "--out", tmp_path / "impact")
    assert read.exit_code == 0, read.stdout + read.stderr
    rows = pq.read_table(tmp_path / "impact" / "impact.parquet").to_pylist()
    assert {(r["client_id"], r["bucket"]) for r in rows if r["key"] == P} == {("a1", ""), ("", USER_BUCKET)}
