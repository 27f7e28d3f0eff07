"""The sandbox's hand-written DescribeClientQuotas encoder against kafka-python's generated
classes, byte for byte (the classes are the reference; the encoder exists for speed)."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import DescribeClientQuotasResponse

from kqplan.sandbox.apis import describe_response
from kqplan.sandbox.engine import DescribeResult

names = st.one_of(st.none(), st.text(max_size=200))  # > 127 bytes: multi-byte varints
entity = st.lists(st.tuples(st.sampled_from(["user", "client-id", "ip", "x" * 130]), names),
                  min_size=0, max_size=3)
values = st.lists(st.tuples(st.sampled_from(["producer_byte_rate", "request_percentage"]),
                            st.floats(allow_nan=True, allow_infinity=True)), max_size=4)
results = st.builds(
    DescribeResult,
    error_code=st.sampled_from([0, 31, 42]),
    error_message=st.one_of(st.none(), st.text(max_size=300)),
    entries=st.one_of(st.none(), st.lists(st.tuples(entity, values), max_size=40)),
)


def generated(version: int, result: DescribeResult) -> bytes:
    R = DescribeClientQuotasResponse
    entries = None if result.entries is None else [
        R.EntryData(entity=[R.EntryData.EntityData(entity_type=t, entity_name=n) for t, n in e],
                    values=[R.EntryData.ValueData(key=k, value=v) for k, v in vs])
        for e, vs in result.entries]
    return bytes(R(version=version, throttle_time_ms=0, error_code=result.error_code,
                   error_message=result.error_message, entries=entries).encode())


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([0, 1]), results)
def test_describe_response_is_byte_identical_to_kafka_python(version: int, result: DescribeResult) -> None:
    assert describe_response(version, result) == generated(version, result)


def test_many_entries_use_multi_byte_counts() -> None:
    entries = [((("user", f"u{i}"),), [("producer_byte_rate", float(i)), ("consumer_byte_rate", math.nan)])
               for i in range(20_000)]
    result = DescribeResult(0, None, entries)
    for version in (0, 1):
        assert describe_response(version, result) == generated(version, result)
