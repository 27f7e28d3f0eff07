"""The sandbox's quota engine against the written spec (shared/reference/kafka-quota-rules.md).

Every test names the section it checks ("ref §2.3 C" etc.). The engine is pure, so these
call it directly; tests/sandbox/differential_test.py sends the same kind of requests to a
real Kafka broker and to the sandbox over the wire.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kqplan.core.entity import Entity
from kqplan.core.quotas import MSG_EMPTY_ENTITY, MSG_IP_COMBINATION
from kqplan.sandbox.engine import (
    CLUSTER_AUTHORIZATION_FAILED,
    INVALID_REQUEST,
    MAX_RECORDS_PER_USER_OP,
    MSG_CLUSTER_AUTHORIZATION_FAILED,
    MSG_FILTER_IP_COMBINATION,
    MSG_POLICY_VIOLATION,
    NONE,
    POLICY_VIOLATION,
    UNSUPPORTED_VERSION,
    AlterEntry,
    AlterResult,
    DescribeComponent,
    QuotaEngine,
    WireEntity,
    WireOp,
)

EXACT, DEFAULT, SPECIFIED = 0, 1, 2
BAD_HOST = "no-such-host.invalid"


def resolve(name: str) -> bool:
    """A DNS-free stand-in for InetAddress.getByName: only BAD_HOST and 'bad' fail."""
    return name not in (BAD_HOST, "bad")


def engine(state=None) -> QuotaEngine:
    return QuotaEngine(state, resolve_host=resolve)


def put(key: str, value: float) -> WireOp:
    return WireOp(key, value, False)


def rm(key: str, value: float = 0.0) -> WireOp:
    return WireOp(key, value, True)


def entry(entity: WireEntity, *ops: WireOp) -> AlterEntry:
    return AlterEntry(entity, tuple(ops))


def alter(eng: QuotaEngine, *entries: AlterEntry, validate_only: bool = False, version: int = 1):
    return eng.alter(list(entries), validate_only, version=version)


def one(eng: QuotaEngine, *entries: AlterEntry, validate_only: bool = False) -> AlterResult:
    results, _ = alter(eng, *entries, validate_only=validate_only)
    assert len(results) == 1
    return results[0]


def error_of(entity: WireEntity, *ops: WireOp, state=None) -> str | None:
    """The message of a one-entity alter on a fresh engine; asserts nothing was written on error."""
    eng = engine(state)
    before = eng.state
    result = one(eng, entry(entity, *ops))
    if result.error_code != NONE:
        assert result.error_code == INVALID_REQUEST
        assert eng.state == before
    return result.error_message


def describe(eng: QuotaEngine, *components: tuple[str, int, str | None], strict: bool = False,
             version: int = 1):
    return eng.describe([DescribeComponent(*c) for c in components], strict, version=version)


def described(eng: QuotaEngine, *components: tuple[str, int, str | None], strict: bool = False):
    """A successful describe as ``{frozenset(entity pairs): {key: value}}``."""
    result = describe(eng, *components, strict=strict)
    assert (result.error_code, result.error_message) == (NONE, "")
    assert result.entries is not None
    out = {frozenset(entity): dict(values) for entity, values in result.entries}
    assert len(out) == len(result.entries)
    return out


U = (("user", "alice"),)
UC = (("user", "alice"), ("client-id", "app"))
IP1 = (("ip", "10.1.2.3"),)


def fs(*pairs: tuple[str, str | None]) -> frozenset[tuple[str, str | None]]:
    return frozenset(pairs)


# -- AlterClientQuotas: request level (ref §2.1) --------------------------------------------------

def test_empty_alter_returns_no_entries_and_writes_nothing():
    """ref §2.1 step 3: Entries=[] gives Entries=[] at once."""
    eng = engine()
    assert alter(eng) == ([], False)
    assert alter(eng, validate_only=True) == ([], False)


def test_success_has_a_null_message_and_echoes_the_entity():
    """ref §2.6: success is ErrorCode=0, ErrorMessage=null; names exactly as received."""
    eng = engine()
    results, changed = alter(eng, entry((("user", None),), put("producer_byte_rate", 1024.0)))
    assert results == [AlterResult(NONE, None, (("user", None),))]
    assert changed
    assert eng.state == {Entity.user(None): {"producer_byte_rate": 1024.0}}


def test_user_and_client_entity_is_echoed_client_id_first():
    """ref §2.6, §6.14: the entity list is rebuilt in HashMap order, client-id before user."""
    eng = engine()
    results, _ = alter(eng, entry(UC, put("producer_byte_rate", 1.0)))
    assert results == [AlterResult(NONE, None, (("client-id", "app"), ("user", "alice")))]


def test_one_response_entry_per_distinct_entity():
    """ref §2.6: one entry per distinct entity; request entity order is irrelevant (§2.2)."""
    eng = engine()
    results, _ = alter(eng, entry(UC, put("producer_byte_rate", 1.0)),
                       entry((("client-id", "app"), ("user", "alice")), put("consumer_byte_rate", 1.0)),
                       entry(U, put("producer_byte_rate", 1.0)))
    assert len(results) == 2


@pytest.mark.parametrize("validate_only", [False, True])
def test_denied_alter_fails_every_wire_entry_with_the_generic_text(validate_only):
    """ref §1.5, §2.1 step 2: 31 + 'Cluster authorization failed.' per wire entry, echoed verbatim."""
    eng = engine()
    entries = [entry((("user", "a"), ("user", "b")), put("producer_byte_rate", 1.0)),
               entry((("user", "a"), ("user", "b")), put("producer_byte_rate", 1.0)),
               entry((("client-id", None), ("user", "x")))]
    results = eng.alter_denied(entries)
    assert results == [AlterResult(CLUSTER_AUTHORIZATION_FAILED, MSG_CLUSTER_AUTHORIZATION_FAILED, e.entity)
                       for e in entries]
    assert MSG_CLUSTER_AUTHORIZATION_FAILED == "Cluster authorization failed."
    assert eng.alter_denied([]) == []
    assert eng.state == {}


# -- entity conversion (ref §2.2) -----------------------------------------------------------------

def test_repeated_entity_type_collapses_last_wins():
    """ref §2.2, §6.3: [{user,a},{user,b}] is {user=b}, silently, before validation."""
    eng = engine()
    result = one(eng, entry((("user", "a"), ("user", "b")), put("producer_byte_rate", 5.0)))
    assert result == AlterResult(NONE, None, (("user", "b"),))
    assert eng.state == {Entity.user("b"): {"producer_byte_rate": 5.0}}


def test_repeated_type_collapses_before_emptiness_is_checked():
    """ref §2.2: the collapse happens while parsing, so an earlier empty name is never seen."""
    assert error_of((("user", ""), ("user", "b")), put("producer_byte_rate", 5.0)) is None
    message = error_of((("user", "b"), ("user", "")), put("producer_byte_rate", 5.0))
    assert message == "Empty user not supported"


# -- validateEntity (ref §2.3 C) ----------------------------------------------------------------

@pytest.mark.parametrize(("entity", "message"), [
    ((), MSG_EMPTY_ENTITY),
    ((("foo", "x"),), "Unhandled client quota entity type: foo"),
    ((("", "x"),), "Unhandled client quota entity type: "),
    ((("User", "x"),), "Unhandled client quota entity type: User"),
    ((("user", ""),), "Empty user not supported"),
    ((("client-id", ""),), "Empty client-id not supported"),
    ((("ip", ""),), "Empty ip not supported"),
    ((("foo", ""),), "Unhandled client quota entity type: foo"),  # type before emptiness
])
def test_entity_validation_messages(entity, message):
    """ref §2.3 C: exact texts, including the trailing space for an empty type."""
    assert error_of(entity, put("producer_byte_rate", 1.0)) == message
    assert MSG_EMPTY_ENTITY == "Invalid empty client quota entity"


def test_first_bad_entity_part_in_hashmap_order_wins():
    """ref §2.3 C: parts are checked in HashMap order (client-id before user), not request order."""
    message = error_of((("user", ""), ("client-id", "")), put("producer_byte_rate", 1.0))
    assert message == "Empty client-id not supported"


def test_entity_validation_comes_before_the_combination_check():
    """ref §2.3 C before D."""
    assert error_of((("ip", "1.2.3.4"), ("user", "")), put("connection_creation_rate", 1.0)) == \
        "Empty user not supported"


def test_empty_entity_with_no_ops_is_still_an_error():
    """ref §2.3 C–F: an empty Ops list still validates the entity."""
    assert error_of(()) == MSG_EMPTY_ENTITY
    assert error_of(U) is None


# -- combination and ip (ref §2.3 D) --------------------------------------------------------------

@pytest.mark.parametrize("entity", [
    (("ip", "1.2.3.4"), ("user", "a")),
    (("client-id", "c"), ("ip", None)),
    (("ip", BAD_HOST), ("user", "a"), ("client-id", None)),  # combination before resolvability
])
def test_ip_combined_with_user_or_client_is_rejected_with_kafkas_typo(entity):
    """ref §2.3 D, §6.11: 'shouldnot', no space."""
    assert error_of(entity, put("connection_creation_rate", 1.0)) == MSG_IP_COMBINATION
    assert "shouldnot be combined" in MSG_IP_COMBINATION


def test_unresolvable_ip_is_rejected_before_keys_are_checked():
    """ref §2.3 D then §2.4: resolvability before the key check."""
    message = error_of((("ip", BAD_HOST),), put("foo", -1.0))
    assert message == f"{BAD_HOST} is not a valid IP or resolvable host."


def test_default_ip_needs_no_lookup():
    """ref §2.3 D: a null ip name (the default) is always valid."""
    calls: list[str] = []
    eng = QuotaEngine(resolve_host=lambda name: calls.append(name) or False)
    assert one(eng, entry((("ip", None),), put("connection_creation_rate", 5.0))).error_code == NONE
    assert calls == []


def test_the_resolver_is_asked_about_the_ip_name_as_sent():
    """ref §1.3, §6.12: names are not normalised; the lookup sees the raw string."""
    calls: list[str] = []
    eng = QuotaEngine(resolve_host=lambda name: calls.append(name) or True)
    one(eng, entry((("ip", "01.02.03.04"),), put("connection_creation_rate", 5.0)))
    assert calls == ["01.02.03.04"]
    assert eng.state == {Entity.ip("01.02.03.04"): {"connection_creation_rate": 5.0}}


@pytest.mark.parametrize("name", ["1.2.3.4", "::1", "[::1]", "::ffff:1.2.3.4", "localhost", "1.2.3", "1",
                                  "01.02.03.04", "08.1.1.1", "010.1.1.1", "1.65536", "4294967295",
                                  "fe80::1%1"])
def test_default_resolver_accepts_literals_and_resolvable_names(name):
    """ref §6.12: IPv4/IPv6 literals without DNS (the JDK's decimal forms too); hostnames such as
    localhost are accepted."""
    result = one(QuotaEngine(), entry((("ip", name),), put("connection_creation_rate", 5.0)))
    assert result == AlterResult(NONE, None, (("ip", name),))


@pytest.mark.parametrize("name", ["256.1.1.1", "has space", "nothing.invalid", "[1.2.3.4]", "0x7f.1",
                                  "0x1", "[localhost]", "[]", "[::1", "::1]", "1::2::3",
                                  "fe80::1%no-such-interface", "1.2.3.4%lo", "1.16777216"])
def test_default_resolver_rejects_what_does_not_resolve(name):
    """ref §6.12: 256.1.1.1, names with spaces and *.invalid are rejected; so are what the JDK
    refuses although Python or inet_aton would take it (bracketed IPv4, octal/hex forms, a zone
    naming no interface), as the real broker showed."""
    result = one(QuotaEngine(), entry((("ip", name),), put("connection_creation_rate", 5.0)))
    assert result.error_message == f"{name} is not a valid IP or resolvable host."


# -- keys and values (ref §2.4) -------------------------------------------------------------------

@pytest.mark.parametrize(("entity", "key"), [
    (U, "foo"),
    (U, ""),
    (U, "connection_creation_rate"),
    (IP1, "producer_byte_rate"),
    ((("client-id", None),), "SCRAM-SHA-256"),
])
def test_unknown_key_for_the_entity_type(entity, key):
    """ref §2.4 check 1 (empty key: trailing space; SCRAM names are not quota keys in KRaft)."""
    assert error_of(entity, put(key, 1.0)) == f"Invalid configuration key {key}"


def test_key_is_checked_before_value():
    """ref §2.4: {'not.a.quota.key': 0.0} reports the key."""
    assert error_of(U, put("not.a.quota.key", 0.0)) == "Invalid configuration key not.a.quota.key"


GT0 = "Quota {key} must be greater than 0"
FRAC = "{key} cannot be a fractional value."
LONG_BIG = "Proposed value for {key} is too large for a LONG."
INT_BIG = "Proposed value for {key} is too large for an INT."
NAN, INF = math.nan, math.inf

# (value, LONG result, INT result, DOUBLE result): the table of ref §2.4, None = accepted.
VALUE_TABLE = [
    (0.0, GT0, GT0, GT0),
    (-0.0, GT0, GT0, GT0),
    (-2.0, GT0, GT0, GT0),
    (-INF, GT0, GT0, GT0),
    (NAN, None, None, None),
    (INF, LONG_BIG, INT_BIG, None),
    (0.5, FRAC, FRAC, None),
    (2.245, FRAC, FRAC, None),
    (10000.5, FRAC, FRAC, None),
    (1235.0000001, None, None, None),
    (1234.9999999, FRAC, FRAC, None),
    (2147483648.0, None, INT_BIG, None),
    (2147483647.5, FRAC, INT_BIG, None),
    (2147483647.0, None, None, None),
    (9.223372036854775807e18, None, INT_BIG, None),
    (9.223372036854778e18, LONG_BIG, INT_BIG, None),
    (3.6893488147419103e19, LONG_BIG, INT_BIG, None),
    (1e-7, None, None, None),
    (5e-324, FRAC, FRAC, None),  # 4.9E-324: tiny, positive; whole-number check: 5e-324 <= 1e-6 passes
]


def _expected(template, key):
    return None if template is None else template.format(key=key)


@pytest.mark.parametrize(("value", "as_long", "as_int", "as_double"), VALUE_TABLE)
def test_value_rules_for_each_type(value, as_long, as_int, as_double):
    """ref §2.4 checks 2–3 and the numeric edge-case table."""
    if value == 5e-324:
        as_long = as_int = None  # 4.9E-324 % 1.0 = 4.9E-324 <= 1e-6: accepted by every type
    assert error_of(U, put("producer_byte_rate", value)) == _expected(as_long, "producer_byte_rate")
    assert error_of(U, put("consumer_byte_rate", value)) == _expected(as_long, "consumer_byte_rate")
    ccr = "connection_creation_rate"
    assert error_of(IP1, put(ccr, value)) == _expected(as_int, ccr)
    assert error_of(U, put("request_percentage", value)) == _expected(as_double, "request_percentage")
    cmr = "controller_mutation_rate"
    assert error_of(U, put(cmr, value)) == _expected(as_double, cmr)


def test_accepted_value_is_stored_unrounded():
    """ref §2.4, §6.10: 1235.0000001 is accepted, stored and described as sent."""
    eng = engine()
    one(eng, entry(U, put("producer_byte_rate", 1235.0000001)))
    assert described(eng) == {fs(*U): {"producer_byte_rate": 1235.0000001}}


def test_nan_is_stored_and_setting_it_again_writes_nothing():
    """ref §6.9: NaN passes; Objects.equals(NaN, NaN) is true, so a repeat is a no-op (§2.3 E)."""
    eng = engine()
    results, changed = alter(eng, entry(U, put("request_percentage", NAN)))
    assert results[0].error_code == NONE
    assert changed
    assert math.isnan(eng.state[Entity.user("alice")]["request_percentage"])
    results, changed = alter(eng, entry(U, put("request_percentage", NAN)))
    assert results[0].error_code == NONE
    assert not changed


# -- ops (ref §2.3 E–F) ---------------------------------------------------------------------------

@pytest.mark.parametrize("op", [rm("foo"), rm("producer_byte_rate"), rm(""),
                                rm("connection_creation_rate", -5.0)])
def test_removals_are_never_validated(op):
    """ref §2.3 E, §6.4: removing unknown/foreign/missing keys succeeds and writes nothing."""
    for entity in (U, IP1, (("user", None), ("client-id", None))):
        eng = engine()
        results, changed = alter(eng, entry(entity, op))
        assert [r.error_code for r in results] == [NONE]
        assert not changed
        assert eng.state == {}


def test_removal_ignores_the_value_field():
    """ref §1.3: Remove=true makes the value null; a negative Value is never checked."""
    eng = engine({Entity.user("alice"): {"producer_byte_rate": 5.0}})
    results, changed = alter(eng, entry(U, rm("producer_byte_rate", -1.0)))
    assert results[0].error_code == NONE
    assert changed
    assert eng.state == {}


def test_setting_an_unchanged_value_succeeds_without_writing():
    """ref §2.5: same value, success, no record."""
    eng = engine({Entity.user("alice"): {"producer_byte_rate": 5.0}})
    results, changed = alter(eng, entry(U, put("producer_byte_rate", 5.0)))
    assert results == [AlterResult(NONE, None, U)]
    assert not changed


def test_entity_is_all_or_nothing():
    """ref §2.3 E, §6.5: one bad op and none of the entity's records are written."""
    eng = engine({Entity.user("alice"): {"producer_byte_rate": 5.0}})
    results, changed = alter(eng, entry(U, put("consumer_byte_rate", 10.0), rm("producer_byte_rate"),
                                        put("request_percentage", -1.0)))
    assert results == [AlterResult(INVALID_REQUEST, "Quota request_percentage must be greater than 0", U)]
    assert not changed
    assert eng.state == {Entity.user("alice"): {"producer_byte_rate": 5.0}}


def test_entities_are_independent():
    """ref §2.3 'Independence between entities': partial success across entities."""
    eng = engine()
    results, changed = alter(eng, entry(U, put("producer_byte_rate", 0.5)),
                             entry((("user", "bob"),), put("producer_byte_rate", 7.0)))
    assert [r.error_code for r in results] == [INVALID_REQUEST, NONE]
    assert changed
    assert eng.state == {Entity.user("bob"): {"producer_byte_rate": 7.0}}


def test_removing_the_last_key_removes_the_entity():
    """ref §2.3 'Replay': an entity without keys disappears and is not described."""
    eng = engine({Entity.user("alice"): {"producer_byte_rate": 5.0, "consumer_byte_rate": 6.0}})
    alter(eng, entry(U, rm("producer_byte_rate"), rm("consumer_byte_rate")))
    assert eng.state == {}
    assert described(eng) == {}
    assert described(eng, ("user", EXACT, "alice")) == {}


def test_an_entity_with_no_ops_succeeds_and_writes_nothing():
    """ref §2.3 F."""
    eng = engine()
    assert alter(eng, entry(UC)) == ([AlterResult(NONE, None, (("client-id", "app"), ("user", "alice")))],
                                     False)


def test_which_bad_key_is_reported_follows_hashmap_order():
    """ref §2.3 E: ops are folded into a HashMap and checked in its order, stopping at the first
    failure. With three ops (4 buckets) consumer_byte_rate comes before producer_byte_rate."""
    message = error_of(U, put("producer_byte_rate", -1.0), put("foo", 1.0), put("consumer_byte_rate", 1.5))
    assert message == "consumer_byte_rate cannot be a fractional value."


# -- duplicates (ref §2.3 A–B, §6.1–2) ------------------------------------------------------------

def test_duplicate_key_reports_ignoring_duplicate_entity():
    """ref §2.3 A–B, §6.1: the 'Duplicate quota key' text is overwritten; nothing is written."""
    eng = engine()
    results, changed = alter(eng, entry(U, put("producer_byte_rate", 1.0), put("producer_byte_rate", 2.0)))
    assert results == [AlterResult(INVALID_REQUEST,
                                   "Ignoring duplicate entity ClientQuotaEntity(entries={user=alice})", U)]
    assert not changed
    assert eng.state == {}


def test_a_removal_counts_as_a_duplicate_key():
    """ref §2.3 A: the check is containsKey, removes included."""
    eng = engine({Entity.user("alice"): {"producer_byte_rate": 5.0}})
    result = one(eng, entry(U, rm("producer_byte_rate"), rm("producer_byte_rate")))
    assert result.error_message == "Ignoring duplicate entity ClientQuotaEntity(entries={user=alice})"
    assert eng.state == {Entity.user("alice"): {"producer_byte_rate": 5.0}}


def test_duplicate_key_on_an_invalid_entity_still_says_ignoring_duplicate():
    """ref §2.3 B runs before validateEntity (C)."""
    assert error_of((("foo", ""),), put("a", 1.0), put("a", 1.0)) == \
        "Ignoring duplicate entity ClientQuotaEntity(entries={foo=})"


def test_duplicate_entity_commits_the_first_entry_but_reports_an_error():
    """ref §2.3 B case (i), §6.2: one response entry with the error; the first entry's change is
    committed, the second's is not."""
    eng = engine()
    results, changed = alter(eng, entry(UC, put("producer_byte_rate", 1.0)),
                             entry((("client-id", "app"), ("user", "alice")), put("consumer_byte_rate", 2.0)))
    assert results == [AlterResult(
        INVALID_REQUEST,
        "Ignoring duplicate entity ClientQuotaEntity(entries={client-id=app, user=alice})",
        (("client-id", "app"), ("user", "alice")))]
    assert changed
    assert eng.state == {Entity.user_client("alice", "app"): {"producer_byte_rate": 1.0}}


def test_duplicate_entity_after_a_failed_first_entry():
    """ref §2.3 B: the earlier error is overwritten; nothing written."""
    eng = engine()
    results, changed = alter(eng, entry(U, put("producer_byte_rate", -1.0)),
                             entry(U, put("producer_byte_rate", 1.0)))
    assert results == [AlterResult(INVALID_REQUEST,
                                   "Ignoring duplicate entity ClientQuotaEntity(entries={user=alice})", U)]
    assert not changed


def test_duplicate_entity_message_prints_default_names_as_null():
    """ref §2.3 B: a default name prints as null, in HashMap order."""
    eng = engine()
    entity = (("user", None), ("client-id", None))
    results, _ = alter(eng, entry(entity, put("producer_byte_rate", 1.0)), entry(entity))
    assert results[0].error_message == \
        "Ignoring duplicate entity ClientQuotaEntity(entries={client-id=null, user=null})"


def test_duplicate_entity_reached_through_a_collapsed_type():
    """ref §2.2 + §2.3 B: {user=a,user=b} and {user=b} are the same entity."""
    eng = engine()
    results, changed = alter(eng, entry((("user", "a"), ("user", "b")), put("producer_byte_rate", 1.0)),
                             entry((("user", "b"),), put("producer_byte_rate", 2.0)))
    message = "Ignoring duplicate entity ClientQuotaEntity(entries={user=b})"
    assert results == [AlterResult(INVALID_REQUEST, message, (("user", "b"),))]
    assert changed
    assert eng.state == {Entity.user("b"): {"producer_byte_rate": 1.0}}


# -- validateOnly (ref §2.1 step 5, §2.5) ---------------------------------------------------------

def test_validate_only_gives_the_same_results_and_writes_nothing():
    start = {Entity.user("alice"): {"producer_byte_rate": 5.0}}
    entries = [entry(U, rm("producer_byte_rate"), put("consumer_byte_rate", 7.0)),
               entry((("user", "bob"),), put("producer_byte_rate", -1.0)),
               entry(UC, put("request_percentage", 200.0)),
               entry(UC, put("request_percentage", 1.0))]
    dry = engine(start)
    real = engine(start)
    dry_results, dry_changed = dry.alter(entries, True, version=1)
    real_results, real_changed = real.alter(entries, False, version=1)
    assert dry_results == real_results
    assert (dry_changed, real_changed) == (False, True)
    assert dry.state == start
    assert real.state == {Entity.user("alice"): {"consumer_byte_rate": 7.0},
                          Entity.user_client("alice", "app"): {"request_percentage": 200.0}}


# -- the 10000-record cap (ref §2.1 step 6, §2.7, §6.18) -------------------------------------------

def _users(n: int, prefix: str = "u") -> list[AlterEntry]:
    return [entry((("user", f"{prefix}{i}"),), put("producer_byte_rate", 1.0)) for i in range(n)]


@pytest.mark.parametrize("validate_only", [False, True])
def test_exactly_10000_records_pass(validate_only):
    eng = engine()
    results, changed = eng.alter(_users(MAX_RECORDS_PER_USER_OP), validate_only, version=1)
    assert {r.error_code for r in results} == {NONE}
    assert len(results) == 10_000
    assert changed is not validate_only


@pytest.mark.parametrize("validate_only", [False, True])
def test_10001_records_fail_every_wire_entry_and_write_nothing(validate_only):
    eng = engine()
    entries = [*_users(MAX_RECORDS_PER_USER_OP + 1),
               entry((("user", "x"), ("user", "u0")), put("producer_byte_rate", 1.0)),  # duplicate entity
               entry((("foo", ""),), put("bar", -1.0))]  # invalid: counts nothing, still echoed
    results, changed = eng.alter(entries, validate_only, version=1)
    assert results == [AlterResult(POLICY_VIOLATION, MSG_POLICY_VIOLATION, e.entity) for e in entries]
    assert MSG_POLICY_VIOLATION == "Request parameters do not satisfy the configured policy."
    assert not changed
    assert eng.state == {}
    entries = [*_users(MAX_RECORDS_PER_USER_OP), entry((("user", "y"),), put("producer_byte_rate", 1.0))]
    assert {r.error_code for r in eng.alter(entries, validate_only, version=1)[0]} == {POLICY_VIOLATION}


def test_only_changed_records_count_towards_the_cap():
    """ref §2.7: no-ops, removals of missing keys and invalid entities do not count."""
    eng = engine({Entity.user("u0"): {"producer_byte_rate": 1.0}})
    entries = [*_users(MAX_RECORDS_PER_USER_OP + 1),          # u0 is a no-op: 10000 records
               entry((("user", "z"),), rm("consumer_byte_rate")),  # missing: nothing
               entry((("user", "w"),), put("producer_byte_rate", 0.5))]  # invalid: nothing
    results, changed = eng.alter(entries, False, version=1)
    assert changed
    assert len(eng.state) == MAX_RECORDS_PER_USER_OP + 1
    assert [r.error_code for r in results].count(NONE) == MAX_RECORDS_PER_USER_OP + 2


def test_multi_key_entities_count_one_record_per_key():
    """ref §2.7: 2501 entities with all 4 client keys changed is over the cap."""
    ops = [put(k, 1.0) for k in ("producer_byte_rate", "consumer_byte_rate", "request_percentage",
                                 "controller_mutation_rate")]
    eng = engine()
    entries = [entry((("client-id", f"c{i}"),), *ops) for i in range(2501)]
    assert {r.error_code for r in eng.alter(entries, False, version=1)[0]} == {POLICY_VIOLATION}
    assert {r.error_code for r in eng.alter(entries[:2500], False, version=1)[0]} == {NONE}


# -- DescribeClientQuotas validation (ref §3.1) ---------------------------------------------------

@pytest.mark.parametrize(("components", "code", "message"), [
    ([("", EXACT, "x")], INVALID_REQUEST, "Invalid empty entity type."),
    ([("user", EXACT, "a"), ("user", SPECIFIED, None)], INVALID_REQUEST,
     "Entity type user cannot appear more than once in the filter."),
    ([("client-id", DEFAULT, None), ("client-id", DEFAULT, None)], INVALID_REQUEST,
     "Entity type client-id cannot appear more than once in the filter."),
    ([("foo", SPECIFIED, None)], UNSUPPORTED_VERSION, "Unsupported entity type foo"),
    ([("foo", SPECIFIED, None), ("foo", SPECIFIED, None)], UNSUPPORTED_VERSION,
     "Unsupported entity type foo"),
    ([("User", EXACT, "a")], UNSUPPORTED_VERSION, "Unsupported entity type User"),
    ([("user", EXACT, None)], INVALID_REQUEST,
     "Request specified MATCH_TYPE_EXACT, but set match string to null."),
    ([("user", DEFAULT, "a")], INVALID_REQUEST,
     "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
    ([("user", SPECIFIED, "a")], INVALID_REQUEST,
     "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
    ([("user", SPECIFIED, "")], INVALID_REQUEST,
     "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
    ([("ip", 3, None)], INVALID_REQUEST, "Unknown match type 3"),
    ([("ip", -1, "x")], INVALID_REQUEST, "Unknown match type -1"),
    ([("ip", SPECIFIED, None), ("user", EXACT, "a")], INVALID_REQUEST, MSG_FILTER_IP_COMBINATION),
    ([("client-id", DEFAULT, None), ("ip", EXACT, "1.2.3.4")], INVALID_REQUEST, MSG_FILTER_IP_COMBINATION),
    # request order: the first failing component wins; the combination check comes after the loop
    ([("foo", EXACT, "x"), ("", EXACT, "x")], UNSUPPORTED_VERSION, "Unsupported entity type foo"),
    ([("", EXACT, "x"), ("foo", EXACT, "x")], INVALID_REQUEST, "Invalid empty entity type."),
    ([("ip", SPECIFIED, None), ("user", EXACT, None)], INVALID_REQUEST,
     "Request specified MATCH_TYPE_EXACT, but set match string to null."),
    ([("ip", SPECIFIED, None), ("user", SPECIFIED, None), ("foo", SPECIFIED, None)], UNSUPPORTED_VERSION,
     "Unsupported entity type foo"),
])
@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("version", [0, 1])
def test_filter_errors(components, code, message, strict, version):
    """ref §3.1: exact codes and texts, Entries=null, checked even with no quotas stored (§3.1.4)."""
    result = describe(engine(), *components, strict=strict, version=version)
    assert (result.error_code, result.error_message, result.entries) == (code, message, None)


def test_filter_ip_combination_text_has_a_period():
    """ref §3.1 step 3: KRaft's text has a period after 'combination' (ZK had a comma)."""
    assert MSG_FILTER_IP_COMBINATION == ("Invalid entity filter component combination. IP filter component "
                                         "should not be used with user or clientId filter component.")


def test_denied_describe():
    """ref §1.5, §6.6: 31 with a null message and null entries."""
    result = engine().describe_denied()
    assert result.error_code == CLUSTER_AUTHORIZATION_FAILED
    assert result.error_message is None
    assert result.entries is None


# -- DescribeClientQuotas matching (ref §3.2) -----------------------------------------------------

STATE = {
    Entity.user("alice"): {"producer_byte_rate": 1.0},
    Entity.user(None): {"producer_byte_rate": 2.0},
    Entity.user("<default>"): {"producer_byte_rate": 3.0},
    Entity.client("app"): {"consumer_byte_rate": 4.0},
    Entity.client(None): {"consumer_byte_rate": 5.0},
    Entity.user_client("alice", "app"): {"request_percentage": 6.0, "producer_byte_rate": 7.0},
    Entity.user_client("alice", None): {"request_percentage": 8.0},
    Entity.user_client(None, None): {"controller_mutation_rate": 9.0},
    Entity.ip("1.2.3.4"): {"connection_creation_rate": 10.0},
    Entity.ip(None): {"connection_creation_rate": 11.0},
}
ALICE, DEF_USER, LIT_DEFAULT = fs(("user", "alice")), fs(("user", None)), fs(("user", "<default>"))
APP, DEF_CLIENT = fs(("client-id", "app")), fs(("client-id", None))
ALICE_APP, ALICE_DEF = fs(("user", "alice"), ("client-id", "app")), fs(("user", "alice"), ("client-id", None))
DEF_DEF, IP_A, IP_DEF = fs(("user", None), ("client-id", None)), fs(("ip", "1.2.3.4")), fs(("ip", None))


def matched(*components, strict=False) -> set[frozenset[tuple[str, str | None]]]:
    return set(described(engine(STATE), *components, strict=strict))


def test_empty_non_strict_filter_returns_everything_including_ip():
    """ref §3.2, §6.8: ClientQuotaFilter.all()."""
    assert matched() == {frozenset(e.parts) for e in STATE}


def test_empty_strict_filter_returns_nothing():
    """ref §3.2, §6.8."""
    assert matched(strict=True) == set()


@pytest.mark.parametrize(("components", "strict", "expected"), [
    ([("user", EXACT, "alice")], True, {ALICE}),
    ([("user", EXACT, "alice")], False, {ALICE, ALICE_APP, ALICE_DEF}),
    ([("user", DEFAULT, None)], True, {DEF_USER}),  # not the literal '<default>' (§1.3)
    ([("user", DEFAULT, None)], False, {DEF_USER, DEF_DEF}),
    ([("user", EXACT, "<default>")], False, {LIT_DEFAULT}),
    ([("user", SPECIFIED, None)], True, {ALICE, DEF_USER, LIT_DEFAULT}),  # defaults included (§6.8)
    ([("user", SPECIFIED, None)], False, {ALICE, DEF_USER, LIT_DEFAULT, ALICE_APP, ALICE_DEF, DEF_DEF}),
    ([("client-id", SPECIFIED, None), ("user", EXACT, "alice")], True, {ALICE_APP, ALICE_DEF}),
    ([("user", EXACT, "alice"), ("client-id", DEFAULT, None)], True, {ALICE_DEF}),
    ([("user", SPECIFIED, None), ("client-id", SPECIFIED, None)], True, {ALICE_APP, ALICE_DEF, DEF_DEF}),
    ([("client-id", EXACT, "app")], False, {APP, ALICE_APP}),
    ([("client-id", DEFAULT, None)], False, {DEF_CLIENT, ALICE_DEF, DEF_DEF}),
    ([("ip", SPECIFIED, None)], False, {IP_A, IP_DEF}),
    ([("ip", EXACT, "1.2.3.4")], True, {IP_A}),
    ([("ip", DEFAULT, None)], True, {IP_DEF}),
    ([("ip", EXACT, "01.02.03.04")], False, set()),  # byte-for-byte, no normalisation (§1.3)
    ([("user", EXACT, "")], False, set()),  # EXACT "" is accepted and matches nothing (§1.3)
    ([("user", EXACT, "ALICE")], False, set()),  # no case folding (§1.3)
    ([("user", EXACT, "nobody")], True, set()),  # not an error (§3.2)
])
def test_matching(components, strict, expected):
    """ref §3.2: exact, default and specified matching, strict and not."""
    assert matched(*components, strict=strict) == expected


def test_describe_returns_every_value_of_a_matching_entity():
    """ref §3.3: values are never filtered by key; the entity lists client-id before user."""
    result = describe(engine(STATE), ("user", EXACT, "alice"), ("client-id", EXACT, "app"), strict=True)
    assert result.entries is not None
    [(entity, values)] = result.entries
    assert entity == (("client-id", "app"), ("user", "alice"))
    assert dict(values) == {"request_percentage": 6.0, "producer_byte_rate": 7.0}


@pytest.mark.parametrize("version", [0, 1])
def test_describe_is_the_same_at_both_versions(version):
    """ref §1.1: v0 and v1 have the same fields; only the encoding differs."""
    eng = engine(STATE)
    component = ("user", SPECIFIED, None)
    assert describe(eng, component, version=version) == describe(eng, component)


def test_describe_after_alter_sees_the_change_and_load_replaces_state():
    eng = engine(STATE)
    alter(eng, entry((("user", "alice"),), put("producer_byte_rate", 99.0), put("consumer_byte_rate", 98.0)))
    assert described(eng, ("user", EXACT, "alice"), strict=True) == \
        {ALICE: {"producer_byte_rate": 99.0, "consumer_byte_rate": 98.0}}
    eng.load({})
    assert described(eng) == {}
    assert eng.state == {}


def test_state_is_a_copy():
    eng = engine(STATE)
    state = eng.state
    state[Entity.user("alice")]["producer_byte_rate"] = 0.0  # type: ignore[index]
    assert eng.state[Entity.user("alice")] == {"producer_byte_rate": 1.0}


# -- properties -----------------------------------------------------------------------------------

TYPES = st.sampled_from(["user", "client-id", "ip", "foo", ""])
NAMES = st.sampled_from([None, "", "a", "b", "<default>", "bad", "1.2.3.4"])
KEYS = st.sampled_from(["producer_byte_rate", "consumer_byte_rate", "request_percentage",
                        "controller_mutation_rate", "connection_creation_rate", "foo"])
VALUES = st.sampled_from([1.0, 2.0, 1024.0, 0.0, -1.0, 0.5, NAN, INF, 1235.0000001, 3e9, 2.5])
OPS = st.builds(WireOp, KEYS, VALUES, st.booleans())
WIRE_ENTITIES = st.lists(st.tuples(TYPES, NAMES), max_size=3).map(tuple)
# mostly valid-looking entities, so that requests do write
GOOD_ENTITIES = st.sampled_from([(("user", "a"),), (("user", None),), (("client-id", "b"),),
                                 (("user", "a"), ("client-id", None)),
                                 (("client-id", "b"), ("user", "<default>")),
                                 (("ip", "1.2.3.4"),), (("ip", None),)])
ENTRIES = st.builds(AlterEntry, st.one_of(GOOD_ENTITIES, GOOD_ENTITIES, WIRE_ENTITIES),
                    st.lists(OPS, max_size=4).map(tuple))
REQUESTS = st.lists(ENTRIES, max_size=6)


def _same(a, b) -> bool:
    """States equal, NaN equal to NaN."""
    def norm(state):
        return {e: {k: ("nan" if v != v else v) for k, v in q.items()} for e, q in state.items()}
    return norm(a) == norm(b)


def _seeded(requests) -> QuotaEngine:
    eng = engine()
    for request in requests:
        eng.alter(request, False, version=1)
    return eng


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(history=st.lists(REQUESTS, max_size=3), request=REQUESTS)
def test_validate_only_is_a_dry_run(history, request):
    """ref §2.1 step 5, §2.5: the same results as the real alter, and no change."""
    dry, real = _seeded(history), _seeded(history)
    before = dry.state
    dry_results, dry_changed = dry.alter(request, True, version=1)
    real_results, _ = real.alter(request, False, version=1)
    assert dry_results == real_results  # AlterResult holds no floats: plain equality
    assert not dry_changed
    assert _same(dry.state, before)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(history=st.lists(REQUESTS, max_size=3), request=REQUESTS)
def test_alter_properties(history, request):
    """One answer per distinct entity (§2.6); the flag tells a change; describe-all is the state
    (§3.2); a repeat of an all-successful request changes nothing (§2.5)."""
    eng = _seeded(history)
    before = eng.state
    results, changed = eng.alter(request, False, version=1)
    distinct = {Entity.of(e.entity) for e in request}
    assert len(results) == len(distinct)
    assert {Entity.of(r.entity) for r in results} == distinct
    assert changed == (not _same(before, eng.state))
    assert all(r.error_message is None for r in results if r.error_code == NONE)
    assert all(values for values in eng.state.values())  # no empty entities (§2.3 replay)
    everything = describe(eng)
    assert everything.entries is not None
    assert _same({Entity.of(e): dict(v) for e, v in everything.entries}, eng.state)
    if all(r.error_code == NONE for r in results):
        again, changed_again = eng.alter(request, False, version=1)
        assert str(again) == str(results)
        assert not changed_again


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(history=st.lists(REQUESTS, max_size=4))
def test_strict_exact_filter_finds_exactly_one_entity(history):
    """ref §3.2: a strict filter of EXACT/DEFAULT components for every type of an entity returns
    that entity alone."""
    eng = _seeded(history)
    for entity in eng.state:
        components = [(t, EXACT, n) if n is not None else (t, DEFAULT, None) for t, n in entity.parts]
        found = described(eng, *components, strict=True)
        assert list(found) == [frozenset(entity.parts)]


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(entity=GOOD_ENTITIES, key=KEYS, value=VALUES)
def test_set_then_describe_round_trips_the_exact_double(entity, key, value):
    """ref §2.4: the stored value is exactly the double sent; describe returns it unchanged."""
    eng = engine()
    result = one(eng, entry(entity, put(key, value)))
    found = described(eng)
    if result.error_code == NONE:
        [(pairs, values)] = found.items()
        assert pairs == frozenset(entity)
        stored = values[key]
        assert stored == value or (math.isnan(stored) and math.isnan(value))
    else:
        assert found == {}
