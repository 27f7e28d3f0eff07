"""Effective-quota resolution: Kafka's own precedence cases, ip cases and a brute-force property."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kqplan.core.entity import Entity, EntityKind, Name
from kqplan.core.quotas import CLIENT_KEYS, IP_KEYS
from kqplan.core.resolve import (
    CLIENT_LEVELS,
    IP_LEVELS,
    Match,
    Overridden,
    QuotaIndex,
    ResolvedKey,
    effective,
    level_of,
    resolve,
    resolve_entity,
    resolve_ip,
    resolve_key_set,
)

P = "producer_byte_rate"
C = "consumer_byte_rate"
U, CL, UC = Entity.user, Entity.client, Entity.user_client


def produce(state: dict[Entity, dict[str, float]], user: str, client_id: str) -> float | None:
    return resolve(state, user, client_id)[P].value


def test_quota_config_precedence_as_in_kafkas_client_quota_manager_test() -> None:
    # ClientQuotaManagerTest.testQuotaConfigPrecedence (apache/kafka 1eb7644, PRODUCE).
    state: dict[Entity, dict[str, float]] = {
        U(None): {P: 1000}, CL(None): {P: 2000}, UC(None, None): {P: 3000},
        U("userA"): {P: 4000}, UC("userA", "client1"): {P: 5000}, U("userB"): {P: 6000},
        UC("userB", "client1"): {P: 7000}, UC("userB", None): {P: 8000},
        U("userC"): {P: 10000}, CL("client1"): {P: 9000},
    }
    expected = [("userA", "client1", 5000), ("userA", "client2", 4000), ("userA", "client3", 4000),
                ("userB", "client1", 7000), ("userB", "client2", 8000), ("userB", "client3", 8000),
                ("userD", "client1", 3000), ("userD", "client2", 3000), ("userE", "client1", 3000)]
    assert [(u, c, produce(state, u, c)) for u, c, _ in expected] == expected
    # Remove default <user, client> quota config, revert to <user> default
    del state[UC(None, None)]
    for u, c in [("userD", "client1"), ("userE", "client4"), ("userF", "client4"), ("userF", "client5")]:
        assert produce(state, u, c) == 1000
    # Remove default <user> quota config, revert to <client-id> default
    del state[U(None)]
    for u, c in [("userF", "client4"), ("userF", "client5"), ("userG", "client5")]:
        assert produce(state, u, c) == 2000
    # Update quotas
    state[U("userA")] = {P: 8000}
    state[UC("userA", "client1")] = {P: 10000}
    assert produce(state, "userA", "client2") == 8000
    assert produce(state, "userA", "client1") == 10000
    del state[UC("userA", "client1")]
    assert produce(state, "userA", "client6") == 8000
    state[UC("userA", "client6")] = {P: 11000}
    assert produce(state, "userA", "client6") == 11000
    state[UC("userA", None)] = {P: 12000}
    del state[UC("userA", "client6")]
    assert produce(state, "userA", "client6") == 12000  # level 2 beats level 3


def test_each_key_resolves_independently_with_source_and_overridden() -> None:
    state = {UC("alice", "app"): {P: 5.0}, U(None): {C: 7.0, P: 1.0}, CL("app"): {C: 9.0}}
    r = resolve(state, "alice", "app")
    assert r.entity == UC("alice", "app")
    assert r[P] == ResolvedKey(P, 5.0, UC("alice", "app"), (Overridden(U(None), 1.0),))
    assert r[C] == ResolvedKey(C, 7.0, U(None), (Overridden(CL("app"), 9.0),))
    assert r["request_percentage"] == ResolvedKey("request_percentage", None, None)
    assert r["request_percentage"].unlimited
    assert [k.key for k in r.keys] == list(CLIENT_KEYS)
    assert resolve(state, "alice", "app", overridden=False)[P].overridden == ()


def test_empty_client_id_sees_only_the_user_levels() -> None:
    # Reference §4.1 edge case: C = "" looks at {user=U}, then {user=<default>}, nothing else.
    everything = {UC("u", None): {P: 2}, UC(None, None): {P: 5}, CL(None): {P: 8}}
    assert resolve(everything, "u", "")[P].value is None
    assert resolve({**everything, U(None): {P: 6}}, "u", "")[P].source == U(None)
    assert resolve({**everything, U("u"): {P: 3}, U(None): {P: 6}}, "u", "")[P] == \
        ResolvedKey(P, 3, U("u"), (Overridden(U(None), 6),))
    assert resolve(everything, "u", "app")[P].source == UC("u", None)


def test_ip_cases_from_dynamic_config_change_test() -> None:
    # DynamicConfigChangeTest.testIpQuotaConfigChange (reference §4.2).
    key = "connection_creation_rate"
    state = {Entity.ip(None): {key: 20}, Entity.ip("1.2.3.4"): {key: 10}}
    assert resolve_ip(state, "1.2.3.4")[key] == ResolvedKey(
        key, 10, Entity.ip("1.2.3.4"), (Overridden(Entity.ip(None), 20),))
    assert resolve_ip(state, "2.3.4.5")[key] == ResolvedKey(key, 20, Entity.ip(None))
    del state[Entity.ip("1.2.3.4")]
    assert resolve_ip(state, "1.2.3.4")[key].value == 20
    del state[Entity.ip(None)]
    assert resolve_ip(state, "1.2.3.4")[key] == ResolvedKey(key, None, None)
    assert [k.key for k in resolve_ip(state, "1.2.3.4").keys] == list(IP_KEYS)


def test_resolve_entity_and_key_sets() -> None:
    state = {U(None): {P: 1.0}, Entity.ip(None): {"connection_creation_rate": 3.0}}
    assert resolve_entity(state, UC("a", "b"))[P].value == 1.0
    assert resolve_entity(state, Entity.ip("::1"))["connection_creation_rate"].value == 3.0
    with pytest.raises(ValueError, match="cannot resolve"):
        resolve_entity(state, U("a"))
    assert resolve_key_set(EntityKind.CLIENT) == CLIENT_KEYS
    assert resolve_key_set(EntityKind.IP) == ("connection_creation_rate",)
    assert resolve_key_set(EntityKind.CUSTOM) == ()


def test_levels_are_data_in_kafkas_order() -> None:
    shown = [lv.entity("U", "C").display for lv in CLIENT_LEVELS]
    assert shown == ["{user=U, client-id=C}", "{user=U, client-id=<default>}", "{user=U}",
                     "{user=<default>, client-id=C}", "{user=<default>, client-id=<default>}",
                     "{user=<default>}", "{client-id=C}", "{client-id=<default>}"]
    assert [lv.rank for lv in CLIENT_LEVELS if lv.empty_client_id] == [3, 6]
    assert IP_LEVELS == (Match.NAME, Match.DEFAULT)
    assert all(level_of(lv.entity("U", "C")) == lv for lv in CLIENT_LEVELS)
    assert level_of(Entity.ip("1.2.3.4")) is None


# -- property: the index answers what a scan of the eight levels answers ------------------------

USERS = ["a", "b", "<default>"]  # "<default>" here is a real principal name
CLIENTS = ["x", "y"]
KEYS = [P, C]


def _entities() -> list[Entity]:
    names: list[Name] = [*USERS, None]
    cnames: list[Name] = [*CLIENTS, None]
    return ([U(u) for u in names] + [CL(c) for c in cnames]
            + [UC(u, c) for u in names for c in cnames])


states = st.dictionaries(
    st.sampled_from(_entities()),
    st.dictionaries(st.sampled_from(KEYS), st.sampled_from([1.0, 2.0, 3.0, 4.0]), min_size=1),
)


def brute_force(state: dict[Entity, dict[str, float]], user: str, client_id: str, key: str
                ) -> list[tuple[Entity, float]]:
    """Every level in order (reference §4.1), written out without the index."""
    if client_id == "":
        chain = [U(user), U(None)]
    else:
        chain = [UC(user, client_id), UC(user, None), U(user), UC(None, client_id),
                 UC(None, None), U(None), CL(client_id), CL(None)]
    return [(e, state[e][key]) for e in chain if e in state and key in state[e]]


@settings(max_examples=300, deadline=None)
@given(states)
def test_resolution_equals_a_brute_force_scan(state: dict[Entity, dict[str, float]]) -> None:
    index = QuotaIndex.of(state)
    for user in [*USERS, "fresh"]:
        for client_id in [*CLIENTS, "fresh", ""]:
            r = resolve(index, user, client_id)
            fast = effective(index, user, client_id)
            for i, key in enumerate(CLIENT_KEYS):
                hits = brute_force(state, user, client_id, key) if key in KEYS else []
                got = r[key]
                if not hits:
                    assert (got.value, got.source, got.overridden) == (None, None, ())
                    assert fast[i] == (None, None)
                    continue
                assert (got.source, got.value) == hits[0]
                assert [(o.source, o.value) for o in got.overridden] == hits[1:]
                assert fast[i] == (hits[0][1], hits[0][0])


def _chain(user: str, client_id: str) -> list[Entity]:
    """The entities the levels of (user, client_id) look up, written out (reference §4.1)."""
    if client_id == "":
        return [U(user), U(None)]
    return [UC(user, client_id), UC(user, None), U(user), UC(None, client_id),
            UC(None, None), U(None), CL(client_id), CL(None)]


@settings(max_examples=300, deadline=None)
@given(states, states)
def test_moved_says_exactly_whether_a_looked_up_entry_changed(
        before: dict[Entity, dict[str, float]], after: dict[Entity, dict[str, float]]) -> None:
    """``moved`` is what lets a fleet impact resolve most principals once for both sides of a
    plan: False must prove the same resolution, and True must mean an entry it looks up changed
    (else every principal would be resolved twice again)."""
    was, now = QuotaIndex.of(before), QuotaIndex.of(after)
    moved = was.moved(now)
    for user in [*USERS, "fresh"]:
        for client_id in [*CLIENTS, "fresh", ""]:
            changed = any(before.get(e) != after.get(e) for e in _chain(user, client_id))
            assert moved(user, client_id) is changed, (user, client_id)
            if not changed:
                assert effective(now, user, client_id) == effective(was, user, client_id)


def test_the_index_keeps_ip_entities_apart_and_leaves_custom_ones_out() -> None:
    custom = Entity.of([("custom", "x")])
    mixed = Entity.of([("user", "a"), ("custom", "x")])
    state = {U("a"): {P: 1.0}, Entity.ip("10.0.0.1"): {"connection_creation_rate": 5.0},
             Entity.ip(None): {"connection_creation_rate": 7.0}, custom: {P: 9.0}, mixed: {P: 8.0},
             CL(None): {P: 2.0}, UC("a", "x"): {C: 3.0}}
    index = QuotaIndex.of(state)
    assert sorted(index.ips, key=str) == sorted(["10.0.0.1", None], key=str)
    assert len(index.clients) == 3
    assert effective(index, "a", "x")[CLIENT_KEYS.index(P)] == (1.0, U("a"))
    assert effective(index, "b", "y")[CLIENT_KEYS.index(P)] == (2.0, CL(None))
