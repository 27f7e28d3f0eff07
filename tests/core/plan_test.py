"""diff(): ownership rules, ops, ordering; and properties over random states (hypothesis)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from kqplan.core.cluster import Op
from kqplan.core.entity import Entity
from kqplan.core.ownership import Ownership, ScopePattern
from kqplan.core.plan import Action, ClusterRef, apply_ops, diff
from kqplan.planfile.codec import dumps_plan, loads_plan, plan_to_json
from tests.helpers import entity

REF = ClusterRef("c1", "snapshot:x")


NOBODY_OWNS = Ownership()


def plan_of(desired, actual, ownership=NOBODY_OWNS):
    return diff(desired, actual, ownership, cluster=REF, fingerprint="sha256:x")


def test_create_update_delete_and_unchanged():
    a, b, c, d = entity(user="a"), entity(user="b"), entity(user="c"), entity(user="payments-x")
    desired = {a: {"producer_byte_rate": 1.0}, b: {"producer_byte_rate": 2.0, "request_percentage": 5.0},
               c: {"consumer_byte_rate": 3.0}}
    actual = {b: {"producer_byte_rate": 1.0, "consumer_byte_rate": 9.0}, c: {"consumer_byte_rate": 3.0},
              d: {"producer_byte_rate": 4.0}, entity(user="other"): {"producer_byte_rate": 4.0}}
    owned = Ownership.of([(True, [ScopePattern.of({"user": "payments-*"})])])
    plan = plan_of(desired, actual, owned)
    assert [(ch.entity.display, ch.action) for ch in plan.changes] == [
        ("{user=a}", Action.CREATE), ("{user=b}", Action.UPDATE), ("{user=payments-x}", Action.DELETE)]
    update = plan.changes[1]
    # one entry per entity, sets and removes together, in key order
    assert update.ops == (Op("consumer_byte_rate", None), Op("producer_byte_rate", 2.0),
                          Op("request_percentage", 5.0))
    assert update.before == {"producer_byte_rate": 1.0, "consumer_byte_rate": 9.0}
    assert plan.changes[2].after is None
    assert plan.changes[0].before is None
    s = plan.summary
    assert (s.add, s.change, s.delete, s.unchanged) == (1, 1, 1, 1)


def test_without_prune_unlisted_entities_are_untouched_but_noted():
    watched = Ownership.of([(False, [ScopePattern.of({"user": "*"})])])
    plan = plan_of({}, {entity(user="x"): {"producer_byte_rate": 1.0}}, watched)
    assert not plan.changes
    assert plan.notes == ("1 entity inside an ownership scope without prune are not in any manifest "
                          "(left untouched).",)


def test_scope_patterns_match_like_a_non_strict_filter_and_defaults_explicitly():
    star = ScopePattern.of({"user": "*"})
    assert star.matches(entity(user="a"))
    assert star.matches(entity(user="a", client_id="c"))
    assert not star.matches(entity(user=None))          # a glob never matches the default
    assert not star.matches(entity(client_id="c"))
    assert ScopePattern.of({"user": "<default>"}).matches(entity(user=None, client_id="c"))
    assert ScopePattern.of({"user": "\\<default>"}).matches(entity(user="<default>"))
    assert not ScopePattern.of({"user": "\\<default>"}).matches(entity(user=None))


def test_nan_on_the_cluster_is_equal_to_nan_like_kafka_compares():
    e = entity(user="a")
    assert not plan_of({e: {"request_percentage": math.nan}}, {e: {"request_percentage": math.nan}}).changes


def test_changes_between_shared_quota_dicts_share_their_ops():
    """States share one dict per tier: the ops of a pair of dicts are computed once."""
    gold, silver = {"producer_byte_rate": 2.0}, {"producer_byte_rate": 1.0, "x": 3.0}
    names = [f"u{i}" for i in range(4)]
    plan = plan_of({entity(user=n): gold for n in names}, {entity(user=n): silver for n in names})
    assert len({id(c.ops) for c in plan.changes}) == 1
    assert plan.changes[0].ops == (Op("producer_byte_rate", 2.0), Op("x", None))


class _Fresh(Mapping[Entity, dict[str, float]]):
    """A state that builds a new dict at every read: NaN (equal to the manifest's, so unchanged
    and freed at once, its id free for reuse) for even users, 5 for odd ones."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __getitem__(self, key: Entity) -> dict[str, float]:
        odd = int(key.parts[0][1][1:]) % 2
        return {"request_percentage": 5.0 if odd else float("nan")}

    def __iter__(self) -> Iterator[Entity]:
        return (entity(user=f"u{i}") for i in range(self.n))

    def __len__(self) -> int:
        return self.n


def test_ops_are_never_those_of_a_freed_dict():
    """Dicts that are built and freed one by one may reuse an id: the cached ops stay right."""
    n = 400
    want = {"request_percentage": math.nan}
    plan = plan_of({entity(user=f"u{i}"): want for i in range(n)}, _Fresh(n))
    assert sorted(c.display for c in plan.changes) == sorted(f"{{user=u{i}}}" for i in range(1, n, 2))
    assert plan.unchanged == n // 2


def test_plan_file_round_trip_preserves_everything():
    a = entity(user="<default>", client_id=None)
    plan = plan_of({a: {"producer_byte_rate": 2.0}}, {a: {"producer_byte_rate": 1.0, "x": 3.0}})
    text = dumps_plan(plan)
    again = loads_plan(text, source="p.json")
    assert again == plan
    doc = plan_to_json(plan)
    assert doc["changes"][0]["entity"] == {"user": "<default>", "client-id": None}
    assert doc["changes"][0]["display"] == "{user=\\<default>, client-id=<default>}"
    assert doc["changes"][0]["ops"] == [{"key": "producer_byte_rate", "value": 2.0, "remove": False},
                                        {"key": "x", "value": None, "remove": True}]


# -- properties ------------------------------------------------------------------------------

names = st.sampled_from(["a", "b", "pay-1", "pay-2", "<default>", None])
entities = st.one_of(
    st.builds(Entity.user, names),
    st.builds(Entity.client, names),
    st.builds(Entity.user_client, names, names),
    st.builds(Entity.ip, st.sampled_from(["1.2.3.4", None])),
)
values = st.sampled_from([1.0, 2.0, 1048576.0, 1235.0000001, 0.5])
quotas = st.dictionaries(st.sampled_from(["producer_byte_rate", "consumer_byte_rate",
                                          "request_percentage"]), values, min_size=1, max_size=3)
states = st.dictionaries(entities, quotas, max_size=12)
scopes = st.lists(st.sampled_from([{"user": "pay-*"}, {"client-id": "*"}, {"user": "<default>"},
                                   {"ip": "*"}]), max_size=2)


@settings(max_examples=300, deadline=None)
@given(desired=states, actual=states, scope=scopes, prune=st.booleans())
def test_applying_the_plan_yields_desired_on_owned_and_leaves_the_rest(desired, actual, scope, prune):
    ownership = Ownership.of([(prune, [ScopePattern.of(s) for s in scope])])
    plan = plan_of(desired, actual, ownership)
    after = apply_ops(actual, plan.changes)
    for e, want in desired.items():
        assert after[e] == want
    for e, have in actual.items():
        if e in desired:
            continue
        if prune and any(ScopePattern.of(s).matches(e) for s in scope):
            assert e not in after
        else:
            assert after[e] == have
    # converged: planning again gives nothing to do
    assert not plan_of(desired, after, ownership).changes
    # every change is one entry with distinct keys
    for change in plan.changes:
        keys = [op.key for op in change.ops]
        assert len(keys) == len(set(keys))
        assert keys == sorted(keys)
        assert keys


@settings(max_examples=100, deadline=None)
@given(desired=states, actual=states)
def test_plan_is_deterministic_whatever_the_input_order(desired, actual):
    one = dumps_plan(plan_of(desired, actual))
    two = dumps_plan(plan_of(dict(reversed(list(desired.items()))), dict(reversed(list(actual.items())))))
    assert one == two
