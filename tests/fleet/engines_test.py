"""Both engines produce identical change tables on generated fleets (one definition, two executions)."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kqplan.core.entity import Entity
from kqplan.core.ownership import Ownership, ScopePattern
from kqplan.core.plan import ClusterRef, diff
from kqplan.fleet.changes import diff_input, rows_of_plan
from kqplan.fleet.spark import change_rows

names = st.sampled_from(["alice", "bob", "with space", "jörg", "日本", "<default>x", "app-1", None])
client_entities = st.one_of(
    st.builds(Entity.user, names), st.builds(Entity.client, names),
    st.builds(Entity.user_client, names, names))
ip_entities = st.builds(Entity.ip, st.sampled_from(["10.0.0.1", "2001:db8::1", None]))
values = st.sampled_from([1.0, 2.0, 1024.0, 1048576.0, 12.5, 1235.0000001])
client_quotas = st.dictionaries(st.sampled_from(["producer_byte_rate", "consumer_byte_rate",
                                                  "request_percentage", "controller_mutation_rate"]),
                                values, min_size=1, max_size=3)
ip_quotas = st.fixed_dictionaries({"connection_creation_rate": values})
states = st.one_of(st.dictionaries(client_entities, client_quotas, max_size=6),
                   st.dictionaries(ip_entities, ip_quotas, max_size=3))
scopes = st.lists(st.sampled_from([{"user": "*"}, {"user": "a*"}, {"client-id": "<default>"},
                                   {"ip": "*"}, {"user": "<default>"}]), max_size=2)


@st.composite
def fleets(draw):
    out = []
    for i in range(draw(st.integers(1, 3))):
        desired, actual = draw(states), draw(states)
        if draw(st.booleans()) and actual:  # NaN on the cluster (a ZooKeeper broker stores it)
            entity = next(iter(actual))
            actual[entity] = {k: math.nan for k in actual[entity]}
        ownership = Ownership.of([(True, [ScopePattern.of(s) for s in draw(scopes)])])
        out.append((f"c{i}", desired, actual, ownership))
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fleets())
def test_local_and_spark_engines_agree(spark, fleet):
    local, inputs = [], []
    for name, desired, actual, ownership in fleet:
        plan = diff(desired, actual, ownership, cluster=ClusterRef(name, "x"), fingerprint=None)
        local += rows_of_plan(name, plan)
        inputs.append(diff_input(name, plan, desired, actual))
    on_spark = change_rows(spark, inputs)
    assert len(on_spark) == len(local)
    for a, b in zip(sorted(local), on_spark, strict=True):
        assert (a.cluster, a.entity, a.action, a.key) == (b.cluster, b.entity, b.action, b.key)
        for x, y in ((a.before, b.before), (a.after, b.after)):
            assert x == y or (x is not None and y is not None and math.isnan(x) and math.isnan(y))
