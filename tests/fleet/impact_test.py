"""impact: quotas are enforced per bucket (the connections Kafka makes share one), both engines give
the same rows on generated fleets that put several principals in one bucket, and they agree with
kqplan resolve and the core's bucket rule principal by principal."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kqplan.core.buckets import bucket_of
from kqplan.core.entity import Entity
from kqplan.core.resolve import resolve
from kqplan.fleet.impact import impact_rows, newly_throttled
from kqplan.fleet.spark_assembled import impact_rows as spark_impact_rows
from kqplan.fleet.spark_usage import samples_frame
from kqplan.fleet.usage import USAGE_KEYS, Sample, Usage, parse_stat, statistic

users = st.sampled_from(["alice", "bob", "with space", "日本", "<default>"])
clients = st.sampled_from(["app", "batch", "shared", ""])
names = st.one_of(st.none(), users)
client_names = st.one_of(st.none(), clients.filter(bool))
entities = st.one_of(st.builds(Entity.user, names), st.builds(Entity.client, client_names),
                     st.builds(Entity.user_client, names, client_names))
quotas = st.dictionaries(st.sampled_from(USAGE_KEYS), st.sampled_from([10.0, 100.0, 1000.0]),
                         min_size=1, max_size=2)
states = st.dictionaries(entities, quotas, max_size=5)
TIMES = [0.0, 30.0, 61.0, 125.0, 3600.5]


@st.composite
def usages(draw):
    """Samples of up to two clusters, each timed, untimed or (rarely) both; and principals seen
    without any rate."""
    samples, seen = [], []
    for cluster in draw(st.sampled_from([["c"], ["c", "d"]])):
        timing = draw(st.sampled_from(["timed", "timed", "untimed", "mixed"]))
        for _ in range(draw(st.integers(1, 14))):
            ts = (draw(st.sampled_from(TIMES)) if timing == "timed" else None if timing == "untimed"
                  else draw(st.sampled_from([None, *TIMES])))
            samples.append(Sample(cluster, draw(users), draw(clients), draw(st.sampled_from(USAGE_KEYS)),
                                  draw(st.sampled_from([1.0, 50.0, 500.0, 5000.0])), ts))
        seen += draw(st.lists(st.tuples(st.just(cluster), users, clients), max_size=2))
    return Usage.of(samples, seen)


def same(a: object, b: object) -> bool:
    """Equal, floats up to summation order and percentile rounding."""
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isclose(a, b, rel_tol=1e-9))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(["c", "d"]), st.tuples(states, states), min_size=1),
       usages(), st.sampled_from(["max", "p50", "p99"]), st.sampled_from([1.0, 60.0]))
def test_both_engines_agree_and_match_resolve_and_the_bucket_rule(spark, fleet, usage, stat, window):
    _both_agree(spark, fleet, usage, stat, window)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(["c", "d"]), st.tuples(states, states), min_size=1),
       usages(), st.sampled_from(["p50", "p99", "p1"]), st.sampled_from([1.0, 60.0]))
def test_every_unit_taken_as_heavy_gives_the_same_rows(spark, fleet, usage, stat, window):
    """Every unit through kqplan/fleet/spark_heavy.py's bounded quantile (as if each had millions
    of samples): the same rows and buckets."""
    from kqplan.fleet import spark_heavy

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(spark_heavy, "HEAVY", 1)
        patch.setattr(spark_heavy, "SAMPLED", 1.0)
        _both_agree(spark, fleet, usage, stat, window)


def _both_agree(spark, fleet, usage, stat, window):
    q = parse_stat(stat)
    local = impact_rows(fleet, usage, q, window=window)
    on_spark = spark_impact_rows(spark, fleet, samples_frame(spark, usage), q, window=window)
    assert on_spark.unused == local.unused
    assert on_spark.untimed == local.untimed
    assert len(on_spark.rows) == len(local.rows)
    for a, b in zip(local.rows, on_spark.rows, strict=True):
        assert type(a) is type(b), (a, b)
        assert all(same(x, y) for x, y in zip(a, b, strict=True)), (a, b)
    assert len(on_spark.buckets) == len(local.buckets)
    for c, d in zip(local.buckets, on_spark.buckets, strict=True):
        assert type(c) is type(d), (c, d)
        assert all(same(x, y) for x, y in zip(c, d, strict=True)), (c, d)
    assert not any(r.before_split or r.after_split or r.bucket for r in local.rows)  # principals: one bucket
    observed = {p for p in usage.principals if p[0] in fleet}
    assert {(r.cluster, r.user, r.client_id) for r in local.rows} == observed  # four rows each
    for row in local.rows:  # the local engine is kqplan resolve, key by key, and the core's buckets
        for state, value, source, group in ((fleet[row.cluster][0], row.before_value, row.before_source,
                                             row.before_group),
                                            (fleet[row.cluster][1], row.after_value, row.after_source,
                                             row.after_group)):
            resolved = resolve(state, row.user, row.client_id)[row.key]
            assert (value, source) == (resolved.value, resolved.source.display if resolved.source else None)
            expected = bucket_of(resolved.source, row.user, row.client_id)
            assert group == (expected.display if expected else None)
        assert row.would_throttle == (row.after_group_usage is not None and row.after_value is not None
                                      and row.after_group_usage > row.after_value)


def test_the_alice_example_three_clients_share_the_user_quota():
    """{user=alice} 10 MB/s; alice's a1, a2 and a3 each produce 5 MB/s at the same time: their
    bucket {user=alice} carries 15 MB/s and Kafka throttles all three; each alone uses half."""
    after = {Entity.user("alice"): {"producer_byte_rate": 10e6}}
    samples = [Sample("c", "alice", f"a{i}", "producer_byte_rate", 5e6, ts) for i in (1, 2, 3)
               for ts in (0.0, 10.0, 20.0)]
    impact = impact_rows({"c": ({}, after)}, samples, None)
    rows = [r for r in impact.rows if r.key == "producer_byte_rate"]
    assert [(r.client_id, r.usage, r.after_group, r.after_group_usage, r.utilization, r.would_throttle)
            for r in rows] == [(f"a{i}", 5e6, "{user=alice}", 15e6, 1.5, True) for i in (1, 2, 3)]
    assert [(r.client_id, r.before_group) for r in newly_throttled(impact.rows)] == [
        ("a1", None), ("a2", None), ("a3", None)]  # unlimited before: throttled only after


def test_users_share_a_client_id_quota_and_a_default_user_quota_is_per_user():
    after = {Entity.client("shared-app"): {"producer_byte_rate": 100.0},
             Entity.user(None): {"consumer_byte_rate": 100.0}}
    samples = [Sample("c", u, "shared-app", k, 60.0, 0.0) for u in ("u1", "u2")
               for k in ("producer_byte_rate", "consumer_byte_rate")]
    rows = {(r.user, r.key): r for r in impact_rows({"c": (after, after)}, samples, None).rows}
    for user in ("u1", "u2"):
        produce, consume = rows[user, "producer_byte_rate"], rows[user, "consumer_byte_rate"]
        assert (produce.after_group, produce.after_group_usage, produce.would_throttle) == (
            "{client-id=shared-app}", 120.0, True)
        assert (consume.after_source, consume.after_group, consume.after_group_usage,
                consume.would_throttle) == ("{user=<default>}", f"{{user={user}}}", 60.0, False)


def test_an_empty_client_id_joins_the_user_bucket_and_user_client_levels_are_per_pair():
    after = {Entity.user("u"): {"producer_byte_rate": 100.0},
             Entity.user_client(None, None): {"consumer_byte_rate": 100.0}}
    samples = [Sample("c", "u", c, k, 70.0, 0.0) for c in ("", "x", "y")
               for k in ("producer_byte_rate", "consumer_byte_rate")]
    rows = {(r.client_id, r.key): r for r in impact_rows({"c": (after, after)}, samples, None).rows}
    for client in ("", "x", "y"):
        produce = rows[client, "producer_byte_rate"]
        assert (produce.after_group, produce.after_group_usage) == ("{user=u}", 210.0)
    # {user=<default>, client-id=<default>} is enforced per (U, C); an empty client-id never sees it
    assert [(c, rows[c, "consumer_byte_rate"].after_group, rows[c, "consumer_byte_rate"].after_group_usage)
            for c in ("", "x", "y")] == [("", None, None), ("x", "{user=u, client-id=x}", 70.0),
                                         ("y", "{user=u, client-id=y}", 70.0)]


def test_a_bucket_is_summed_window_by_window():
    """Each member's mean per window, summed per window, then the statistic over the windows:
    a1 and a2 peak in different minutes, so the bucket's peak is not the sum of their peaks."""
    after = {Entity.user("u"): {"producer_byte_rate": 1000.0}}
    p = "producer_byte_rate"
    samples = [Sample("c", "u", "a1", p, v, t) for v, t in ((100, 0), (300, 30), (50, 60))]
    samples += [Sample("c", "u", "a2", p, v, t) for v, t in ((10, 5), (500, 70), (700, 110))]
    for stat, expected in (("max", 650.0), ("p50", statistic([210.0, 650.0], 0.5))):
        rows = impact_rows({"c": (after, after)}, samples, parse_stat(stat)).rows
        assert {r.after_group_usage for r in rows if r.key == "producer_byte_rate"} == {expected}
    # windows of 1 s: every sample alone in its window
    rows = impact_rows({"c": (after, after)}, samples, None, window=1.0).rows
    assert {r.after_group_usage for r in rows if r.key == "producer_byte_rate"} == {700.0}


def test_without_ts_a_bucket_sums_its_members_statistics_and_says_so():
    after = {Entity.user("u"): {"producer_byte_rate": 1000.0}}
    p = "producer_byte_rate"
    samples = [Sample("c", "u", "a1", p, 300.0), Sample("c", "u", "a1", p, 100.0),
               Sample("c", "u", "a2", p, 700.0, 5.0)]  # one sample with a time is not enough
    impact = impact_rows({"c": (after, after)}, samples, None)
    assert impact.untimed == {"c"}
    assert {r.after_group_usage for r in impact.rows if r.key == "producer_byte_rate"} == {1000.0}


def test_a_principal_without_any_rate_gets_its_four_rows():
    impact = impact_rows({"c": ({}, {Entity.user(None): {"producer_byte_rate": 5.0}})},
                         Usage.of([], [("c", "quiet", "app")]), None)
    assert [(r.user, r.key, r.usage, r.after_value, r.after_group, r.after_group_usage, r.would_throttle)
            for r in impact.rows] == [("quiet", k, None, 5.0 if k == "producer_byte_rate" else None,
                                       "{user=quiet}" if k == "producer_byte_rate" else None, None, False)
                                      for k in sorted(USAGE_KEYS)]


@pytest.mark.parametrize(("values", "q", "expected"), [
    ([1, 2, 3, 4], None, 4), ([1, 2, 3, 4], 0.5, 2.5), ([10, 20], 0.99, 19.9), ([5], 0.99, 5)])
def test_statistic_is_numpy_linear_interpolation(values, q, expected):
    assert statistic([float(v) for v in values], q) == pytest.approx(expected)
