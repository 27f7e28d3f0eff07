"""The sandbox's hand-written DescribeClientQuotas and DescribeConfigs encoders against
kafka-python's generated classes, byte for byte (the classes are the reference; the encoders
exist for speed)."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import DescribeClientQuotasResponse, DescribeConfigsRequest, DescribeConfigsResponse

from kqplan.sandbox.apis import describe_configs, describe_response
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


# -- DescribeConfigs (the sandbox's hand-written answer; the generated classes are the reference) --

def generated_configs(version: int, request, nodes: int, configs: dict[str, str | None], given: set[str], *,
                      allowed: bool) -> bytes:
    """The answer as the sandbox built it with kafka-python's classes before it wrote it by hand."""
    R = DescribeConfigsResponse
    results = []
    for resource in request.resources:
        name, wanted = resource.resource_name, resource.configuration_keys
        error, message, listed = 0, None, []
        if not allowed:
            error, message = 31, "Cluster authorization failed."
        elif resource.resource_type != 4 or not name.isdigit() or not 1 <= int(name) <= nodes:
            error, message = 42, (f"Unexpected broker id, expected 1..{nodes} or empty string, "
                                  f"but received {name}")
        else:
            listed = [R.DescribeConfigsResult.DescribeConfigsResourceResult(
                name=key, value=value, read_only=True, is_default=False, is_sensitive=False,
                config_source=4 if key in given else 5, synonyms=[], config_type=0, documentation=None)
                for key, value in sorted(configs.items()) if wanted is None or key in wanted]
        results.append(R.DescribeConfigsResult(error_code=error, error_message=message,
                                               resource_type=resource.resource_type, resource_name=name,
                                               configs=listed))
    return bytes(R(version=version, throttle_time_ms=0, results=results).encode())


config_names = st.sampled_from(["quota.window.num", "quota.window.size.seconds",
                                "client.quota.callback.class", "ü" * 70])
resources = st.lists(st.builds(
    lambda kind, name, keys: DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=kind, resource_name=name, configuration_keys=keys),
    st.sampled_from([4, 2]), st.sampled_from(["1", "2", "3", "x", ""]),
    st.one_of(st.none(), st.lists(config_names, max_size=3))), max_size=4)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([1, 2, 3, 4]), resources,
       st.dictionaries(config_names, st.one_of(st.none(), st.text(max_size=150)), max_size=4),
       st.sets(config_names), st.booleans())
def test_describe_configs_is_byte_identical_to_kafka_python(version, listed, configs, given_names,
                                                            allowed) -> None:
    request = DescribeConfigsRequest(version=version, resources=listed, include_synonyms=False)
    assert describe_configs(version, request, 2, configs, given_names, allowed=allowed) == \
        generated_configs(version, request, 2, configs, given_names, allowed=allowed)
