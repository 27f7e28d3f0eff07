"""The sandbox's hand-written AlterClientQuotas (API 49) wire code (kqplan/sandbox/apis.py)
against kafka-python's generated classes, the reference: the response encoder byte for byte,
the request decoder (header included) answer for answer, v0 and v1; and garbage or truncated
requests fail fast with the errors on which the sandbox hangs up. The client's side of the same
wire is checked in tests/cluster/alter_wire_test.py."""

from __future__ import annotations

import math
import struct
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import AlterClientQuotasRequest as Request
from kafka.protocol.admin import AlterClientQuotasResponse as Response

from kqplan.sandbox.apis import AlterRequest, Malformed, alter_request_of, alter_response, read_header
from kqplan.sandbox.engine import AlterEntry, AlterResult, WireOp

ERRORS = (Malformed, struct.error, IndexError, UnicodeDecodeError)
"""What the sandbox takes for a request no decoder could read (it closes the connection)."""

# strings > 127 bytes make v1's compact-string lengths two-byte varints (built by repeating a
# short text: hypothesis draws long texts slowly, and the tests draw thousands)
LONG_TEXT = st.text(min_size=1, max_size=4).map(lambda s: (s * 130)[:130 + 40 * len(s)])
names = st.one_of(st.none(), st.text(max_size=3), LONG_TEXT,
                  st.sampled_from(["alice", "", "<default>", "ünï côdé", "é" * 70]))
types = st.sampled_from(["user", "client-id", "ip", "", "custom", "t" * 130])
entities = st.lists(st.tuples(types, names), max_size=3).map(tuple)
messages = st.one_of(st.none(), st.just(""), st.text(max_size=5), LONG_TEXT)
results = st.builds(AlterResult, st.sampled_from([0, 31, 42, 44, -1, 32767, -32768]), messages, entities)


def generated_response(version: int, answer: list[AlterResult]) -> bytes:
    E = Response.EntryData
    return bytes(Response(version=version, throttle_time_ms=0, entries=[
        E(error_code=r.error_code, error_message=r.error_message,
          entity=[E.EntityData(entity_type=t, entity_name=n) for t, n in r.entity])
        for r in answer]).encode())


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([0, 1]), st.lists(results, max_size=40))
def test_response_is_byte_identical_to_kafka_python(version, answer):
    assert alter_response(version, answer) == generated_response(version, answer)


@pytest.mark.parametrize("version", [0, 1])
def test_response_of_20000_entries_uses_multi_byte_counts(version):
    answer = [AlterResult(42 if i % 7 == 0 else 0, None if i % 2 else ("m" * (i % 300)),
                          (("client-id", None if i % 5 == 0 else f"c{i}"), ("user", f"u{i}")))
              for i in range(20_000)]
    assert alter_response(version, answer) == generated_response(version, answer)


# -- requests --------------------------------------------------------------------------------

ODD_FLOATS = [math.nan, -math.nan, struct.unpack(">d", b"\x7f\xf8\x00\x00\x00\x00\x12\x34")[0],
              math.inf, -math.inf, 0.0, -0.0, 5e-324]
ops = st.tuples(st.sampled_from(["producer_byte_rate", "request_percentage", "", "k" * 150]),
                st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(ODD_FLOATS)),
                st.booleans())
entries = st.lists(st.tuples(entities, st.lists(ops, max_size=4)), max_size=40)
client_ids = st.one_of(st.none(), st.just(""), st.text(max_size=5), LONG_TEXT)


def request_payload(version: int, rows, validate_only: bool, client_id: str | None) -> bytes:
    """What the sandbox reads after the size: header and body, by kafka-python."""
    E = Request.EntryData
    request = Request(version=version, validate_only=validate_only, entries=[
        E(entity=[E.EntityData(entity_type=t, entity_name=n) for t, n in entity],
          ops=[E.OpData(key=k, value=v, remove=r) for k, v, r in op_rows])
        for entity, op_rows in rows])
    request.with_header(correlation_id=7, client_id=client_id)
    return bytes(request.encode(header=True))


def comparable(request: AlterRequest):
    """Entries and validate_only, values as their bits (NaN payloads, -0.0)."""
    return ([(e.entity, [(op.key, struct.pack(">d", op.value), op.remove) for op in e.ops])
             for e in request.entries], request.validate_only)


def generated_request(payload: bytes, version: int) -> AlterRequest:
    """The oracle: kafka-python's generated decoder (what apis.decode used), converted; a null
    array (which only garbage has) as an empty one, as the hand-written decoder reads it."""
    decoded = Request.decode(payload, version=version, header=True)
    return AlterRequest([AlterEntry(tuple((e.entity_type, e.entity_name) for e in entry.entity or ()),
                                    tuple(WireOp(op.key, op.value, op.remove) for op in entry.ops or ()))
                         for entry in decoded.entries or ()], decoded.validate_only)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([0, 1]), entries, st.booleans(), client_ids)
def test_request_agrees_with_kafka_pythons_generated_decoder(version, rows, validate_only, client_id):
    payload = request_payload(version, rows, validate_only, client_id)
    header = read_header(payload)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        49, version, 7, client_id)
    got = alter_request_of(header, payload)
    assert comparable(got) == comparable(generated_request(payload, version))
    assert comparable(got) == ([(tuple(e), [(k, struct.pack(">d", v), r) for k, v, r in o]) for e, o in rows],
                               validate_only)
    assert all(type(op.remove) is bool for e in got.entries for op in e.ops)


@pytest.mark.parametrize("version", [0, 1])
def test_a_nonzero_boolean_is_true(version):
    payload = bytearray(request_payload(version, [((("user", "a"),), [("k", 1.0, True)])], True, "c"))
    flags = [len(payload) - (2 if version else 1)]  # ValidateOnly (then v1's tag section)
    flags.append(payload.rindex(struct.pack(">d", 1.0)) + 8)  # Remove
    for at in flags:
        assert payload[at] == 1
        payload[at] = 0xA5
    got = alter_request_of(read_header(bytes(payload)), bytes(payload))
    assert got.validate_only is True
    assert got.entries[0].ops == (WireOp("k", 1.0, True),)


def test_tagged_fields_are_skipped_in_the_header_and_body():
    payload = request_payload(1, [((("user", "a"),), [("k", 2.0, False)])], False, "cid")
    head = 10 + 3  # api key, version, correlation id, client id "cid"
    assert payload[head] == 0  # the header's empty tag section
    tagged = bytearray(payload[:head] + bytes([2, 0, 1]) + b"x" + bytes([3, 2]) + b"yz" + payload[head + 1:])
    at = tagged.rindex(struct.pack(">d", 2.0)) + 9  # the op's tag section, after Remove
    assert tagged[at] == 0
    tagged[at:at + 1] = bytes([1, 200, 1, 0])  # tag 200 (a two-byte varint), empty
    got = alter_request_of(read_header(bytes(tagged)), bytes(tagged))
    assert got == AlterRequest([AlterEntry((("user", "a"),), (WireOp("k", 2.0, False),))], False)


# -- garbage ---------------------------------------------------------------------------------

def header_of(version: int, client_id: bytes | None = b"cid") -> bytes:
    head = struct.pack(">hhi", 49, version, 7)
    head += struct.pack(">h", -1) if client_id is None else struct.pack(">h", len(client_id)) + client_id
    return head + (b"\0" if version else b"")


@settings(max_examples=200, deadline=1000)
@given(st.sampled_from([0, 1]), st.binary(max_size=300))
def test_random_bytes_after_a_header_fail_with_a_decoding_error_or_decode_as_kafka_python_does(version, body):
    payload = header_of(version) + body
    try:
        got = alter_request_of(read_header(payload), payload)
    except ERRORS:
        return
    # bytes that happen to make a request: kafka-python's generated decoder reads the same one
    assert comparable(got) == comparable(generated_request(payload, version))


small_requests = st.tuples(st.sampled_from([0, 1]),
                           st.lists(st.tuples(entities, st.lists(ops, max_size=3)), max_size=3),
                           st.booleans(), client_ids)


@settings(max_examples=200, deadline=1000)
@given(small_requests, st.data())
def test_a_corrupted_request_fails_with_a_decoding_error_or_decodes_as_kafka_python_does(sent, data):
    version, client_id = sent[0], sent[3]
    corrupted = bytearray(request_payload(*sent))
    body_at = len(header_of(version, None if client_id is None else client_id.encode()))
    for _ in range(data.draw(st.integers(1, 3))):  # the header is the broker's to check, not this
        at = data.draw(st.integers(body_at, len(corrupted) - 1))
        corrupted[at] = data.draw(st.integers(0, 255))
    payload = bytes(corrupted)
    try:
        got = alter_request_of(read_header(payload), payload)
    except ERRORS:
        return  # stricter than kafka-python's decoder is fine: a length < -1, a null type or key
    assert comparable(got) == comparable(generated_request(payload, version))


@settings(max_examples=50, deadline=1000)
@given(small_requests)
def test_every_truncation_of_a_request_fails(sent):
    payload = request_payload(*sent)
    for cut in range(len(payload)):
        with pytest.raises(ERRORS):
            alter_request_of(read_header(payload[:cut]), payload[:cut])


HUGE_V0_COUNT, HUGE_V0_STRING = b"\x7f\xff\xff\xff", b"\x7f\xff"
HUGE_VARINT = b"\xff\xff\xff\xff\x07"  # 2**31 - 1 in five bytes


@pytest.mark.parametrize("body", [
    pytest.param(HUGE_V0_COUNT, id="entries"),
    pytest.param(b"\0\0\0\1" + HUGE_V0_COUNT, id="entity-parts"),
    pytest.param(b"\0\0\0\1" + b"\0\0\0\0" + HUGE_V0_COUNT, id="ops"),
    pytest.param(b"\0\0\0\1" + b"\0\0\0\1" + HUGE_V0_STRING + b"\0" * 64, id="entity-type"),
    pytest.param(b"\0\0\0\1" + b"\0\0\0\1" + b"\0\4user" + HUGE_V0_STRING + b"\0" * 64, id="entity-name"),
    pytest.param(b"\0\0\0\1" + b"\0\0\0\0" + b"\0\0\0\1" + HUGE_V0_STRING + b"\0" * 64, id="key"),
    pytest.param(b"\0\0\0\1" + b"\0\0\0\1" + b"\xff\xfe" + b"\0" * 64, id="length-below-minus-1"),
    pytest.param(b"\0\0\0\1" + b"\0\0\0\1" + b"\xff\xff" + b"\0" * 64, id="null-entity-type"),
])
def test_v0_huge_or_impossible_lengths_are_malformed_at_once(body):
    payload = header_of(0) + body
    started = time.monotonic()
    with pytest.raises(Malformed):
        alter_request_of(read_header(payload), payload)
    assert time.monotonic() - started < 0.5


@pytest.mark.parametrize("body", [
    pytest.param(HUGE_VARINT, id="entries"),
    pytest.param(b"\2" + HUGE_VARINT, id="entity-parts"),
    pytest.param(b"\2\1" + HUGE_VARINT, id="ops"),
    pytest.param(b"\2\2" + HUGE_VARINT + b"\0" * 64, id="entity-type"),
    pytest.param(b"\2\2\5user" + HUGE_VARINT + b"\0" * 64, id="entity-name"),
    pytest.param(b"\2\1\2" + HUGE_VARINT + b"\0" * 64, id="key"),
    pytest.param(b"\2\2\0" + b"\0" * 64, id="null-entity-type"),
    pytest.param(b"\xff\xff\xff\xff\xff\x01", id="varint-over-five-bytes"),
])
def test_v1_huge_or_impossible_lengths_are_malformed_at_once(body):
    payload = header_of(1) + body
    started = time.monotonic()
    with pytest.raises(Malformed):
        alter_request_of(read_header(payload), payload)
    assert time.monotonic() - started < 0.5


def test_a_huge_tag_count_fails_at_once():
    for payload in (header_of(1)[:-1] + HUGE_VARINT + b"\0" * 64,  # the header's tag section
                    header_of(1) + b"\2\1\1" + HUGE_VARINT + b"\0" * 64):  # an entry's
        started = time.monotonic()
        with pytest.raises(ERRORS):
            alter_request_of(read_header(payload), payload)
        assert time.monotonic() - started < 0.5


@pytest.mark.parametrize("version", [0, 1])
def test_a_client_id_longer_than_the_payload_fails(version):
    payload = struct.pack(">hhih", 49, version, 7, 300) + b"short" + b"\0" * 8
    with pytest.raises(ERRORS):
        alter_request_of(read_header(payload), payload)
