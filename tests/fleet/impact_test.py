"""impact: both engines give the same rows on generated fleets and usage, and they agree with
kqplan resolve principal by principal (empty client-ids and unlimited principals included)."""

from __future__ import annotations

import math
from dataclasses import astuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kqplan.core.entity import Entity
from kqplan.core.resolve import resolve
from kqplan.fleet.impact import USAGE_KEYS, Sample, impact_rows, parse_stat, statistic
from kqplan.fleet.spark import impact_rows as spark_impact_rows
from kqplan.fleet.spark import samples_frame

users = st.sampled_from(["alice", "bob", "with space", "日本"])
clients = st.sampled_from(["app", "batch", ""])
names = st.one_of(st.none(), users)
client_names = st.one_of(st.none(), clients.filter(bool))
entities = st.one_of(st.builds(Entity.user, names), st.builds(Entity.client, client_names),
                     st.builds(Entity.user_client, names, client_names))
quotas = st.dictionaries(st.sampled_from(USAGE_KEYS), st.sampled_from([10.0, 100.0, 1000.0]),
                         min_size=1, max_size=2)
states = st.dictionaries(entities, quotas, max_size=5)
samples = st.lists(st.builds(Sample, st.just("c"), users, clients, st.sampled_from(USAGE_KEYS),
                             st.sampled_from([1.0, 50.0, 500.0, 5000.0])), min_size=1, max_size=25)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(states, states, samples, st.sampled_from(["max", "p50", "p99"]))
def test_both_engines_agree_and_match_resolve(spark, before, after, usage, stat):
    q = parse_stat(stat)
    local = impact_rows({"c": (before, after)}, usage, q)
    on_spark = spark_impact_rows(spark, {"c": (before, after)}, samples_frame(spark, usage), q)
    assert on_spark[1] == local[1]
    assert len(on_spark[0]) == len(local[0])
    for a, b in zip(local[0], on_spark[0], strict=True):
        for x, y in zip(astuple(a), astuple(b), strict=True):  # percentiles: float rounding only
            assert x == y or (isinstance(x, float) and isinstance(y, float) and math.isclose(x, y))
    for row in local[0]:  # the local engine is kqplan resolve, key by key
        resolved = resolve(after, row.user, row.client_id)[row.key]
        assert (row.after_value, row.after_source) == (
            resolved.value, resolved.source.display if resolved.source else None)


@pytest.mark.parametrize(("values", "q", "expected"), [
    ([1, 2, 3, 4], None, 4), ([1, 2, 3, 4], 0.5, 2.5), ([10, 20], 0.99, 19.9), ([5], 0.99, 5)])
def test_statistic_is_numpy_linear_interpolation(values, q, expected):
    assert statistic([float(v) for v in values], q) == pytest.approx(expected)
