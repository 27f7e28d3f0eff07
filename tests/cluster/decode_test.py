from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import DescribeClientQuotasResponse as Response

from kqplan.cluster.decode import MalformedResponse, decode_describe_response
from kqplan.core.entity import Entity

E, EntityData, ValueData = Response.EntryData, Response.EntryData.EntityData, Response.EntryData.ValueData


def generated_state(body: bytes, version: int):
    """The oracle: kafka-python's generated decoder, then the obvious conversion."""
    response = Response.decode(body, version=version)
    if response.entries is None:
        return response.error_code, response.error_message, None
    state = {}
    for entry in response.entries:
        values = {v.key: v.value for v in entry.values}
        if values:
            state[Entity.of((c.entity_type, c.entity_name) for c in entry.entity)] = values
    return response.error_code, response.error_message, state


def encode(version: int, entries, *, error_code=0, error_message="") -> bytes:
    return bytes(Response(version=version, throttle_time_ms=7, error_code=error_code,
                          error_message=error_message, entries=entries).encode())


def same(a, b) -> bool:
    """State equality where NaN equals NaN (Kafka stores NaN for DOUBLE keys)."""
    if a.keys() != b.keys():
        return False
    for entity in a:
        if a[entity].keys() != b[entity].keys():
            return False
        for key, value in a[entity].items():
            if struct.pack(">d", value) != struct.pack(">d", b[entity][key]):
                return False
    return True


names = st.one_of(st.none(), st.text(max_size=3), st.text(min_size=120, max_size=200),
                  st.sampled_from(["alice", "<default>", "", "ünï côdé", "a" * 300]))
types = st.sampled_from(["user", "client-id", "ip", "custom-type", "ü"])
entities = st.lists(st.tuples(types, names), min_size=1, max_size=3, unique_by=lambda p: p[0])
values = st.dictionaries(st.sampled_from(["producer_byte_rate", "consumer_byte_rate",
                                          "request_percentage", "x" * 150, ""]),
                         st.floats(allow_nan=True, allow_infinity=True), max_size=4)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(entities, values), max_size=40, unique_by=lambda e: frozenset(e[0])),
       st.sampled_from([0, 1]))
def test_agrees_with_kafka_pythons_generated_decoder(rows, version):
    entries = [E(entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity],
                 values=[ValueData(key=k, value=v) for k, v in vals.items()])
               for entity, vals in rows]
    body = encode(version, entries)
    result = decode_describe_response(body, version)
    code, message, expected = generated_state(body, version)
    assert (result.error_code, result.error_message) == (code, message)
    assert result.state is not None
    assert same(result.state, expected)


@pytest.mark.parametrize("version", [0, 1])
def test_kafka_order_of_user_and_client_id_is_normalized(version):
    entries = [E(entity=[EntityData(entity_type="client-id", entity_name="etl"),
                         EntityData(entity_type="user", entity_name=None)],
                 values=[ValueData(key="request_percentage", value=50.0)])]
    result = decode_describe_response(encode(version, entries), version)
    assert result.state == {Entity.user_client(None, "etl"): {"request_percentage": 50.0}}
    assert next(iter(result.state)).parts == (("user", None), ("client-id", "etl"))


@pytest.mark.parametrize("version", [0, 1])
def test_error_response_has_no_state(version):
    body = encode(version, None, error_code=31, error_message=None)
    result = decode_describe_response(body, version)
    assert (result.error_code, result.error_message, result.state) == (31, None, None)


@pytest.mark.parametrize("version", [0, 1])
def test_empty_success(version):
    result = decode_describe_response(encode(version, []), version)
    assert (result.error_code, result.error_message, result.state) == (0, "", {})


@pytest.mark.parametrize("version", [0, 1])
def test_truncated_or_garbage_is_malformed(version):
    entries = [E(entity=[EntityData(entity_type="user", entity_name="alice")],
                 values=[ValueData(key="producer_byte_rate", value=1024.0)])]
    body = encode(version, entries)
    for cut in range(len(body) - 1):
        with pytest.raises(MalformedResponse):
            decode_describe_response(body[:cut], version)
    garbage = b"\0" * 6 + (b"\x7f\xff" if version == 0 else b"\xff" * 6)  # a huge message length
    with pytest.raises(MalformedResponse):
        decode_describe_response(garbage + b"\0" * 16, version)


def test_unknown_tagged_fields_are_skipped():
    # v1 structs end with a tagged-field section; a newer broker may fill it.
    entries = [E(entity=[EntityData(entity_type="user", entity_name="alice")],
                 values=[ValueData(key="producer_byte_rate", value=1024.0)])]
    body = bytearray(encode(1, entries))
    # The value struct's empty tag section is the byte after the 8-byte double.
    at = body.index(struct.pack(">d", 1024.0)) + 8
    assert body[at] == 0
    body[at:at + 1] = bytes([1, 5, 3]) + b"abc"  # one tag, id 5, 3 bytes
    result = decode_describe_response(bytes(body), 1)
    assert result.state == {Entity.user("alice"): {"producer_byte_rate": 1024.0}}


def test_nan_survives():
    entries = [E(entity=[EntityData(entity_type="user", entity_name="a")],
                 values=[ValueData(key="request_percentage", value=math.nan)])]
    result = decode_describe_response(encode(1, entries), 1)
    assert result.state is not None
    assert math.isnan(result.state[Entity.user("a")]["request_percentage"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["producer_byte_rate", "consumer_byte_rate"]),
                                st.sampled_from([0.0, -0.0, 1.0, math.nan, -math.nan, 1048576.0]),
                                min_size=1, max_size=2), min_size=1, max_size=30))
def test_repeated_values_share_a_dict_and_keep_every_bit(rows):
    """Entries whose Values bytes repeat share one dict: -0.0 is not 0.0, and NaN payloads stay."""
    entries = [E(entity=[EntityData(entity_type="user", entity_name=f"u{i}")],
                 values=[ValueData(key=k, value=v) for k, v in row.items()]) for i, row in enumerate(rows)]
    body = encode(1, entries)
    state = decode_describe_response(body, 1).state
    assert same(state, generated_state(body, 1)[2])
    # the first entry of each key layout is decoded field by field; the rest share by value bytes
    value_sets = {tuple((k, struct.pack(">d", v)) for k, v in row.items()) for row in rows}
    layouts = {tuple(row) for row in rows}
    assert len({id(q) for q in state.values()}) <= len(value_sets) + len(layouts)
