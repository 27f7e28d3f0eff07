"""Protected principals (KQP157) judged on the core's resolution: each of Kafka's eight levels, the
empty client-id rule, and a property over generated states against a brute-force scan of every
client-id with :func:`kqplan.core.resolve.resolve`."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kqplan.core.entity import Entity
from kqplan.core.policy import ProtectedPrincipal
from kqplan.core.protected import UNNAMED, Breach, breaches
from kqplan.core.resolve import CLIENT_LEVELS, resolve

P = "producer_byte_rate"
R = "request_percentage"
U, CL, UC = Entity.user, Entity.client, Entity.user_client
CANARY = ProtectedPrincipal("canary", "probe")
EVERY = ProtectedPrincipal("canary")


def changes(before: dict[Entity, dict[str, float]], after: dict[Entity, dict[str, float]]
            ) -> dict[Entity, dict[str, float] | None]:
    return {e: after.get(e) for e in before.keys() | after.keys() if before.get(e) != after.get(e)}


def found(before, after, principals) -> set[tuple[str, str, float | None, float | None, Entity]]:
    return {(b.client_id, b.key, b.before, b.after, b.cause)
            for b in breaches(before, changes(before, after), principals)}


@pytest.mark.parametrize("level", CLIENT_LEVELS, ids=lambda lv: f"level{lv.rank}")
def test_each_level_gives_a_new_limit_to_the_protected_pair(level):
    entity = level.entity("canary", "probe")
    assert found({}, {entity: {P: 10.0}}, [CANARY]) == {("probe", P, None, 10.0, entity)}


@pytest.mark.parametrize("level", CLIENT_LEVELS, ids=lambda lv: f"level{lv.rank}")
def test_each_level_lowers_or_raises(level):
    entity = level.entity("canary", "probe")
    assert found({entity: {P: 10.0}}, {entity: {P: 5.0}}, [CANARY]) == {("probe", P, 10.0, 5.0, entity)}
    assert found({entity: {P: 10.0}}, {entity: {P: 20.0}}, [CANARY]) == set()  # raising is fine
    assert found({entity: {P: 10.0}}, {}, [CANARY]) == set()  # removing a limit is fine


@pytest.mark.parametrize("rank", range(1, 8))
def test_a_more_specific_level_wins_over_each_less_specific_one(rank):
    """A new entity at level ``rank`` under a configured level below it: a lower value is a breach
    (caused by the new entity), a higher one is not; the less specific one, added under a more
    specific one, changes nothing."""
    high, low = CLIENT_LEVELS[rank - 1], CLIENT_LEVELS[rank]
    strong, weak = high.entity("canary", "probe"), low.entity("canary", "probe")
    base = {weak: {P: 10.0}}
    assert found(base, {**base, strong: {P: 4.0}}, [CANARY]) == {("probe", P, 10.0, 4.0, strong)}
    assert found(base, {**base, strong: {P: 40.0}}, [CANARY]) == set()
    above = {strong: {P: 10.0}}
    assert found(above, {**above, weak: {P: 1.0}}, [CANARY]) == set()


def test_the_empty_client_id_sees_only_levels_3_and_6():
    """A client that sends no client-id resolves against {user=U} and {user=<default>} alone: a
    new {user=<default>, client-id=<default>} limit reaches every named client-id, not it."""
    change = {UC(None, None): {R: 5.0}}
    hits = found({}, change, [EVERY])
    assert ("", R, None, 5.0, UC(None, None)) not in hits
    assert (UNNAMED, R, None, 5.0, UC(None, None)) in hits
    assert found({}, {U(None): {R: 5.0}}, [EVERY]) >= {("", R, None, 5.0, U(None)),
                                                       (UNNAMED, R, None, 5.0, U(None))}
    assert found({}, {UC(None, None): {R: 5.0}}, [ProtectedPrincipal("canary", "")]) == set()


def test_every_client_id_includes_each_named_one():
    """{client-id=probe} (level 7) lowers only the canary's connections as probe."""
    before = {CL(None): {P: 10.0}}
    hits = found(before, {**before, CL("probe"): {P: 1.0}}, [EVERY])
    assert hits == {("probe", P, 10.0, 1.0, CL("probe"))}


def test_a_deletion_is_the_cause_when_a_lower_level_takes_over():
    before = {U("canary"): {P: 10.0}, U(None): {P: 1.0}}
    after = {U(None): {P: 1.0}}
    assert found(before, after, [CANARY]) == {("probe", P, 10.0, 1.0, U("canary"))}


def test_other_users_entities_are_never_judged():
    assert breaches({}, {U("someone"): {P: 1.0}, UC("x", None): {P: 1.0}}, [CANARY, EVERY]) == []


def test_change_text_and_context():
    b = Breach(EVERY, "", P, None, None, 1048576.0, U(None), U(None))
    assert b.change_text() == f"{P} none -> 1 MiB (a new limit)"
    assert b.context() == "no client-id"
    lowered = Breach(CANARY, "probe", R, 20.0, None, 5.0, None, U(None))
    assert lowered.change_text() == f"{R} 20 -> 5 (lowered)"


# -- the property -----------------------------------------------------------------------------------

USERS = ["canary", "other"]
CLIENTS = ["probe", "app"]
ENTITIES = ([U(u) for u in [*USERS, None]] + [CL(c) for c in [*CLIENTS, None]]
            + [UC(u, c) for u in [*USERS, None] for c in [*CLIENTS, None]])
states = st.dictionaries(st.sampled_from(ENTITIES),
                         st.dictionaries(st.sampled_from([P, R]), st.sampled_from([1.0, 2.0, 3.0]),
                                         min_size=1), max_size=6)


def brute_force(before, after, principal) -> set[tuple[str, str]]:
    """(client-id, key) of every breach, by resolving both states for every client-id there is:
    the pool's, the empty one and two no pool has. Client-ids no entity of the user's names must
    all resolve alike (the rule checks one of them, :data:`UNNAMED`)."""
    if principal.client_id is not None:
        client_ids = [principal.client_id]
    else:
        client_ids = [*CLIENTS, "", "fresh-1", "fresh-2"]
    named = {e.name("client-id") for e in [*before, *after] if "client-id" in e
             and e.name("client-id") is not None and e.get("user", None) in (None, principal.user)}
    out, unnamed = set(), []
    for client_id in client_ids:
        was, now = resolve(before, principal.user, client_id), resolve(after, principal.user, client_id)
        keys = {a.key for b, a in zip(was.keys, now.keys, strict=True)
                if a.value is not None and (b.value is None or a.value < b.value)}
        if client_id == "" or client_id in named or principal.client_id is not None:
            out |= {(client_id, key) for key in keys}
        else:
            unnamed.append(keys)
    assert all(keys == unnamed[0] for keys in unnamed)
    return out | {(UNNAMED, key) for key in (unnamed[0] if unnamed else ())}


@settings(max_examples=400, deadline=None)
@given(states, states, st.sampled_from([ProtectedPrincipal("canary"), ProtectedPrincipal("canary", "probe"),
                                        ProtectedPrincipal("canary", "app"), ProtectedPrincipal("other")]))
def test_the_rule_is_resolve_before_and_after(before, after, principal):
    got = breaches(before, changes(before, after), [principal])
    assert {(b.client_id, b.key) for b in got} == brute_force(before, after, principal)
    for b in got:  # each breach's values are resolution's, and its cause changed
        assert resolve(before, principal.user, _real(b.client_id))[b.key].value == b.before
        assert resolve(after, principal.user, _real(b.client_id))[b.key].value == b.after
        assert before.get(b.cause) != after.get(b.cause)


def _real(client_id: str) -> str:
    return "fresh-1" if client_id == UNNAMED else client_id
