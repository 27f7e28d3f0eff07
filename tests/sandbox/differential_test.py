"""Differential tests: the same requests sent to the real Apache Kafka broker and to the
sandbox, compared exactly (error codes, messages, echoed entities, describe results).

Each scenario is a list of raw DescribeClientQuotas / AlterClientQuotas requests built with
kafka-python's generated classes and sent through kqplan's transport. It runs first on the
sandbox (over the wire, and on the bare engine to tell engine bugs from codec bugs), whose
answers become the expectation for the real broker. Alter answers come from the controller's
current state and are compared at once; describes are served from the broker's metadata
image, which lags (ref §2.8), so a describe on the real broker is repeated, within a bound,
until it agrees.

Scenarios use names unique to one run (and random 10.x ip literals), so the shared broker can
run them in any order, and remove what they set. The default entities of a whole type
(``{user=null}``, ``{ip=null}``) are shared by every test, so they are only ever written
with validateOnly. Authorization (31) needs an authorizer and is covered by the engine tests.

The sandbox answers in the flavour of the real broker's metadata mode (``real_kafka.mode``):
``kraft`` against a KRaft broker, ``zk`` against a ZooKeeper-mode one (the harness's matrix,
``KQPLAN_KAFKA_MATRIX=3.9.1-zookeeper``; docs/zk-rules.md). Every scenario runs in both modes:
each is a request sequence, and the sandbox's answers are the expectation whatever they are.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest
from kafka.protocol.metadata import ApiVersionsRequest

from kqplan.cluster.connection import config_from_properties
from kqplan.cluster.transport import KafkaTransport
from kqplan.sandbox.engine import AlterEntry, DescribeComponent, WireOp
from kqplan.sandbox.flavors import Flavor, new_engine

EXACT, DEFAULT, SPECIFIED = 0, 1, 2
POLL_S = 20.0  # how long a real-broker describe may lag behind an alter (ref §2.8)

Pairs = tuple[tuple[str, str | None], ...]
OpSpec = tuple[str, float, bool]  # key, value, remove


# -- steps ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Alter:
    entries: Sequence[tuple[Pairs, Sequence[OpSpec]]]
    validate_only: bool = False
    version: int | None = None  # None: negotiated (v1 on every supported Kafka)


@dataclass(frozen=True)
class Describe:
    components: Sequence[tuple[str, int, str | None]] = ()
    strict: bool = False
    version: int | None = None


Step = Alter | Describe


def put(key: str, value: float) -> OpSpec:
    return (key, value, False)


def rm(key: str, value: float = 0.0) -> OpSpec:
    return (key, value, True)


@dataclass
class Names:
    """Names unique to one scenario run; ``owns`` tells its entities from everyone else's."""

    tag: str
    flavor: Flavor = Flavor.KRAFT
    """The mode the scenario runs in: a few scenarios leave out steps that cost one mode minutes."""
    prefix: str = ""
    ips: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.prefix = f"kqdiff-{self.tag}-{uuid.uuid4().hex[:10]}"

    def __call__(self, suffix: str) -> str:
        return f"{self.prefix}-{suffix}"

    def ip(self) -> str:
        """A random 10.x.y.z literal (ip entity names must resolve, so no prefix there)."""
        raw = uuid.uuid4().bytes
        address = f"10.{raw[0]}.{raw[1]}.{raw[2]}"
        self.ips.add(address)
        return address

    def ipv6(self) -> str:
        """A random fd00::/8 literal (refused by ZooKeeper-mode brokers, stored by KRaft ones)."""
        raw = uuid.uuid4().bytes
        address = f"fd00::{raw[0]:x}:{raw[1]:x}:{raw[2]:x}"
        self.ips.add(address)
        return address

    def owns(self, pairs: Pairs) -> bool:
        return any(n is not None and (n.startswith(self.prefix) or n in self.ips) for _, n in pairs)


# -- normalised answers ----------------------------------------------------------------------------

def _pair_key(pair: tuple[str, str | None]) -> tuple[str, bool, str]:
    return (pair[0], pair[1] is None, pair[1] or "")


def _alter_answer(rows: Sequence[tuple[int, str | None, Pairs]]) -> list[tuple[int, str | None, Pairs]]:
    """Order of response entries is HashMap order, which nobody may rely on (ref §6.14): sort.
    The order of pairs inside an echoed entity is kept: it is Kafka's, and the sandbox's."""
    return sorted(rows, key=lambda r: (r[0], r[1] or "", [_pair_key(p) for p in r[2]]))


DescribeEntries = Sequence[tuple[Pairs, Sequence[tuple[str, float]]]]


def _describe_answer(code: int, message: str | None, entries: DescribeEntries | None,
                     names: Names) -> tuple[Any, ...]:
    """Only the scenario's own entities (the real broker is shared); values sorted, doubles as
    hex so that NaN equals NaN and every bit counts."""
    if entries is None:
        return (code, message, None)
    rows = sorted(((tuple(pairs), tuple(sorted((k, float(v).hex()) for k, v in values)))
                   for pairs, values in entries if names.owns(tuple(pairs))),
                  key=lambda row: [_pair_key(p) for p in row[0]])
    return (code, message, rows)


class Target(Protocol):
    def alter(self, step: Alter) -> list[tuple[int, str | None, Pairs]]: ...

    def describe(self, step: Describe, names: Names) -> tuple[Any, ...]: ...


def _pairs(entity: Sequence[Any]) -> Pairs:
    return tuple((x.entity_type, x.entity_name) for x in entity)


class WireTarget:
    """A broker reached over the Kafka protocol (kqplan's transport, kafka-python's classes)."""

    def __init__(self, name: str, bootstrap: str) -> None:
        self.name = name
        config = config_from_properties("", bootstrap=bootstrap, source=f"differential:{name}", env={})
        self.transport = KafkaTransport(config)

    def close(self) -> None:
        self.transport.close()

    @staticmethod
    def _version(version: int | None) -> dict[str, int]:
        return {} if version is None else {"min_version": version, "max_version": version}

    def alter(self, step: Alter) -> list[tuple[int, str | None, Pairs]]:
        cls = AlterClientQuotasRequest
        entity, op = cls.EntryData.EntityData, cls.EntryData.OpData
        entries = [cls.EntryData(entity=[entity(entity_type=t, entity_name=n) for t, n in pairs],
                                 ops=[op(key=k, value=v, remove=r) for k, v, r in ops])
                   for pairs, ops in step.entries]
        response = self.transport.send(cls(entries=entries, validate_only=step.validate_only,
                                           **self._version(step.version)))
        return _alter_answer([(e.error_code, e.error_message, _pairs(e.entity)) for e in response.entries])

    def describe(self, step: Describe, names: Names) -> tuple[Any, ...]:
        cls = DescribeClientQuotasRequest
        components = [cls.ComponentData(entity_type=t, match_type=m, match=v) for t, m, v in step.components]
        response = self.transport.send(cls(components=components, strict=step.strict,
                                           **self._version(step.version)))
        entries = None if response.entries is None else [
            (_pairs(e.entity), [(v.key, v.value) for v in e.values])
            for e in response.entries]
        return _describe_answer(response.error_code, response.error_message, entries, names)


class EngineTarget:
    """The sandbox's engine called directly: a difference here and not over the wire is a codec bug."""

    name = "engine"

    def __init__(self, flavor: Flavor = Flavor.KRAFT) -> None:
        self.engine = new_engine(flavor, None)

    def close(self) -> None:
        pass

    def alter(self, step: Alter) -> list[tuple[int, str | None, Pairs]]:
        entries = [AlterEntry(tuple(pairs), tuple(WireOp(k, v, r) for k, v, r in ops))
                   for pairs, ops in step.entries]
        results, _ = self.engine.alter(entries, step.validate_only, version=step.version or 1)
        return _alter_answer([(r.error_code, r.error_message, r.entity) for r in results])

    def describe(self, step: Describe, names: Names) -> tuple[Any, ...]:
        result = self.engine.describe([DescribeComponent(*c) for c in step.components], step.strict,
                                      version=step.version or 1)
        return _describe_answer(result.error_code, result.error_message, result.entries, names)


# -- running a scenario ------------------------------------------------------------------------

def run(target: Target, steps: Sequence[Step], names: Names,
        expected: Sequence[Any] | None = None) -> list[Any]:
    """Every step's answer; with ``expected``, describes are retried until they agree (ref §2.8)."""
    answers: list[Any] = []
    for index, step in enumerate(steps):
        if isinstance(step, Alter):
            answers.append(target.alter(step))
            continue
        deadline = time.monotonic() + POLL_S
        answer = target.describe(step, names)
        while expected is not None and answer != expected[index] and time.monotonic() < deadline:
            time.sleep(0.2)
            answer = target.describe(step, names)
        answers.append(answer)
    return answers


def cleanup(target: Target, names: Names) -> None:
    """Remove every key of the scenario's entities."""
    everything = target.describe(Describe(), names)
    removals = [(pairs, [rm(k) for k, _ in values]) for pairs, values in everything[2] or ()]
    for start in range(0, len(removals), 2000):
        target.alter(Alter(removals[start:start + 2000]))


def compare(reference: Target, other: Target, scenario: Callable[[Names], list[Step]], tag: str,
            flavor: Flavor) -> None:
    names = Names(tag, flavor)
    steps = scenario(names)
    try:
        expected = run(reference, steps, names)
        actual = run(other, steps, names, expected)
    finally:
        for target in (reference, other):
            cleanup(target, names)
    for index, (step, want, got) in enumerate(zip(steps, expected, actual, strict=True)):
        assert got == want, f"step {index} ({_show(step)}): real Kafka {got!r}, sandbox {want!r}"


def _show(step: Step) -> str:
    text = repr(step)
    return text if len(text) < 300 else text[:300] + "…"


# -- scenarios -----------------------------------------------------------------------------------

SCENARIOS: dict[str, Callable[[Names], list[Step]]] = {}


def scenario(fn: Callable[[Names], list[Step]]) -> Callable[[Names], list[Step]]:
    SCENARIOS[fn.__name__] = fn
    return fn


def _exact(pairs: Pairs) -> list[tuple[str, int, str | None]]:
    return [(t, EXACT, n) if n is not None else (t, DEFAULT, None) for t, n in pairs]


@scenario
def set_describe_remove(n: Names) -> list[Step]:
    """ref §2.3, §2.6, §3.2: set, read back strictly, remove, gone (§2.3 replay)."""
    u, uc = (("user", n("u")),), (("user", n("u")), ("client-id", n("c")))
    return [Alter([(u, [put("producer_byte_rate", 1024.0), put("request_percentage", 25.0)]),
                   (uc, [put("consumer_byte_rate", 2048.0)])]),
            Describe(_exact(u), strict=True), Describe(_exact(uc), strict=True),
            Describe(_exact(u)),
            Alter([(u, [rm("producer_byte_rate")])]), Describe(_exact(u), strict=True),
            Alter([(u, [rm("request_percentage")]), (uc, [rm("consumer_byte_rate")])]),
            Describe(_exact(u)), Describe(_exact(uc), strict=True)]


@scenario
def default_client_name_and_literal_default(n: Names) -> list[Step]:
    """ref §1.3: null is the default entity; '<default>' is an ordinary name."""
    default, literal = (("user", n("u")), ("client-id", None)), (("user", n("u")), ("client-id", "<default>"))
    return [Alter([(default, [put("producer_byte_rate", 1.0)]), (literal, [put("producer_byte_rate", 2.0)])]),
            Describe([("user", EXACT, n("u")), ("client-id", DEFAULT, None)], strict=True),
            Describe([("user", EXACT, n("u")), ("client-id", EXACT, "<default>")], strict=True),
            Describe([("user", EXACT, n("u")), ("client-id", SPECIFIED, None)], strict=True)]


@scenario
def whole_type_defaults_validate_only(n: Names) -> list[Step]:
    """ref §1.3, §2.3 D: {user=null}, {client-id=null}, {ip=null} (validateOnly: shared entities)."""
    return [Alter([((("user", None),), [put("producer_byte_rate", 1.0)]),
                   ((("client-id", None),), [put("consumer_byte_rate", 1.5)]),
                   ((("user", None), ("client-id", None)), [put("request_percentage", 1.0)]),
                   ((("ip", None),), [put("connection_creation_rate", 5.0)])], validate_only=True)]


@scenario
def empty_request(n: Names) -> list[Step]:
    """ref §2.1 step 3."""
    return [Alter([]), Alter([], validate_only=True)]


@scenario
def entity_validation_errors(n: Names) -> list[Step]:
    """ref §2.3 C: empty entity, unknown/empty type, empty names, HashMap order of checks."""
    op = [put("producer_byte_rate", 1.0)]
    return [Alter([((), op), ((("foo", n("x")),), op)]),
            Alter([((("", n("x")),), op)]), Alter([((("User", n("x")),), op)]),
            Alter([((("user", ""),), op)]), Alter([((("client-id", ""),), op)]),
            Alter([((("ip", ""),), [put("connection_creation_rate", 1.0)])]),
            Alter([((("foo", ""),), op)]),
            Alter([((("user", ""), ("client-id", "")), op)]),
            Alter([((("user", n("u")), ("foo", n("f"))), op)]),
            Alter([((("user", n("u")), ("", None)), op)])]


@scenario
def empty_entity_without_ops(n: Names) -> list[Step]:
    """ref §2.3 C, F: validation runs with no ops; a valid entity with no ops is a success."""
    return [Alter([((), []), ((("user", n("u")),), [])])]


@scenario
def ip_combination(n: Names) -> list[Step]:
    """ref §2.3 D, §6.11: 'shouldnot', and it comes before the ip lookup."""
    op = [put("connection_creation_rate", 1.0)]
    return [Alter([((("ip", n.ip()), ("user", n("u"))), op)]),
            Alter([((("client-id", n("c")), ("ip", None)), op)]),
            Alter([((("ip", n("h") + ".invalid"), ("user", n("u")), ("client-id", None)), op)])]


# InetAddress.getByName's edges (JDK literal rules; zones need a matching interface address).
ODD_IP_NAMES = ["::1", "[::1]", "::ffff:1.2.3.4", "::1.2.3.4", "1.2.3", "1", "127.1", "12345",
                "4294967295", "4294967296", "01.02.03.04", "1.2.3.04", "08.1.1.1", "010.1.1.1", "0x7f.1",
                "0x1", "[1.2.3.4]",
                "[::1%lo]", "[]", "[a]", "[localhost]", "[::1", "::1]", "1::2::3", "::1%lo", "fe80::1%lo",
                "fe80::1%1", "fe80::1%nosuch", "fec0::1%lo", "2001:db8::1%lo", "1.2.3.4%lo", "localhost",
                "LOCALHOST", "localhost.", "256.1.1.1", "1.256.1", "1.65535", "1.65536", "1.2.3.4.5",
                "1.2.3.4.", ".1.2.3", "1..2", "1234567890123456", "has space", " 1.2.3.4", "1.2.3.4 ", "e1"]


@scenario
def ip_resolvability(n: Names) -> list[Step]:
    """ref §2.3 D, §6.12: literals and resolvable names pass; others fail, before the keys."""
    ok = [put("connection_creation_rate", 1.0)]
    bad = n("h") + ".invalid"
    return [Alter([((("ip", name),), ok) for name in (n.ip(), *ODD_IP_NAMES, bad)], validate_only=True),
            Alter([((("ip", bad),), [put("foo", -1.0)])])]


@scenario
def key_errors(n: Names) -> list[Step]:
    """ref §2.4 check 1: unknown keys, keys of the other kind, empty key; key before value."""
    u, ip = (("user", n("u")),), (("ip", n.ip()),)
    return [Alter([(u, [put("foo", 1.0)])]), Alter([(u, [put("", 1.0)])]),
            Alter([(u, [put("connection_creation_rate", 1.0)])]),
            Alter([(ip, [put("producer_byte_rate", 1.0)])]),
            Alter([((("client-id", n("c")),), [put("SCRAM-SHA-256", 4096.0)])]),
            Alter([(u, [put("not.a.quota.key", 0.0)])])]


VALUES = [0.0, -0.0, -2.0, float("-inf"), float("inf"), 0.5, 2.245, 10000.5, 1235.0000001, 1234.9999999,
          2147483648.0, 2147483647.5, 9.223372036854775807e18, 9.223372036854778e18, 3.6893488147419103e19,
          1e-7, 5e-324, float("nan")]


@scenario
def value_table(n: Names) -> list[Step]:
    """ref §2.4: every row of the numeric edge-case table, for LONG, INT and DOUBLE keys, as one
    request of independent entities (partial results, §2.3)."""
    entries: list[tuple[Pairs, Sequence[OpSpec]]] = []
    for i, value in enumerate(VALUES):
        entries.append(((("user", n(f"long{i}")),), [put("producer_byte_rate", value)]))
        entries.append(((("client-id", n(f"double{i}")),), [put("controller_mutation_rate", value)]))
        entries.append(((("ip", n.ip()),), [put("connection_creation_rate", value)]))
    return [Alter(entries, validate_only=True), Alter(entries), Describe()]


@scenario
def stored_values_round_trip(n: Names) -> list[Step]:
    """ref §2.4, §6.9–10: 1235.0000001 and NaN are stored exactly; a repeat is a quiet success."""
    u = (("user", n("u")),)
    ops = [put("producer_byte_rate", 1235.0000001), put("request_percentage", float("nan")),
           put("controller_mutation_rate", float("inf"))]
    return [Alter([(u, ops)]), Describe(_exact(u), strict=True), Alter([(u, ops)]),
            Describe(_exact(u), strict=True)]


@scenario
def removals_are_not_validated(n: Names) -> list[Step]:
    """ref §2.3 E, §6.4, §1.3: unknown, foreign and missing keys; Value ignored on removal."""
    u, ip = (("user", n("u")),), (("ip", n.ip()),)
    return [Alter([(u, [rm("foo"), rm(""), rm("producer_byte_rate", -5.0)]),
                   (ip, [rm("producer_byte_rate"), rm("connection_creation_rate")]),
                   ((("client-id", n("c")),), [rm("connection_creation_rate", float("nan"))])]),
            Alter([(u, [put("producer_byte_rate", 10.0)])]),
            Alter([(u, [rm("producer_byte_rate", -1.0)])]), Describe(_exact(u))]


@scenario
def no_op_set(n: Names) -> list[Step]:
    """ref §2.5: setting the current value again succeeds."""
    u = (("user", n("u")),)
    return [Alter([(u, [put("producer_byte_rate", 10.0)])]), Alter([(u, [put("producer_byte_rate", 10.0)])]),
            Describe(_exact(u), strict=True)]


@scenario
def all_or_nothing_per_entity(n: Names) -> list[Step]:
    """ref §2.3 E, §6.5: one bad op and none of the entity's changes are written."""
    u = (("user", n("u")),)
    return [Alter([(u, [put("producer_byte_rate", 5.0)])]),
            Alter([(u, [put("consumer_byte_rate", 10.0), rm("producer_byte_rate"),
                        put("request_percentage", -1.0)])]),
            Describe(_exact(u), strict=True)]


@scenario
def partial_across_entities(n: Names) -> list[Step]:
    """ref §2.3 'Independence between entities'."""
    return [Alter([((("user", n("a")),), [put("producer_byte_rate", 0.5)]),
                   ((("user", n("b")),), [put("producer_byte_rate", 7.0)]),
                   ((("client-id", n("c")),), [put("bogus", 7.0)])]),
            Describe([("user", SPECIFIED, None)])]


@scenario
def several_bad_keys_hashmap_order(n: Names) -> list[Step]:
    """ref §2.3 E: the first failure in HashMap order is the one reported."""
    u = (("user", n("u")),)
    return [Alter([(u, [put("producer_byte_rate", -1.0), put("foo", 1.0), put("consumer_byte_rate", 1.5)])]),
            Alter([(u, [put("request_percentage", -1.0), put("producer_byte_rate", 0.5)])]),
            Alter([(u, [put("controller_mutation_rate", 0.0), put("consumer_byte_rate", 0.0),
                        put("producer_byte_rate", 0.0), put("request_percentage", 0.0), put("zzz", 1.0)])])]


@scenario
def hashmap_order_with_many_types_and_keys(n: Names) -> list[Step]:
    """ref §2.3 C, E: with many entity types or keys the maps resize, and the first failure in
    their iteration order is still the one reported."""
    types = [f"t{i}" for i in range(13)]
    keys = [f"k{i}" for i in range(20)]
    return [Alter([(tuple((t, n(t)) for t in types), [put("producer_byte_rate", 1.0)])]),
            Alter([((*((t, "") for t in types[:5]), ("user", ""), ("client-id", "")), [])]),
            Alter([((("user", n("u")), ("user", n("v")), ("user", n("w")), ("client-id", ""), ("foo", "")),
                    [])]),
            Alter([((("user", n("u")),), [put(k, -1.0) for k in keys])]),
            Alter([((("user", n("u")),), [*(rm(k) for k in keys), put("producer_byte_rate", 0.5),
                                           put("consumer_byte_rate", -1.0)])])]


@scenario
def duplicate_keys(n: Names) -> list[Step]:
    """ref §2.3 A–B, §6.1: 'Ignoring duplicate entity', removes included; nothing written."""
    u, uc = (("user", n("u")),), (("user", n("u")), ("client-id", None))
    return [Alter([(u, [put("producer_byte_rate", 1.0), put("producer_byte_rate", 2.0)])]),
            Alter([(uc, [rm("producer_byte_rate"), put("producer_byte_rate", 2.0)])]),
            Alter([((("foo", ""),), [put("a", 1.0), put("a", 1.0)])]),
            Describe([("user", EXACT, n("u"))])]


@scenario
def duplicate_entities(n: Names) -> list[Step]:
    """ref §2.3 B, §6.2: one response entry with the error; the first entry's change is committed."""
    uc = (("user", n("u")), ("client-id", n("c")))
    cu = (("client-id", n("c")), ("user", n("u")))
    v = (("user", n("v")),)
    return [Alter([(uc, [put("producer_byte_rate", 1.0)]), (cu, [put("consumer_byte_rate", 2.0)]),
                   (v, [put("producer_byte_rate", -1.0)]), (v, [put("producer_byte_rate", 1.0)])]),
            Describe(_exact(uc), strict=True), Describe(_exact(v), strict=True)]


@scenario
def repeated_entity_type(n: Names) -> list[Step]:
    """ref §2.2, §6.3: a repeated type collapses, last wins, before validation."""
    return [Alter([((("user", n("a")), ("user", n("b"))), [put("producer_byte_rate", 5.0)])]),
            Alter([((("user", ""), ("user", n("c"))), [put("producer_byte_rate", 5.0)])]),
            Alter([((("user", n("d")), ("user", "")), [put("producer_byte_rate", 5.0)])]),
            Alter([((("user", n("e")), ("client-id", n("x")), ("user", n("f"))),
                    [put("producer_byte_rate", 6.0)]),
                   ((("user", n("f")), ("client-id", n("x"))), [put("producer_byte_rate", 7.0)])]),
            Describe([("user", SPECIFIED, None)])]


@scenario
def validate_only_matches_real_alter(n: Names) -> list[Step]:
    """ref §2.1 step 5, §2.5: identical answers; nothing written."""
    u, uc = (("user", n("u")),), (("user", n("u")), ("client-id", n("c")))
    request = [(u, [rm("producer_byte_rate"), put("consumer_byte_rate", 7.0)]),
               ((("user", n("bob")),), [put("producer_byte_rate", -1.0)]),
               (uc, [put("request_percentage", 200.0)]), (uc, [put("request_percentage", 1.0)])]
    return [Alter([(u, [put("producer_byte_rate", 5.0)])]),
            Alter(request, validate_only=True), Describe([("user", EXACT, n("u"))]),
            Alter(request), Describe([("user", EXACT, n("u"))])]


def _users(n: Names, count: int, tag: str) -> list[tuple[Pairs, Sequence[OpSpec]]]:
    return [((("user", n(f"{tag}{i}")),), [put("producer_byte_rate", 1.0)]) for i in range(count)]


@scenario
def record_cap_exceeded(n: Names) -> list[Step]:
    """ref §2.1 step 6, §2.7, §6.18: 10001 records fail every wire entry with 44 and the generic
    text, entities echoed verbatim (repeats too), validateOnly included; nothing written.

    ZooKeeper mode has no cap (zk-rules §A5): validateOnly answers every entity on its own. The
    real write is left out there: 10 003 znode writes (and their removal) take a 3.9 broker
    minutes, beyond a request timeout, and prove no more than validateOnly, which runs the same
    checks and reads the same nodes."""
    entries = [*_users(n, 10_001, "cap"),
               ((("user", n("x")), ("user", n("cap0"))), [put("producer_byte_rate", 1.0)]),
               ((("foo", ""),), [put("bar", -1.0)])]
    writes = [Alter(entries)] if n.flavor is Flavor.KRAFT else []
    return [Alter(entries, validate_only=True), *writes,
            Describe([("user", EXACT, n("cap0"))]), Describe([("user", EXACT, n("cap10000"))])]


@scenario
def record_cap_counts_changes_only(n: Names) -> list[Step]:
    """ref §2.7: exactly 10000 records pass; an existing no-op, missing removals and invalid
    entities do not count (validateOnly: the cap applies there too)."""
    entries = [*_users(n, 10_001, "c"),
               ((("user", n("z")),), [rm("consumer_byte_rate")]),
               ((("user", n("w")),), [put("producer_byte_rate", 0.5)])]
    return [Alter([((("user", n("c0")),), [put("producer_byte_rate", 1.0)])]),
            Alter(entries, validate_only=True)]


@scenario
def describe_filter_errors(n: Names) -> list[Step]:
    """ref §3.1: every filter error, its code (35 for unknown types) and text; Entries=null."""
    filters: list[list[tuple[str, int, str | None]]] = [
        [("", EXACT, "x")],
        [("user", EXACT, n("a")), ("user", SPECIFIED, None)],
        [("client-id", DEFAULT, None), ("client-id", DEFAULT, None)],
        [("foo", SPECIFIED, None)], [("foo", SPECIFIED, None), ("foo", SPECIFIED, None)],
        [("User", EXACT, n("a"))],
        [("user", EXACT, None)], [("user", DEFAULT, n("a"))], [("user", SPECIFIED, n("a"))],
        [("user", SPECIFIED, "")],
        [("ip", 3, None)], [("ip", -1, "x")], [("ip", 127, None)],
        [("ip", SPECIFIED, None), ("user", EXACT, n("a"))],
        [("client-id", DEFAULT, None), ("ip", EXACT, "1.2.3.4")],
        [("foo", EXACT, "x"), ("", EXACT, "x")], [("", EXACT, "x"), ("foo", EXACT, "x")],
        [("ip", SPECIFIED, None), ("user", EXACT, None)],
        [("ip", SPECIFIED, None), ("user", SPECIFIED, None), ("foo", SPECIFIED, None)],
    ]
    return [Describe(f, strict=strict) for f in filters for strict in (False, True)]


@scenario
def describe_matching(n: Names) -> list[Step]:
    """ref §3.2, §6.8: exact, default, specified (defaults included), strict and not."""
    u, c = n("u"), n("c")
    ip = n.ip()
    entities: list[Pairs] = [(("user", u),), (("user", u), ("client-id", c)),
                             (("user", u), ("client-id", None)), (("client-id", c),),
                             (("user", "<default>"), ("client-id", c)), (("ip", ip),)]
    filters: list[tuple[list[tuple[str, int, str | None]], bool]] = [
        ([], False), ([], True),
        ([("user", EXACT, u)], True), ([("user", EXACT, u)], False),
        ([("user", SPECIFIED, None)], False), ([("user", SPECIFIED, None)], True),
        ([("client-id", SPECIFIED, None), ("user", EXACT, u)], True),
        ([("user", EXACT, u), ("client-id", DEFAULT, None)], True),
        ([("user", SPECIFIED, None), ("client-id", SPECIFIED, None)], True),
        ([("client-id", EXACT, c)], False), ([("client-id", EXACT, c)], True),
        ([("client-id", DEFAULT, None)], False), ([("user", DEFAULT, None)], False),
        ([("user", EXACT, "<default>"), ("client-id", EXACT, c)], True),
        ([("ip", SPECIFIED, None)], False), ([("ip", EXACT, ip)], True),
        ([("user", EXACT, "")], False), ([("user", EXACT, u.upper())], False),
        ([("user", EXACT, n("nobody"))], True),
    ]
    return [Alter([(e, [put("producer_byte_rate" if e[0][0] != "ip" else "connection_creation_rate", 3.0)])
                   for e in entities]),
            *(Describe(f, strict=s) for f, s in filters)]


@scenario
def empty_strict_filter_returns_nothing_at_all(n: Names) -> list[Step]:
    """ref §3.2: Components=[] with Strict=true matches nothing, on any broker."""
    return [Alter([((("user", n("u")),), [put("producer_byte_rate", 1.0)])]), Describe([], strict=True)]


@scenario
def protocol_v0(n: Names) -> list[Step]:
    """ref §1.1: v0 carries the same fields; null names and null match travel as int16 -1."""
    uc = (("user", n("u")), ("client-id", None))
    return [Alter([(uc, [put("producer_byte_rate", 10.0)]),
                   ((("user", ""),), [put("producer_byte_rate", 1.0)])], version=0),
            Describe([("user", EXACT, n("u")), ("client-id", DEFAULT, None)], strict=True, version=0),
            Describe([("user", EXACT, None)], version=0),
            Describe([("foo", SPECIFIED, None)], version=0),
            Alter([(uc, [rm("producer_byte_rate")]), (uc, [])], version=0),
            Describe([("user", EXACT, n("u"))], version=0)]


# Scenarios for what ZooKeeper-mode brokers do differently (docs/zk-rules.md); they run in both modes.

@scenario
def ipv6_ip_entities(n: Names) -> list[Step]:
    """zk-rules §A2: ip names are checked as ZooKeeper node names, so IPv6 literals are refused
    (``%3A%3A1 is not a valid IP or resolvable host.``); KRaft stores them."""
    mine = (("ip", n.ipv6()),)
    op = [put("connection_creation_rate", 3.0)]
    others = ("::1", "2001:db8::1", "::ffff:10.0.0.8", "0:0:0:0:0:0:0:1")
    return [Alter([((("ip", name),), op) for name in others], validate_only=True),
            Alter([(mine, op)]), Describe([("ip", SPECIFIED, None)]), Describe(_exact(mine), strict=True)]


@scenario
def names_as_zookeeper_nodes(n: Names) -> list[Step]:
    """zk-rules §A1, §D3: names are URL-encoded into znode names and back; ``.``/``..`` and an
    empty element make invalid paths (UNKNOWN_SERVER_ERROR on ZooKeeper, ordinary names on KRaft)."""
    odd = (("user", n("a b*c+d/é%~<default>")), ("client-id", n("x.y-z_1")))
    op = [put("producer_byte_rate", 2.0)]
    return [Alter([(odd, op), ((("user", n("<default>")),), op)]),
            Describe(_exact(odd), strict=True), Describe([("user", SPECIFIED, None)]),
            Alter([((("user", name),), op) for name in (".", "..", "...")] +
                  [((("user", n("u")), ("client-id", ".")), op), ((("client-id", ".."),), op),
                   ((("ip", "."),), [put("connection_creation_rate", 1.0)])], validate_only=True),
            *(Describe(f, strict=strict) for strict in (False, True) for f in (
                [("user", EXACT, "")], [("user", EXACT, ".")], [("client-id", EXACT, "..")],
                [("user", EXACT, n("u")), ("client-id", EXACT, "")],
                [("user", EXACT, ""), ("client-id", DEFAULT, None)], [("ip", EXACT, "")],
                [("ip", EXACT, ".")], [("user", DEFAULT, None), ("client-id", EXACT, "...")]))]


@scenario
def scram_keys(n: Names) -> list[Step]:
    """zk-rules §A3: SCRAM mechanisms are user keys on ZooKeeper that alterClientQuotas cannot set
    (UNKNOWN_SERVER_ERROR); client-id entities and KRaft do not know them; removal is never checked."""
    scram = [put("SCRAM-SHA-256", 4096.0)]
    return [Alter([((("user", n("u")),), scram), ((("user", n("u")), ("client-id", n("c"))), scram),
                   ((("client-id", n("c")),), [put("SCRAM-SHA-512", 1.0)]),
                   ((("user", n("v")),), [rm("SCRAM-SHA-256")])]),
            Alter([((("user", None),), scram)], validate_only=True)]


@scenario
def duplicates_answer_and_write(n: Names) -> list[Step]:
    """zk-rules §A5: duplicate entities; which answer is given, and which entry was written."""
    v, w = (("user", n("v")),), (("user", n("w")),)
    return [Alter([(v, [put("producer_byte_rate", 7.0)]), (v, [put("producer_byte_rate", 0.5)]),
                   (w, [put("producer_byte_rate", 0.5)]), (w, [put("consumer_byte_rate", 8.0)])]),
            Describe(_exact(v), strict=True), Describe(_exact(w), strict=True),
            Alter([(v, [put("request_percentage", 1.0)]), (v, [put("request_percentage", 2.0)])],
                  validate_only=True),
            Describe(_exact(v), strict=True)]


@scenario
def first_bad_op(n: Names) -> list[Step]:
    """zk-rules §A4: ops run in request order on ZooKeeper (HashMap order on KRaft)."""
    u = (("user", n("u")),)
    return [Alter([(u, [put("consumer_byte_rate", 0.5), put("foo", 1.0)])]),
            Alter([(u, [put("foo", 1.0), put("consumer_byte_rate", 0.5)])]),
            Alter([(u, [put("request_percentage", 1.0), put("producer_byte_rate", -3.0), put("bar", 2.0)])]),
            Describe(_exact(u), strict=True)]


@scenario
def match_strings_on_default_and_specified(n: Names) -> list[Step]:
    """zk-rules §D1: ZooKeeper drops a match string on DEFAULT/SPECIFIED; KRaft refuses it."""
    e = (("user", n("u")), ("client-id", None))
    return [Alter([(e, [put("producer_byte_rate", 4.0)])]),
            Describe([("user", SPECIFIED, n("junk")), ("client-id", DEFAULT, n("junk"))], strict=True),
            Describe([("user", EXACT, n("u")), ("client-id", DEFAULT, "")], strict=True)]


# -- the tests -----------------------------------------------------------------------------------

pytestmark = pytest.mark.real_kafka


@pytest.fixture(scope="module")
def real_target(real_kafka: Any) -> Iterator[WireTarget]:
    target = WireTarget("real_kafka", real_kafka.bootstrap)
    yield target
    target.close()


@pytest.fixture(scope="module")
def flavor(real_kafka: Any) -> Flavor:
    """The sandbox flavour that answers as the real broker's metadata mode does."""
    return Flavor.ZK if real_kafka.mode == "zookeeper" else Flavor.KRAFT


@pytest.fixture(scope="module")
def sandbox_target(flavor: Flavor) -> Iterator[WireTarget]:
    from kqplan.sandbox import Sandbox, SandboxConfig

    with Sandbox.start(SandboxConfig(port=0, flavor=flavor)) as sb:
        target = WireTarget(f"sandbox-{flavor}", sb.bootstrap)
        yield target
        target.close()


def test_there_are_enough_scenarios():
    assert len(SCENARIOS) >= 25


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_sandbox_agrees_with_real_kafka(name, flavor, sandbox_target, real_target):
    compare(sandbox_target, real_target, SCENARIOS[name], name, flavor)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_engine_agrees_with_real_kafka(name, flavor, real_target):
    compare(EngineTarget(flavor), real_target, SCENARIOS[name], name, flavor)


def test_zk_flavour_advertises_the_real_brokers_api_versions(flavor, sandbox_target, real_target, real_kafka):
    """A ZooKeeper-mode broker's ApiVersions set (LeaderAndIsr and all) is what kqplan reads the
    mode and the release from; the zk flavour advertises the real broker's keys and ranges. The
    kraft flavour's set (a 4.3 broker's) is compared with a real 4.3.1 one in kraft_flavor_test."""
    if flavor is not Flavor.ZK:
        pytest.skip("the kraft flavour's ApiVersions set is checked against a real 4.3.1 broker in "
                    "tests/sandbox/kraft_flavor_test.py")
    if not str(real_kafka.version).startswith("3.9."):
        pytest.skip(f"the zk flavour is a 3.9 broker; {real_kafka.version} advertises other ranges")

    def advertised(target: WireTarget) -> dict[int, tuple[int, int]]:
        # v3+ needs a valid client software name: a real broker answers "" with INVALID_REQUEST
        # (ApiVersionsRequest.isValid), which the sandbox does not check (docs/zk-rules.md §G)
        request = ApiVersionsRequest(client_software_name="kqplan-test", client_software_version="1.0")
        response = target.transport.send(request)
        assert response.error_code == 0
        return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}

    assert advertised(sandbox_target) == advertised(real_target)
    kinds = {t.name: t.transport.broker_kind() for t in (sandbox_target, real_target)}
    assert kinds[sandbox_target.name] == kinds[real_target.name] == (">=3.9", "zookeeper")


# -- random requests (hypothesis) -----------------------------------------------------------------
# Abstract tokens, turned into names unique to each example when it runs.

_TYPES = st.sampled_from(["user", "user", "client-id", "client-id", "ip", "foo", ""])
_NAMES = st.sampled_from([None, "", "n0", "n1", "<default>", "ip0", "ip1", "bad"])
_KEYS = st.sampled_from(["producer_byte_rate", "consumer_byte_rate", "request_percentage",
                         "controller_mutation_rate", "connection_creation_rate", "foo"])
_VALUES = st.sampled_from([1.0, 2.0, 1024.0, 0.0, -1.0, 0.5, float("nan"), float("inf"), 1235.0000001,
                           1234.9999999, 3e9, 2.5])
_OPS = st.lists(st.tuples(_KEYS, _VALUES, st.booleans()), max_size=4)
_ENTRIES = st.lists(st.tuples(st.lists(st.tuples(_TYPES, _NAMES), max_size=3), _OPS), max_size=5)
_REQUESTS = st.lists(st.tuples(_ENTRIES, st.booleans()), min_size=1, max_size=3)


def _realise(n: Names, requests: list[tuple[list[Any], bool]]) -> list[Step]:
    """Concrete steps from tokens. A request touching an entity that is not the example's own
    (e.g. {user=null}, shared by every test) is sent validateOnly."""
    ips = {"ip0": n.ip(), "ip1": n.ip()}

    def name(token: str | None) -> str | None:
        if token is None or token in ("", "<default>"):
            return token
        if token in ips:
            return ips[token]
        return n(token) + (".invalid" if token == "bad" else "")

    steps: list[Step] = []
    for entries, validate_only in requests:
        concrete = [(tuple((t, name(v)) for t, v in pairs), ops) for pairs, ops in entries]
        shared = any(not n.owns(tuple(dict(pairs).items())) for pairs, _ in concrete)
        steps.append(Alter(concrete, validate_only=validate_only or shared))
    return [*steps, Describe()]


# Every example is a round trip to a real broker: a failure is reported once shrunk, without
# hypothesis's "explain" phase, which replays it hundreds of times (a run spent 30 minutes there,
# where pytest-timeout's failure only fed more shrinking).
_OVER_THE_WIRE = (Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), phases=_OVER_THE_WIRE)
@given(requests=_REQUESTS)
def test_random_alters_agree_with_real_kafka(flavor, real_target, requests):
    """Random requests (valid, invalid, duplicate, repeated types) give the same answers and the
    same resulting state on the engine and on the real broker."""
    compare(EngineTarget(flavor), real_target, lambda n: _realise(n, requests), "random", flavor)


_MATCH = st.sampled_from([None, "", "n0", "n1", "<default>", "ip0"])
_COMPONENTS = st.lists(st.tuples(_TYPES, st.sampled_from([0, 0, 1, 2, 2, 3]), _MATCH), max_size=3)


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck), phases=_OVER_THE_WIRE)
@given(components=_COMPONENTS, strict=st.booleans())
def test_random_filters_agree_with_real_kafka(flavor, real_target, components, strict):
    """Random describe filters over a fixed set of entities: same errors, same matches."""
    def steps(n: Names) -> list[Step]:
        ip = n.ip()
        seed: list[Pairs] = [(("user", n("n0")),), (("user", n("n0")), ("client-id", n("n1"))),
                             (("user", n("n1")), ("client-id", None)), (("client-id", n("n1")),),
                             (("user", "<default>"), ("client-id", n("n0"))), (("ip", ip),)]
        tokens = {"n0": n("n0"), "n1": n("n1"), "ip0": ip}

        def match(token: str | None) -> str | None:
            return token if token is None else tokens.get(token, token)

        return [Alter([(e, [put("connection_creation_rate" if e[0][0] == "ip" else "producer_byte_rate",
                                3.0)]) for e in seed]),
                Describe([(t, m, match(v)) for t, m, v in components], strict=strict)]

    compare(EngineTarget(flavor), real_target, steps, "filters", flavor)
