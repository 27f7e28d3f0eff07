"""Usage rows of quota buckets on the Spark engine: ``fleet impact`` takes the rows of a ``{user=U}``
or ``{client-id=C}`` bucket Kafka measured and gives the reference's rows, buckets (kept, merged,
split: known usage, the most it may be, the verdict or "split unknown"), unused entries and
summary, on generated fleets mixing principals' and buckets' rows; ``fleet rightsize`` on Spark
still refuses a bucket's row, naming the file, the row and the column as the Python reader does.
(This file asks for the session ``spark`` fixture: it sorts after connect_test.py.)"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kqplan.core.entity import Entity
from kqplan.core.errors import KqplanError
from kqplan.core.state import QuotaState
from kqplan.fleet.impact import BucketRow, Impact, ImpactRow, UnusedRow, impact_rows, summarize
from kqplan.fleet.rightsize import Rules
from kqplan.fleet.spark_assembled import impact_rows as spark_impact_rows
from kqplan.fleet.spark_rightsize import spark_proposal_rows
from kqplan.fleet.spark_tables import write_impact
from kqplan.fleet.spark_usage import check, samples_frame, usage_frame
from kqplan.fleet.tables import histogram
from kqplan.fleet.usage import USAGE_KEYS, Sample, Usage, parse_stat, read_usage

P = "producer_byte_rate"
users = st.sampled_from(["alice", "bob", "日本", "<default>"])
clients = st.sampled_from(["app", "batch", "with space", ""])
entities = st.one_of(st.builds(Entity.user, st.one_of(st.none(), users)),
                     st.builds(Entity.client, st.one_of(st.none(), clients.filter(bool))),
                     st.builds(Entity.user_client, st.one_of(st.none(), users),
                               st.one_of(st.none(), clients.filter(bool))))
quotas = st.dictionaries(st.sampled_from(USAGE_KEYS[:2]), st.sampled_from([10.0, 100.0, 1000.0]),
                         min_size=1, max_size=2)
states = st.dictionaries(entities, quotas, max_size=4)
TIMES = [0.0, 30.0, 61.0, 125.0]


@st.composite
def units(draw: Any, cluster: str) -> tuple[str, str, str, str]:
    """A principal, a {user=U} bucket or a {client-id=C} bucket of ``cluster``."""
    kind = draw(st.sampled_from(["", "", "user", "client-id"]))
    if kind == "user":
        return cluster, draw(users), "", kind
    if kind == "client-id":
        return cluster, "", draw(clients.filter(bool)), kind
    return cluster, draw(users), draw(clients), kind


@st.composite
def usages(draw: Any) -> Usage:
    """Rows of up to two clusters, principals' and buckets' mixed, each cluster timed, untimed or
    both; and units seen without any rate."""
    samples: list[Sample] = []
    seen: list[tuple[str, str, str, str]] = []
    for cluster in draw(st.sampled_from([["c"], ["c", "d"]])):
        timing = draw(st.sampled_from(["timed", "timed", "untimed", "mixed"]))
        for _ in range(draw(st.integers(1, 8))):
            cluster_, user, client_id, kind = draw(units(cluster))
            ts = (draw(st.sampled_from(TIMES)) if timing == "timed" else None if timing == "untimed"
                  else draw(st.sampled_from([None, *TIMES])))
            samples.append(Sample(cluster_, user, client_id, draw(st.sampled_from(USAGE_KEYS[:2])),
                                  draw(st.sampled_from([1.0, 8.0, 50.0, 500.0])), ts, kind))
        seen += draw(st.lists(units(cluster), max_size=2))
    observed = Usage.of(samples, [u[:3] for u in seen if not u[3]])
    return Usage(observed.samples, observed.principals, observed.buckets | {u for u in seen if u[3]})


def same(a: object, b: object) -> bool:
    """Equal, floats up to summation order and percentile rounding (rows, named tuples, field by
    field)."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isclose(a, b, rel_tol=1e-9))


def assert_same_impact(local: Impact, on_spark: Impact) -> None:
    assert len(on_spark.rows) == len(local.rows)
    for a, b in zip(local.rows, on_spark.rows, strict=True):
        assert same(a, b), (a, b)
    assert len(on_spark.buckets) == len(local.buckets), (local.buckets, on_spark.buckets)
    for x, y in zip(local.buckets, on_spark.buckets, strict=True):
        assert same(x, y), (x, y)
    assert on_spark.unused == local.unused
    assert on_spark.untimed == local.untimed


FLEETS = st.dictionaries(st.sampled_from(["c", "d"]), st.tuples(states, states), min_size=1)


FLEET = dict[str, tuple[QuotaState, QuotaState]]


# 12 examples in all, a test per statistic: each Spark job takes seconds (the whole file took 7 min
# in CI with 30 and 10; the local engine's differential test draws 80 of the same shapes)
@pytest.mark.parametrize("stat", ["max", "p99"])
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fleet=FLEETS, usage=usages(), window=st.sampled_from([1.0, 60.0]))
def test_spark_gives_the_reference_s_rows_and_buckets(spark: Any, stat: str, fleet: FLEET, usage: Usage,
                                                       window: float) -> None:
    q = parse_stat(stat)
    local = impact_rows(fleet, usage, q, window=window)
    assert_same_impact(local, spark_impact_rows(spark, fleet, samples_frame(spark, usage), q, window=window))


def _written(path: Path, kind: type) -> list[Any]:
    names = kind._fields
    return sorted(kind(**{n: r[n] for n in names}) for r in pq.read_table(path).to_pylist())


@pytest.mark.parametrize("stat", ["max", "p99"])
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fleet=FLEETS, usage=usages())
def test_spark_writes_the_reference_s_tables_and_summary(spark: Any, tmp_path_factory: pytest.TempPathFactory,
                                                         stat: str, fleet: FLEET, usage: Usage) -> None:
    q = parse_stat(stat)
    out = tmp_path_factory.mktemp("out")
    local = impact_rows(fleet, usage, q)
    summary, histograms = write_impact(spark, fleet, samples_frame(spark, usage), q, out=out.as_uri())
    written = Impact(_written(out / "impact.parquet", ImpactRow), _written(out / "unused.parquet", UnusedRow),
                     local.untimed, _written(out / "buckets.parquet", BucketRow))
    assert_same_impact(local, written)
    expected = summarize(local, fleet)
    assert summary.keys() == expected.keys()
    for cluster, mine in summary.items():
        assert same(mine, expected[cluster]), (mine, expected[cluster])
        assert histograms.get(cluster) == histogram([r for r in local.rows if r.cluster == cluster])


# -- kept, merged and split buckets, by hand ---------------------------------------------------------

def both(spark: Any, fleet: FLEET, samples: list[Sample]) -> Impact:
    """The reference's impact, after checking that Spark's is the same."""
    local = impact_rows(fleet, Usage.of(samples), None)
    assert_same_impact(local, spark_impact_rows(spark, fleet, samples_frame(spark, Usage.of(samples)), None))
    return local


def row(impact: Impact, user: str, client_id: str, bucket: str) -> ImpactRow:
    return next(r for r in impact.rows
                if (r.user, r.client_id, r.bucket, r.key) == (user, client_id, bucket, P))


def buckets(impact: Impact, side: str) -> list[tuple[Any, ...]]:
    return [(b.bucket, b.usage, b.usage_max, b.throttled, b.members, b.shares) for b in impact.buckets
            if b.key == P and b.side == side]


def test_a_kept_user_bucket_is_relieved_by_a_higher_quota(spark: Any) -> None:
    """{user=alice} measured at 15 against 10, raised to 20: all its members stay in it."""
    fleet = {"c": ({Entity.user("alice"): {P: 10.0}}, {Entity.user("alice"): {P: 20.0}})}
    impact = both(spark, fleet, [Sample("c", "alice", "", P, 15.0, 0.0, "user")])
    kept = row(impact, "alice", "", "user")
    assert (kept.before_group, kept.before_group_usage, kept.before_split, kept.throttled_before) == (
        "{user=alice}", 15.0, False, True)
    assert (kept.after_group, kept.after_group_usage, kept.after_split, kept.utilization,
            kept.would_throttle) == ("{user=alice}", 15.0, False, 0.75, False)
    assert buckets(impact, "after") == [("{user=alice}", 15.0, None, False, 1, 0)]
    summary = summarize(impact, fleet)["c"]
    assert [(t.bucket, t.members) for t in summary.relieved] == [("{user=alice}", 1)]
    assert (summary.principals, summary.newly_throttled, summary.unknown) == (1, (), ())


def test_a_shared_bucket_sums_its_members_means_window_by_window(spark: Any) -> None:
    """{user=alice} shared by (alice, app) and (alice, batch): app's two samples in the first
    window are one mean (4 and 8: 6), so the bucket is 6 + 5 = 11 there and 2 + 3 = 5 in the next;
    its usage (max) 11 against 10. Spark reads the members' means again for a shared bucket
    (spark_impact.unit_means): their max per window would give 13."""
    fleet = {"c": ({Entity.user("alice"): {P: 10.0}}, {Entity.user("alice"): {P: 10.0}})}
    samples = [Sample("c", "alice", client_id, P, value, ts) for client_id, value, ts in [
        ("app", 4.0, 0.0), ("app", 8.0, 30.0), ("batch", 5.0, 10.0), ("app", 2.0, 70.0),
        ("batch", 3.0, 80.0)]]
    impact = both(spark, fleet, samples)
    assert buckets(impact, "after") == [("{user=alice}", 11.0, None, True, 2, 0)]


def test_a_client_id_bucket_and_a_principal_merge_into_one(spark: Any) -> None:
    """{client-id=shared} measured at 6 (all its users), and bob's own (bob, shared) at 5 in
    {user=bob, client-id=shared}; the plan removes bob's pair quota: both in {client-id=shared},
    11 against 10, newly throttled."""
    pair = Entity.user_client("bob", "shared")
    before = {Entity.client("shared"): {P: 10.0}, pair: {P: 100.0}}
    fleet = {"c": (before, {Entity.client("shared"): {P: 10.0}})}
    impact = both(spark, fleet, [Sample("c", "", "shared", P, 6.0, 0.0, "client-id"),
                                 Sample("c", "bob", "shared", P, 5.0, 0.0)])
    measured, bob = row(impact, "", "shared", "client-id"), row(impact, "bob", "shared", "")
    assert (measured.before_group, measured.before_group_usage, measured.throttled_before) == (
        "{client-id=shared}", 6.0, False)
    assert (bob.before_group, bob.throttled_before) == ("{user=bob, client-id=shared}", False)
    for merged in (measured, bob):
        assert (merged.after_group, merged.after_group_usage, merged.after_split, merged.would_throttle) == (
            "{client-id=shared}", 11.0, False, True)
    assert buckets(impact, "after") == [("{client-id=shared}", 11.0, None, True, 2, 0)]
    summary = summarize(impact, fleet)["c"]
    assert [(t.bucket, t.members, t.usage, t.quota) for t in summary.newly_throttled] == [
        ("{client-id=shared}", 2, 11.0, 10.0)]


def test_a_user_bucket_split_per_client_id_is_unknown_where_its_share_decides(spark: Any) -> None:
    """{user=alice} measured at 15 against 10; the plan sets {user=alice, client-id=<default>} 10
    instead: each of alice's client-ids its own bucket, how the 15 divides no metric says. Her a1
    alone is 12 (over: throttled whatever the share); a2's bucket may pass 10 or not (unknown); and
    the client-ids no row names, ``(others)``, likewise."""
    fleet = {"c": ({Entity.user("alice"): {P: 10.0}}, {Entity.user_client("alice", None): {P: 10.0}})}
    impact = both(spark, fleet, [Sample("c", "alice", "", P, 15.0, 0.0, "user"),
                                 Sample("c", "alice", "a1", P, 12.0, 0.0),
                                 Sample("c", "alice", "a2", P, 1.0, 0.0)])
    split = row(impact, "alice", "", "user")
    assert (split.before_group, split.before_group_usage, split.throttled_before) == (
        "{user=alice}", 28.0, True)
    assert (split.after_value, split.after_group, split.after_group_usage, split.after_split,
            split.would_throttle) == (None, None, None, True, None)
    a1, a2 = row(impact, "alice", "a1", ""), row(impact, "alice", "a2", "")
    assert (a1.after_group_usage, a1.after_group_usage_max, a1.would_throttle) == (12.0, 27.0, True)
    assert (a2.after_group_usage, a2.after_group_usage_max, a2.would_throttle) == (1.0, 16.0, None)
    assert buckets(impact, "after") == [("{user=alice, client-id=(others)}", None, 15.0, None, 0, 1),
                                        ("{user=alice, client-id=a1}", 12.0, 27.0, True, 1, 1),
                                        ("{user=alice, client-id=a2}", 1.0, 16.0, None, 1, 1)]
    summary = summarize(impact, fleet)["c"]
    assert [(t.bucket, t.members, t.usage, t.usage_max) for t in summary.unknown] == [
        ("{user=alice, client-id=(others)}", 1, None, 15.0), ("{user=alice, client-id=a2}", 2, 1.0, 16.0)]
    assert [t.bucket for t in summary.newly_throttled] == []  # a1 was throttled before too


def test_a_split_whose_shares_cannot_pass_their_quotas_is_not_throttled(spark: Any) -> None:
    fleet = {"c": ({Entity.user("alice"): {P: 10.0}}, {Entity.user_client("alice", None): {P: 10.0}})}
    impact = both(spark, fleet, [Sample("c", "alice", "", P, 4.0, 0.0, "user"),
                                 Sample("c", "alice", "a1", P, 1.0, 0.0)])
    split = row(impact, "alice", "", "user")
    assert buckets(impact, "after") == [("{user=alice, client-id=(others)}", None, 4.0, False, 0, 1),
                                        ("{user=alice, client-id=a1}", 1.0, 5.0, False, 1, 1)]
    assert (split.after_split, split.throttled_before, split.would_throttle) == (True, False, False)
    assert summarize(impact, fleet)["c"].unknown == ()


# -- what each job reads on Spark --------------------------------------------------------------------

RIGHTSIZE = Rules.of(stat="max", headroom=1.5, tolerance=0.5)


@pytest.mark.parametrize(("name", "text", "expected"), [
    ("user.csv", "cluster,user,client_id,bucket,producer_byte_rate\nc,alice,a1,,5\nc,alice,,user,15\n",
     "row 2: a row of the quota bucket {user=alice} (bucket user)"),
    ("client.jsonl", '{"cluster": "c", "client_id": "app", "bucket": "client-id", "producer_byte_rate": 3}\n',
     "line 1: a row of the quota bucket {client-id=app} (bucket client-id)"),
])
def test_rightsize_on_spark_refuses_a_bucket_row_as_the_python_reader_does(
        spark: Any, tmp_path: Path, name: str, text: str, expected: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(KqplanError) as local:
        read_usage([path])
    assert f"{path}: {expected}" in local.value.message
    with pytest.raises(KqplanError) as on_spark:  # as fleet rightsize reads it: checked as it aggregates
        spark_proposal_rows(spark, {"c": {}}, usage_frame(spark, [path], checked=False), RIGHTSIZE)
    assert (on_spark.value.message, on_spark.value.hint) == (local.value.message, local.value.hint)
    frame = usage_frame(spark, [path], buckets=True)  # fleet impact takes it
    assert frame.where("bucket != ''").count() == 1
    with pytest.raises(KqplanError) as checked:  # a frame checked for impact: rightsize refuses it still
        spark_proposal_rows(spark, {"c": {}}, frame, RIGHTSIZE)
    assert checked.value.message.startswith("the usage: a row: a row of a quota bucket (bucket not empty)")
    assert impact_rows({"c": ({}, {})}, read_usage([path], buckets=True), None).rows == spark_impact_rows(
        spark, {"c": ({}, {})}, usage_frame(spark, [path], checked=False), None).rows


@pytest.mark.parametrize(("text", "expected"), [
    ("c,alice,a1,user,5\n", "row 1: a {user=U} bucket's row (bucket user) names no client_id: "
     "client_id is 'a1'"),
    ("c,bob,app,client-id,5\n", "row 1: a {client-id=C} bucket's row (bucket client-id) names no user: "
     "user is 'bob'"),
    ("c,,,client-id,5\n", "row 1: a {client-id=C} bucket's row (bucket client-id) names its client-id"),
    ("c,alice,,users,5\n", "row 1: bucket is not one of user, client-id (or empty): 'users'"),
    ("c,,app,,5\n", "row 1: cluster and user are required: user is empty"),
])
def test_impact_on_spark_refuses_a_misnamed_bucket_row_as_the_python_reader_does(
        spark: Any, tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "u.csv"
    path.write_text("cluster,user,client_id,bucket,producer_byte_rate\n" + text)
    with pytest.raises(KqplanError) as local:
        read_usage([path], buckets=True)
    assert f"{path}: {expected}" in local.value.message
    with pytest.raises(KqplanError) as on_spark:
        spark_impact_rows(spark, {"c": ({}, {})}, usage_frame(spark, [path], checked=False), None)
    assert (on_spark.value.message, on_spark.value.hint) == (local.value.message, local.value.hint)
    with pytest.raises(KqplanError) as checked:
        check(usage_frame(spark, [path], checked=False), buckets=True)
    assert (checked.value.message, checked.value.hint) == (local.value.message, local.value.hint)


def test_bucket_rows_of_a_table_read_and_refused(spark: Any) -> None:
    schema = ("cluster string, user string, client_id string, bucket string, ts double, "
              "producer_byte_rate double")
    rows = [("c", "alice", None, "user", 0.0, 15.0), ("c", None, "app", "client-id", 0.0, 3.0)]
    spark.createDataFrame(rows, schema).createOrReplaceTempView("kq_measured")
    frame = usage_frame(spark, [], ["kq_measured"], buckets=True)
    assert sorted(tuple(r) for r in frame.select("cluster", "user", "client_id", "bucket").collect()) == [
        ("c", "", "app", "client-id"), ("c", "alice", "", "user")]
    fleet = {"c": ({}, {Entity.user("alice"): {P: 10.0}})}
    samples = [Sample("c", "alice", "", P, 15.0, 0.0, "user"),
               Sample("c", "", "app", P, 3.0, 0.0, "client-id")]
    assert_same_impact(impact_rows(fleet, Usage.of(samples), None),
                       spark_impact_rows(spark, fleet, frame, None))
    bad = [("c", "bob", "app", "client-id", 0.0, 3.0)]
    spark.createDataFrame(bad, schema).createOrReplaceTempView("kq_bad")
    with pytest.raises(KqplanError) as refused:
        usage_frame(spark, [], ["kq_bad"], buckets=True)
    assert refused.value.message == ("table kq_bad: a row: a {client-id=C} bucket's row (bucket client-id) "
                                     "names no user: user is 'bob'")


def test_a_user_named_like_the_others_class_is_shown_as_its_name(spark: Any, tmp_path: Path) -> None:
    """A user literally named ``\\x00others`` (a backslash, then text) is shown as that name —
    ``{user=\\\\x00others}`` — beside the class of the client-ids no row names, ``(others)``: by the
    reference, the local engine, Spark's collected rows and the rule of the tables Spark writes."""
    from kqplan.fleet.columnar import impact_of_files
    from tests.fleet.columnar_test import assert_same_impact, usage_rows, write_parquet

    name = "\\x00others"
    fleet = {"c": ({Entity.user(name): {P: 10.0}}, {Entity.user_client(name, None): {P: 10.0}})}
    samples = [Sample("c", name, "", P, 15.0, 0.0, "user"), Sample("c", name, "a1", P, 12.0, 0.0)]
    impact = both(spark, fleet, samples)
    assert [b[0] for b in buckets(impact, "before")] == ["{user=\\\\x00others}"]
    assert [b[0] for b in buckets(impact, "after")] == ["{user=\\\\x00others, client-id=(others)}",
                                                        "{user=\\\\x00others, client-id=a1}"]
    assert {r.before_source for r in impact.rows} - {None} == {"{user=\\\\x00others}"}
    write_parquet(tmp_path / "usage.parquet", usage_rows(Usage.of(samples), []), 0)
    assert_same_impact(impact, impact_of_files(fleet, [tmp_path / "usage.parquet"], None))
    # the tables Spark writes itself put (others) in by the same rule (spark_tables._others)
    from kqplan.fleet.spark_tables import _others

    texts = [b.bucket.replace("(others)", "\\x00others") for b in impact.buckets] + ["{user=\\x00others}"]
    frame = spark.createDataFrame([(t,) for t in texts], "t string")
    assert [r[0] for r in frame.select(_others(frame["t"])).collect()] == [
        *(b.bucket for b in impact.buckets), "{user=(others)}"]
