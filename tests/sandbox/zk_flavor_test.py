"""``kqplan sandbox --flavor zk`` over TCP: a ZooKeeper-mode Kafka 3.9 broker's quota rules
(docs/zk-rules.md), each checked with kafka-python's generated requests through kqplan's own
transport, against one sandbox process started as a user would start it.

The differential module checks the same flavour against a real 3.9.1 ZooKeeper-mode broker;
these tests pin each rule without a JVM.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest
from kafka.protocol.metadata import ApiVersionsRequest

from kqplan.cluster.connection import config_from_properties
from kqplan.cluster.kafka import KafkaCluster
from kqplan.cluster.transport import KafkaTransport
from kqplan.sandbox.zk import ZK_39_API_VERSIONS
from kqplan.snapshot.file import read_snapshot
from tests.helpers import REPO

EXACT, DEFAULT, SPECIFIED = 0, 1, 2
NONE, UNKNOWN_SERVER_ERROR, UNSUPPORTED_VERSION, INVALID_REQUEST = 0, -1, 35, 42

Pairs = tuple[tuple[str, str | None], ...]
Op = tuple[str, float, bool]  # key, value, remove


def put(key: str, value: float) -> Op:
    return (key, value, False)


def rm(key: str) -> Op:
    return (key, 0.0, True)


class ZkSandbox:
    """One ``kqplan sandbox --flavor zk`` process and a kqplan transport to it."""

    def __init__(self, proc: subprocess.Popen[str], bootstrap: str, state: Path) -> None:
        self.proc, self.bootstrap, self.state = proc, bootstrap, state
        config = config_from_properties("", bootstrap=bootstrap, source="zk-flavor-test", env={})
        self.transport = KafkaTransport(config)

    def alter(self, entries: Sequence[tuple[Pairs, Sequence[Op]]],
              validate_only: bool = False) -> list[tuple[int, str | None, Pairs]]:
        cls = AlterClientQuotasRequest
        entity, op = cls.EntryData.EntityData, cls.EntryData.OpData
        request = cls(entries=[cls.EntryData(entity=[entity(entity_type=t, entity_name=n) for t, n in pairs],
                                             ops=[op(key=k, value=v, remove=r) for k, v, r in ops])
                               for pairs, ops in entries], validate_only=validate_only)
        response = self.transport.send(request)
        return [(e.error_code, e.error_message, tuple((x.entity_type, x.entity_name) for x in e.entity))
                for e in response.entries]

    def describe_raw(self, components: Sequence[tuple[str, int, str | None]] = (),
                     strict: bool = False) -> Any:
        cls = DescribeClientQuotasRequest
        return self.transport.send(cls(components=[cls.ComponentData(entity_type=t, match_type=m, match=v)
                                                   for t, m, v in components], strict=strict))

    def describe(self, components: Sequence[tuple[str, int, str | None]] = (),
                 strict: bool = False) -> tuple[int, str | None, dict[Pairs, dict[str, float]] | None]:
        response = self.describe_raw(components, strict)
        entries = None if response.entries is None else {
            tuple((x.entity_type, x.entity_name) for x in e.entity): {v.key: v.value for v in e.values}
            for e in response.entries}
        return response.error_code, response.error_message, entries

    def values(self, pairs: Pairs) -> dict[str, float] | None:
        """The stored config of one entity (None: it holds nothing)."""
        code, _, entries = self.describe([(t, EXACT, n) if n is not None else (t, DEFAULT, None)
                                          for t, n in pairs], strict=True)
        assert code == NONE
        assert entries is not None
        return next(iter(entries.values()), None)


@pytest.fixture(scope="module")
def zk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZkSandbox]:
    state = tmp_path_factory.mktemp("zk") / "state.json"
    proc = subprocess.Popen([sys.executable, "-m", "kqplan.sandbox", "--port", "0", "--flavor", "zk",
                             "--state", str(state)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("listening on 127.0.0.1:"), (line, proc.stderr.read() if proc.stderr else "")
        sandbox = ZkSandbox(proc, line.split()[-1], state)
        yield sandbox
        sandbox.transport.close()
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(10)


def u(name: str) -> Pairs:
    return (("user", name),)


# -- what the broker says it is ------------------------------------------------------------------

def test_api_versions_are_a_zookeeper_3_9_brokers(zk):
    response = zk.transport.send(ApiVersionsRequest())
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert advertised == ZK_39_API_VERSIONS
    assert response.error_code == 0
    assert advertised[4] == (0, 7)  # LeaderAndIsr: what marks a ZooKeeper-mode broker
    assert advertised[18] == (0, 4)  # ApiVersions v4 is answered in kind


def test_kqplan_detects_zookeeper_mode_and_3_9(zk):
    with KafkaCluster(config_from_properties("", bootstrap=zk.bootstrap, source="t", env={})) as cluster:
        identity = cluster.identity()
    assert (identity.version, identity.mode) == (">=3.9", "zookeeper")


@pytest.mark.parametrize("version", range(5))
def test_every_api_versions_version_is_answered_in_kind(zk, version):
    response = zk.transport.send(ApiVersionsRequest(min_version=version, max_version=version))
    assert response.error_code == 0
    assert len(response.api_keys) == len(ZK_39_API_VERSIONS)


# -- AlterClientQuotas ----------------------------------------------------------------------------

def test_entity_messages(zk):
    op = [put("producer_byte_rate", 1.0)]
    assert zk.alter([((), op)]) == [(INVALID_REQUEST, "Invalid empty client quota entity", ())]
    assert zk.alter([((("foo", "x"),), op)]) == [
        (INVALID_REQUEST, "Unhandled client quota entity type: foo", (("foo", "x"),))]
    assert zk.alter([(u(""), op)]) == [(INVALID_REQUEST, "Empty user not supported", (("user", ""),))]
    assert zk.alter([((("ip", "10.1.1.1"), ("user", "zk-a")), [])]) == [
        (INVALID_REQUEST, "Invalid quota entity combination, IP entity should not be used with user/client "
                          "ID entity.", (("user", "zk-a"), ("ip", "10.1.1.1")))]


def test_keys_are_checked_but_not_values_above_zero(zk):
    entity = u("zk-zero")
    assert zk.alter([(entity, [put("producer_byte_rate", 0.0), put("request_percentage", -5.0),
                               put("controller_mutation_rate", 0.0)])]) == [(NONE, None, entity)]
    assert zk.values(entity) == {"producer_byte_rate": 0.0, "request_percentage": -5.0,
                                 "controller_mutation_rate": 0.0}
    assert zk.alter([(entity, [put("foo", 1.0)])]) == [
        (INVALID_REQUEST, "Invalid configuration key foo", entity)]
    assert zk.alter([(u("zk-x"), [put("connection_creation_rate", 1.0)])])[0][1] == (
        "Invalid configuration key connection_creation_rate")
    zk.alter([(entity, [rm("producer_byte_rate"), rm("request_percentage"), rm("controller_mutation_rate")])])
    assert zk.values(entity) is None


@pytest.mark.parametrize(("key", "value", "stored"), [
    ("producer_byte_rate", 1235.0000001, 1235.0),
    ("producer_byte_rate", 1234.9999999, 1235.0),  # rounds up too (KRaft refuses it)
    ("consumer_byte_rate", 1e-7, 0.0),
    ("consumer_byte_rate", -1e-7, 0.0),
    ("producer_byte_rate", 9.223372036854775807e18, 9.223372036854775807e18),
    ("request_percentage", 12.5, 12.5),  # DOUBLE: stored as sent
    ("request_percentage", 5e-324, 5e-324),
])
def test_long_and_int_values_are_truncated_when_stored(zk, key, value, stored):
    entity = u(f"zk-trunc-{key}-{value!r}")
    assert zk.alter([(entity, [put(key, value)])]) == [(NONE, None, entity)]
    assert zk.values(entity) == {key: stored}
    zk.alter([(entity, [rm(key)])])


def test_int_values_are_truncated_too(zk):
    entity = (("ip", "10.9.9.9"),)
    assert zk.alter([(entity, [put("connection_creation_rate", 10.0000005)])]) == [(NONE, None, entity)]
    assert zk.values(entity) == {"connection_creation_rate": 10.0}
    zk.alter([(entity, [rm("connection_creation_rate")])])


@pytest.mark.parametrize(("key", "value"), [
    ("producer_byte_rate", 0.5), ("producer_byte_rate", 2.245), ("producer_byte_rate", -1.0),
    ("producer_byte_rate", -2.0), ("producer_byte_rate", float("inf")), ("producer_byte_rate", float("-inf")),
    ("producer_byte_rate", 9.223372036854778e18),
    ("connection_creation_rate", 2147483648.0), ("connection_creation_rate", 2147483647.5),
    ("connection_creation_rate", -1.0),
])
def test_values_no_whole_number_is_near_are_refused(zk, key, value):
    entity = u("zk-refused") if key != "connection_creation_rate" else (("ip", "10.9.9.8"),)
    value_type = "INT" if key == "connection_creation_rate" else "LONG"
    assert zk.alter([(entity, [put(key, value)])]) == [
        (INVALID_REQUEST, f"Configuration {key} must be a {value_type} value", entity)]
    assert zk.values(entity) is None


def test_nan_is_stored_as_zero_on_long_and_int_keys_and_as_nan_on_double_keys(zk):
    entity, ip = u("zk-nan"), (("ip", "10.9.9.7"),)
    nan = float("nan")
    answer = zk.alter([(entity, [put("producer_byte_rate", nan), put("request_percentage", nan)]),
                       (ip, [put("connection_creation_rate", nan)])])
    assert answer == [(NONE, None, entity), (NONE, None, ip)]
    values = zk.values(entity)
    assert values is not None
    assert values["producer_byte_rate"] == 0.0
    assert str(values["request_percentage"]) == "nan"
    assert zk.values(ip) == {"connection_creation_rate": 0.0}
    zk.alter([(entity, [rm("producer_byte_rate"), rm("request_percentage")]),
              (ip, [rm("connection_creation_rate")])])


def test_negative_zero_is_stored_as_sent_on_double_keys_and_as_zero_on_long_keys(zk):
    entity = u("zk-negative-zero")
    zk.alter([(entity, [put("producer_byte_rate", -0.0), put("request_percentage", -0.0),
                        put("controller_mutation_rate", 0.0)])])
    values = zk.values(entity)  # one answer holding both zeros: their bytes must not be shared
    assert values is not None
    assert {k: v.hex() for k, v in values.items()} == {
        "producer_byte_rate": "0x0.0p+0", "request_percentage": "-0x0.0p+0",
        "controller_mutation_rate": "0x0.0p+0"}
    zk.alter([(entity, [rm("producer_byte_rate"), rm("request_percentage"), rm("controller_mutation_rate")])])


@pytest.mark.parametrize(("name", "shown"), [
    ("::1", "%3A%3A1"), ("2001:db8::1", "2001%3Adb8%3A%3A1"), ("::ffff:10.0.0.8", "%3A%3Affff%3A10.0.0.8"),
    ("[::1]", "%5B%3A%3A1%5D"), ("has space", "has%20space"), ("h.invalid", "h.invalid"),
])
def test_ip_names_are_checked_as_zookeeper_node_names(zk, name, shown):
    entity = (("ip", name),)
    assert zk.alter([(entity, [put("connection_creation_rate", 1.0)])], validate_only=True) == [
        (INVALID_REQUEST, f"{shown} is not a valid IP or resolvable host.", entity)]


def test_ipv4_and_the_default_ip_are_accepted(zk):
    answer = zk.alter([((("ip", "10.0.0.7"),), [put("connection_creation_rate", 5.0)]),
                       ((("ip", None),), [put("connection_creation_rate", 5.0)])], validate_only=True)
    assert [code for code, _, _ in answer] == [NONE, NONE]


def test_no_record_cap(zk):
    entries = [(u(f"zk-cap-{i}"), [put("producer_byte_rate", 1.0)]) for i in range(10_001)]
    for validate_only in (True, False):
        answer = zk.alter(entries, validate_only=validate_only)
        assert len(answer) == 10_001
        assert {code for code, _, _ in answer} == {NONE}
    assert zk.values(u("zk-cap-10000")) == {"producer_byte_rate": 1.0}
    answer = zk.alter([(pairs, [rm("producer_byte_rate")]) for pairs, _ in entries])
    assert {code for code, _, _ in answer} == {NONE}


def test_duplicate_entities_are_applied_in_order_and_the_last_answer_wins(zk):
    uc, cu = (("user", "zk-d"), ("client-id", "c")), (("client-id", "c"), ("user", "zk-d"))
    answer = zk.alter([(uc, [put("producer_byte_rate", 1.0)]), (cu, [put("consumer_byte_rate", 2.0)]),
                       (uc, [put("request_percentage", 0.5)])])
    assert answer == [(NONE, None, cu)]  # one entry, entity echoed in HashMap order
    assert zk.values(uc) == {"producer_byte_rate": 1.0, "consumer_byte_rate": 2.0, "request_percentage": 0.5}
    # a failing last entry answers for the entity, yet the first one was written
    v = u("zk-dv")
    assert zk.alter([(v, [put("producer_byte_rate", 7.0)]), (v, [put("producer_byte_rate", 0.5)])]) == [
        (INVALID_REQUEST, "Configuration producer_byte_rate must be a LONG value", v)]
    assert zk.values(v) == {"producer_byte_rate": 7.0}
    zk.alter([(uc, [rm("producer_byte_rate"), rm("consumer_byte_rate"), rm("request_percentage")]),
              (v, [rm("producer_byte_rate")])])


def test_duplicate_keys_last_wins_and_ops_run_in_request_order(zk):
    entity = u("zk-keys")
    assert zk.alter([(entity, [put("producer_byte_rate", 1.0), put("producer_byte_rate", 2.0)])]) == [
        (NONE, None, entity)]
    assert zk.values(entity) == {"producer_byte_rate": 2.0}
    # the first bad op in request order is reported; nothing of the entity is written
    ops = [put("consumer_byte_rate", 0.5), put("foo", 1.0), rm("producer_byte_rate")]
    assert zk.alter([(entity, ops)]) == [
        (INVALID_REQUEST, "Configuration consumer_byte_rate must be a LONG value", entity)]
    assert zk.alter([(entity, [put("foo", 1.0), put("consumer_byte_rate", 0.5)])]) == [
        (INVALID_REQUEST, "Invalid configuration key foo", entity)]
    assert zk.values(entity) == {"producer_byte_rate": 2.0}
    zk.alter([(entity, [rm("producer_byte_rate")])])


def test_scram_mechanisms_are_user_keys_it_cannot_set(zk):
    assert zk.alter([(u("zk-s"), [put("SCRAM-SHA-256", 4096.0)])]) == [
        (UNKNOWN_SERVER_ERROR, None, u("zk-s"))]
    client = (("client-id", "zk-s"),)
    assert zk.alter([(client, [put("SCRAM-SHA-256", 4096.0)])]) == [
        (INVALID_REQUEST, "Invalid configuration key SCRAM-SHA-256", client)]


def test_names_that_are_no_zookeeper_node_fail_with_unknown_server_error(zk):
    assert zk.alter([(u("."), [put("producer_byte_rate", 1.0)])]) == [(UNKNOWN_SERVER_ERROR, None, u("."))]
    assert zk.describe([("user", EXACT, "")], strict=True) == (UNKNOWN_SERVER_ERROR, None, None)
    assert zk.describe([("user", EXACT, "")]) == (NONE, "", {})  # listed, not read by path


def test_validate_only_writes_nothing(zk):
    entity = u("zk-vo")
    answer = zk.alter([(entity, [put("producer_byte_rate", 3.0)])], validate_only=True)
    assert answer == [(NONE, None, entity)]
    assert zk.values(entity) is None


def test_committed_alters_reach_the_state_file(zk):
    entity = u("zk-file")
    zk.alter([(entity, [put("producer_byte_rate", 1235.0000001)])])
    state, _ = read_snapshot(zk.state)
    assert {e.display: q for e, q in state.items() if e.display == "{user=zk-file}"} == {
        "{user=zk-file}": {"producer_byte_rate": 1235.0}}
    assert json.loads(zk.state.read_text())["format_version"] == 1
    zk.alter([(entity, [rm("producer_byte_rate")])])


# -- DescribeClientQuotas -------------------------------------------------------------------------

@pytest.mark.parametrize(("components", "code", "message"), [
    ([("user", SPECIFIED, None), ("user", EXACT, "a")], INVALID_REQUEST,
     "Duplicate user filter component entity type"),
    ([("client-id", DEFAULT, None), ("client-id", DEFAULT, None)], INVALID_REQUEST,
     "Duplicate client filter component entity type"),
    ([("ip", SPECIFIED, None), ("ip", SPECIFIED, None)], INVALID_REQUEST,
     "Duplicate ip filter component entity type"),
    ([("", EXACT, "x")], INVALID_REQUEST, "Unexpected empty filter component entity type"),
    ([("foo", SPECIFIED, None)], UNSUPPORTED_VERSION, "Custom entity type 'foo' not supported"),
    ([("User", EXACT, "a")], UNSUPPORTED_VERSION, "Custom entity type 'User' not supported"),
    ([("ip", SPECIFIED, None), ("user", EXACT, "a")], INVALID_REQUEST,
     "Invalid entity filter component combination, IP filter component should not be used with user or "
     "clientId filter component."),
    ([("user", EXACT, None)], UNKNOWN_SERVER_ERROR, None),  # ofEntity(type, null): NullPointerException
    ([("foo", SPECIFIED, None), ("user", 3, None)], UNKNOWN_SERVER_ERROR, None),  # before the type checks
])
def test_describe_filter_errors(zk, components, code, message):
    assert zk.describe(components) == (code, message, None)


def test_describe_ignores_a_match_string_on_default_and_specified(zk):
    entity = (("user", "zk-m"), ("client-id", None))
    zk.alter([(entity, [put("producer_byte_rate", 4.0)])])
    found = zk.describe([("user", SPECIFIED, "ignored"), ("client-id", DEFAULT, "ignored")], strict=True)
    assert found == (NONE, "", {entity: {"producer_byte_rate": 4.0}})  # user first, then client-id
    zk.alter([(entity, [rm("producer_byte_rate")])])


def test_describe_matches_as_kraft_does(zk):
    entities: list[Pairs] = [u("zk-q"), (("user", "zk-q"), ("client-id", "c")), (("client-id", "c"),),
                             (("user", None),), (("ip", "10.8.8.8"),)]
    zk.alter([(e, [put("connection_creation_rate" if e[0][0] == "ip" else "producer_byte_rate", 1.0)])
              for e in entities])
    try:
        _, _, everything = zk.describe()
        assert everything is not None
        assert set(entities) <= set(everything)
        _, _, users = zk.describe([("user", SPECIFIED, None)], strict=True)
        assert users is not None
        assert {u("zk-q"), (("user", None),)} <= set(users)
        assert all(len(pairs) == 1 for pairs in users)
        assert zk.describe([], strict=True) == (NONE, "", {})
        _, _, of_q = zk.describe([("user", EXACT, "zk-q")])
        assert of_q is not None
        assert set(of_q) == {u("zk-q"), (("user", "zk-q"), ("client-id", "c"))}
    finally:
        zk.alter([(e, [rm("connection_creation_rate"), rm("producer_byte_rate")]) for e in entities])
