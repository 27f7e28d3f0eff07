"""Fuzzing the byte-level readers: the describe decoder and the properties reader never raise
anything but their own errors, never hang, and never run past their input."""

from __future__ import annotations

import contextlib
import random
import struct
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kqplan.cluster.connection import config_from_properties
from kqplan.cluster.decode import MalformedResponse, decode_describe_response
from kqplan.core.errors import KqplanError
from tests.cluster.decode_test import encode

ENTRIES = [([("user", "alice"), ("client-id", None)], [("producer_byte_rate", 1024.0)]),
           ([("ip", "10.0.0.1")], [("connection_creation_rate", 5.0)]),
           ([("user", None)], [("consumer_byte_rate", 2.0), ("request_percentage", 50.0)])]


def decode_bounded(body: bytes, version: int) -> None:
    started = time.monotonic()
    with contextlib.suppress(MalformedResponse):
        decode_describe_response(body, version)
    assert time.monotonic() - started < 1.0, "the decoder must not loop"


def test_a_negative_length_no_longer_loops_backwards():
    # v0: throttle, error 0, null message, 1 entry, 1 part, entity-type length -6 (moves p back)
    # a 20-byte body: an entity-type length of -4 moved the decoder back onto the same bytes, so it
    # looped for ever (MemoryError after a billion parts)
    body = struct.pack(">ihhii", 0, 0, -1, 1, 1_000_000_000) + struct.pack(">h", -4) + b"xx"
    with pytest.raises(MalformedResponse, match="array count 1000000000 runs past the 20-byte frame"):
        decode_describe_response(body, 0)
    huge = struct.pack(">ihhi", 0, 0, -1, 2_000_000_000)
    with pytest.raises(MalformedResponse, match="runs past"):
        decode_describe_response(huge, 0)


@pytest.mark.parametrize("version", [0, 1])
def test_byte_mutations_of_real_responses(version):
    rng = random.Random(1234 + version)
    valid = encode(version, ENTRIES)
    for _ in range(3000):
        body = bytearray(valid)
        for _ in range(rng.randint(1, 4)):
            choice = rng.random()
            i = rng.randrange(len(body))
            if choice < 0.6:
                body[i] = rng.randrange(256)
            elif choice < 0.8:
                del body[i:i + rng.randint(1, 8)]
            else:
                body[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        decode_bounded(bytes(body), version)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=64), st.sampled_from([0, 1]))
def test_random_bytes(body, version):
    decode_bounded(body, version)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([*"=:\\ \t\n#!abcsl.${}\"';\x00é", "sasl.", "ssl.", "security.protocol",
                                 "sasl.jaas.config", "SASL_SSL", "PLAIN"]), max_size=60).map("".join))
def test_the_properties_reader_only_raises_kqplan_errors(text):
    with contextlib.suppress(KqplanError):
        config_from_properties(text, bootstrap="127.0.0.1:9", source="p.properties", env={})
