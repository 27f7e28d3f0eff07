"""kqplan's hand-written AlterClientQuotas (API 49) request encoder and response decoder
(kqplan/cluster/alter_wire.py) against kafka-python's generated classes, the reference: byte
for byte on random requests, and answer for answer on random responses, v0 and v1; broken
answers are MalformedResponse; and a real round trip over TCP through the in-process sandbox,
whose side of the wire (kqplan/sandbox/apis.py) is checked in tests/sandbox/alter_wire_test.py."""

from __future__ import annotations

import math
import struct
import time
from collections.abc import Iterator, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import AlterClientQuotasRequest as Request
from kafka.protocol.admin import AlterClientQuotasResponse as Response

from kqplan.cluster.alter_wire import decode_alter_response, encode_alter_request
from kqplan.cluster.connection import config_from_properties
from kqplan.cluster.decode import MalformedResponse
from kqplan.cluster.kafka import KafkaCluster
from kqplan.core.cluster import Alteration, EntityResult, Op
from kqplan.core.entity import Entity
from kqplan.sandbox import Sandbox, SandboxConfig, apis

ALTER_QUOTAS = 49
ODD_FLOATS = [math.nan, -math.nan, struct.unpack(">d", b"\x7f\xf8\x00\x00\x00\x00\x12\x34")[0],
              math.inf, -math.inf, 0.0, -0.0, 5e-324, 1.7976931348623157e308]

# strings > 127 bytes make v1's compact-string lengths two-byte varints (built by repeating a
# short text: hypothesis draws long texts slowly, and the tests draw thousands)
LONG_TEXT = st.text(min_size=1, max_size=4).map(lambda s: (s * 130)[:130 + 40 * len(s)])
names = st.one_of(st.none(), st.text(max_size=3), LONG_TEXT,
                  st.sampled_from(["alice", "", "<default>", "ünï côdé", "é" * 70, "a" * 300]))
types = st.sampled_from(["user", "client-id", "ip"])
pairs = st.lists(st.tuples(types, names), min_size=1, max_size=2, unique_by=lambda p: p[0])
keys = st.sampled_from(["producer_byte_rate", "consumer_byte_rate", "request_percentage",
                        "connection_creation_rate", "", "ü", "k" * 150])
values = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(ODD_FLOATS))
alterations = st.builds(Alteration, pairs.map(Entity.of),
                        st.lists(st.builds(Op, keys, values), max_size=4).map(tuple))


def generated_request(version: int, alters: Sequence[Alteration], *, validate_only: bool) -> bytes:
    """The reference: kafka-python's generated encoder, given what kqplan used to give it."""
    E = Request.EntryData
    return bytes(Request(version=version, validate_only=validate_only, entries=[
        E(entity=[E.EntityData(entity_type=t, entity_name=n) for t, n in a.entity],
          ops=[E.OpData(key=op.key, value=0.0 if op.value is None else op.value, remove=op.remove)
               for op in a.ops])
        for a in alters]).encode())


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([0, 1]), st.lists(alterations, max_size=40), st.booleans())
def test_request_is_byte_identical_to_kafka_python(version, alters, validate_only):
    assert (encode_alter_request(version, alters, validate_only=validate_only)
            == generated_request(version, alters, validate_only=validate_only))


@pytest.mark.parametrize("version", [0, 1])
def test_request_of_20000_entries_uses_multi_byte_counts(version):
    alters = [Alteration(Entity.user_client(f"u{i}", None if i % 3 else "c" * (i % 200)),
                         (Op("producer_byte_rate", float(i)), Op("request_percentage", None)))
              for i in range(20_000)]
    validate_only = version == 0
    assert (encode_alter_request(version, alters, validate_only=validate_only)
            == generated_request(version, alters, validate_only=validate_only))


def test_request_of_another_version_is_refused():
    with pytest.raises(ValueError, match="v2"):
        encode_alter_request(2, [], validate_only=False)


# -- responses -------------------------------------------------------------------------------

messages = st.one_of(st.none(), st.just(""), st.text(max_size=5), LONG_TEXT)
# any order of at most one of each type: Kafka sends client-id before user (HashMap order)
entity_pairs = st.lists(st.tuples(types, names), min_size=1, max_size=3, unique_by=lambda p: p[0])
answers = st.lists(st.tuples(st.sampled_from([0, 31, 35, 42, 44, -1]), messages, entity_pairs), max_size=40)


def encode_response(version: int, rows, throttle_time_ms: int = 0) -> bytes:
    E = Response.EntryData
    return bytes(Response(version=version, throttle_time_ms=throttle_time_ms, entries=[
        E(error_code=code, error_message=message,
          entity=[E.EntityData(entity_type=t, entity_name=n) for t, n in entity])
        for code, message, entity in rows]).encode())


def generated_results(body: bytes, version: int) -> list[EntityResult]:
    """The oracle: kafka-python's generated decoder, then what kqplan made of its answer."""
    response = Response.decode(body, version=version)
    return [EntityResult(Entity.of((e.entity_type, e.entity_name) for e in entry.entity),
                         entry.error_code, entry.error_message or None)
            for entry in response.entries]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([0, 1]), answers, st.integers(0, 2**31 - 1))
def test_response_agrees_with_kafka_pythons_generated_decoder(version, rows, throttle):
    body = encode_response(version, rows, throttle)
    results = decode_alter_response(body, version)
    assert results == generated_results(body, version)
    # and field by field, not only through EntityResult's equality: "" is no message
    assert [(r.error_code, r.error_message) for r in results] == [
        (code, message or None) for code, message, _ in rows]
    assert all(type(r.entity) is Entity for r in results)


@pytest.mark.parametrize("version", [0, 1])
def test_kafka_order_and_empty_message_are_normalized(version):
    body = encode_response(version, [(0, "", [("client-id", "etl"), ("user", None)]),
                                     (42, "Empty client-id not supported", [("client-id", "")])])
    assert decode_alter_response(body, version) == [
        EntityResult(Entity.user_client(None, "etl"), 0, None),
        EntityResult(Entity.client(""), 42, "Empty client-id not supported")]
    assert decode_alter_response(body, version)[0].entity.parts == (("user", None), ("client-id", "etl"))


@settings(max_examples=50, deadline=None)
@given(st.sampled_from([0, 1]), st.lists(st.tuples(st.sampled_from([0, 42]), messages, entity_pairs),
                                         min_size=1, max_size=3))
def test_every_truncation_of_a_response_is_malformed(version, rows):
    body = encode_response(version, rows)
    assert decode_alter_response(body, version) == generated_results(body, version)
    for cut in range(len(body)):
        with pytest.raises(MalformedResponse):
            decode_alter_response(body[:cut], version)


@pytest.mark.parametrize("version", [0, 1])
def test_truncations_of_an_empty_response_are_malformed(version):
    body = encode_response(version, [])
    assert decode_alter_response(body, version) == []
    for cut in range(len(body)):
        with pytest.raises(MalformedResponse):
            decode_alter_response(body[:cut], version)


@pytest.mark.parametrize("version", [0, 1])
def test_a_huge_count_or_length_is_malformed_at_once(version):
    huge_count = b"\x7f\xff\xff\xff" if version == 0 else b"\xff\xff\xff\xff\x07"
    huge_string = b"\x7f\xff" if version == 0 else b"\xff\xff\xff\x07"
    one = b"\0\0\0\1" if version == 0 else b"\2"
    no_message = b"\xff\xff" if version == 0 else b"\0"
    started = time.monotonic()
    for body in (b"\0" * 4 + huge_count,  # entries
                 b"\0" * 4 + one + b"\0\0" + huge_string + b"\0" * 32,  # an error message
                 b"\0" * 4 + one + b"\0\0" + no_message + huge_count + b"\0" * 32):  # entity parts
        with pytest.raises(MalformedResponse):
            decode_alter_response(body, version)
    assert time.monotonic() - started < 1


def test_unknown_tagged_fields_are_skipped():
    body = bytearray(encode_response(1, [(0, None, [("user", "alice")])], throttle_time_ms=3))
    assert body[-3:] == b"\0\0\0"  # entity part's, entry's and response's empty tag sections
    body[-3:-2] = bytes([1, 9, 2]) + b"xy"  # one tag, id 9, 2 bytes
    assert decode_alter_response(bytes(body), 1) == [EntityResult(Entity.user("alice"))]


def test_a_null_entity_type_is_malformed():
    # ErrorCode 0, ErrorMessage null, one entity part whose type is null
    body = b"\0" * 4 + b"\2" + b"\0\0" + b"\0" + b"\2" + b"\0" + b"\0" + b"\0\0\0"
    with pytest.raises(MalformedResponse):
        decode_alter_response(body, 1)


@pytest.mark.parametrize("version", [-1, 2, 3])
def test_another_version_is_malformed(version):
    for layout in (0, 1):  # bodies that would decode, were the version read as either layout
        body = encode_response(layout, [(0, None, [("user", "alice")])])
        with pytest.raises(MalformedResponse, match=f"v{version} "):
            decode_alter_response(body, version)


# -- over the wire: KafkaCluster against the in-process sandbox -------------------------------

UNICODE = "ünï côdé " + "é" * 70  # > 127 bytes
SET = [
    Alteration(Entity.user(None), (Op("producer_byte_rate", 1024.0), Op("consumer_byte_rate", 2048.0))),
    Alteration(Entity.user(UNICODE), (Op("request_percentage", 12.5),)),
    Alteration(Entity.user_client("alice", None), (Op("producer_byte_rate", 4096.0),)),
    Alteration(Entity.ip(None), (Op("connection_creation_rate", 7.0),)),
]
WANT = {a.entity: {op.key: op.value for op in a.ops} for a in SET}


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    with Sandbox.start(SandboxConfig(port=0, cluster_id="alter-wire")) as sb:
        yield sb


@pytest.mark.parametrize("version", [0, 1])
def test_round_trip_through_the_sandbox(sandbox, version, monkeypatch):
    # the sandbox advertises AlterClientQuotas up to ``version`` only: the client must pick it
    monkeypatch.setitem(apis.ADVERTISED, ALTER_QUOTAS, (0, version))
    config = config_from_properties("", bootstrap=sandbox.bootstrap, source="(test)", env={})
    with KafkaCluster(config) as cluster:
        ok = [EntityResult(a.entity) for a in SET]
        assert cluster.alter(SET, validate_only=True) == ok
        assert cluster.describe() == {}

        assert cluster.alter(SET, validate_only=False) == ok
        assert cluster.describe() == WANT

        bad = [Alteration(Entity.client(""), (Op("producer_byte_rate", 1.0),)),
               Alteration(Entity.user("bob"), (Op("bogus_key", 1.0),))]
        assert cluster.alter(bad, validate_only=False) == [
            EntityResult(Entity.client(""), 42, "Empty client-id not supported"),
            EntityResult(Entity.user("bob"), 42, "Invalid configuration key bogus_key")]

        removals = [Alteration(Entity.user(None), (Op("producer_byte_rate", None),)),
                    Alteration(Entity.user(UNICODE), (Op("request_percentage", None),))]
        assert cluster.alter(removals, validate_only=True) == [EntityResult(a.entity) for a in removals]
        assert cluster.describe() == WANT
        assert cluster.alter(removals, validate_only=False) == [EntityResult(a.entity) for a in removals]
        assert cluster.describe() == {
            Entity.user(None): {"consumer_byte_rate": 2048.0},
            Entity.user_client("alice", None): {"producer_byte_rate": 4096.0},
            Entity.ip(None): {"connection_creation_rate": 7.0},
        }
    served = sandbox.requests_of(ALTER_QUOTAS)
    assert [(r.api_version, r.validate_only, r.entries) for r in served] == [
        (version, True, 4), (version, False, 4), (version, False, 2), (version, True, 2), (version, False, 2)]
