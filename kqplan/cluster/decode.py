"""DescribeClientQuotasResponse (v0, v1) bytes straight into a quota state.

The one big answer kqplan receives: ~105 bytes per entity, 10 MB for 100k entities. Going
through kafka-python's generated classes builds an object per entity, per name and per
value first, then kqplan's state from those; this decoder builds the state directly, with
the strings it repeats (entity types, quota keys) decoded once. Measured on 100k entities
(2 cores, collector paused): generated classes + conversion ~0.95 s, this ~0.5 s
(benchmarks/describe.py). ``tests/cluster/decode_test.py`` checks it against the generated
decoder on random responses, v0 and v1.

Layout (Kafka's DescribeClientQuotasResponse.json; v1 is "flexible"):
``ThrottleTimeMs int32, ErrorCode int16, ErrorMessage nullable string,
Entries nullable [ Entity [ EntityType string, EntityName nullable string ],
Values [ Key string, Value float64 ] ]``. v0 strings are int16-length (-1 null), arrays
int32-count (-1 null); v1 strings and arrays are unsigned-varint length+1 (0 null), and
every struct ends with a tagged-field section.
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kqplan.core.entity import CLIENT_ID, USER, Entity, canonical
from kqplan.core.state import QuotaState
from kqplan.wire import Malformed, check_count, read_uvarint, skip_tags

_I16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from
_F64 = struct.Struct(">d").unpack_from

MalformedResponse = Malformed
"""The bytes are not the response of the version announced (:class:`kqplan.wire.Malformed`)."""


@dataclass(frozen=True, slots=True)
class DescribeResponse:
    error_code: int
    error_message: str | None
    state: QuotaState | None
    """None when the broker sent no entries (it does so exactly when error_code is set)."""


def decode_describe_response(body: bytes, version: int) -> DescribeResponse:
    """Decode a response body (after the response header); MalformedResponse when broken."""
    if version not in (0, 1):
        raise MalformedResponse(f"version {version} is not supported by this decoder")
    try:
        result, end = (_decode_v1 if version else _decode_v0)(body)
    except (IndexError, struct.error, UnicodeDecodeError) as exc:
        raise MalformedResponse(f"cannot decode DescribeClientQuotasResponse v{version}: "
                                f"{type(exc).__name__}") from None
    if end > len(body):  # a length pointing past the end: the slices were silently short
        raise MalformedResponse(f"DescribeClientQuotasResponse v{version} is truncated")
    return result


def _decode_v0(b: bytes) -> tuple[DescribeResponse, int]:
    p = 4  # ThrottleTimeMs
    (error_code,) = _I16(b, p)
    (n,) = _I16(b, p + 2)
    p += 4
    if n < -1:
        raise MalformedResponse(f"negative string length {n}")
    message = None if n < 0 else b[p:p + n].decode()
    p += max(n, 0)
    (count,) = _I32(b, p)
    p += 4
    if count < 0:
        return DescribeResponse(error_code, message, None), p
    check_count(count, b, p)
    strings: dict[bytes, str] = {}
    state: dict[Entity, dict[str, float]] = {}
    for _ in range(count):
        (m,) = _I32(b, p)
        p += 4
        check_count(m, b, p)
        parts: list[tuple[str, str | None]] = []
        for _ in range(m):
            (n,) = _I16(b, p)
            if n < 0:  # a negative length would move backwards: the loop would never end
                raise MalformedResponse(f"negative string length {n}")
            raw = b[p + 2:p + 2 + n]
            p += 2 + n
            entity_type = strings.get(raw) or strings.setdefault(raw, raw.decode())
            (n,) = _I16(b, p)
            p += 2
            if n < -1:
                raise MalformedResponse(f"negative string length {n}")
            if n < 0:
                parts.append((entity_type, None))
            else:
                parts.append((entity_type, b[p:p + n].decode()))
                p += n
        if m == 2 and parts[0][0] == CLIENT_ID:  # Kafka's HashMap order; Entity's is user first
            parts.reverse()
        (k,) = _I32(b, p)
        p += 4
        check_count(k, b, p)
        values = {}
        for _ in range(k):
            (n,) = _I16(b, p)
            if n < 0:
                raise MalformedResponse(f"negative string length {n}")
            raw = b[p + 2:p + 2 + n]
            p += 2 + n
            values[strings.get(raw) or strings.setdefault(raw, raw.decode())] = _F64(b, p)[0]
            p += 8
        if values:
            state[Entity(parts)] = values
    return DescribeResponse(error_code, message, state), p


def _head_v1(b: bytes) -> tuple[int, str | None, int, int]:
    """ErrorCode, ErrorMessage and the Entries count (+1; 0 is null) of a v1 response, and where
    the entries start."""
    p = 4  # ThrottleTimeMs
    (error_code,) = _I16(b, p)
    p += 2
    n, p = read_uvarint(b, p)
    message = None if n == 0 else b[p:p + n - 1].decode()
    p += max(n - 1, 0)
    count, p = read_uvarint(b, p)
    return error_code, message, count, p


def _decode_v1(b: bytes) -> tuple[DescribeResponse, int]:
    # Lengths below 128 are one byte: read that inline and fall back to uvarint otherwise.
    error_code, message, count, p = _head_v1(b)
    if count == 0:
        return DescribeResponse(error_code, message, None), skip_tags(b, p)
    check_count(count - 1, b, p)
    strings: dict[bytes, str] = {}
    state: dict[Entity, dict[str, float]] = {}
    layouts: dict[bytes, _ValuesLayout] = {}
    shared: dict[bytes, dict[str, float]] = {}
    end = len(b)
    for _ in range(count - 1):
        m = b[p]
        p += 1
        if m & 0x80:
            m, p = read_uvarint(b, p - 1)
        parts: list[tuple[str, str | None]] = []
        for _ in range(m - 1):
            n = b[p]
            p += 1
            if n & 0x80:
                n, p = read_uvarint(b, p - 1)
            raw = b[p:p + n - 1]
            p += n - 1
            entity_type = strings.get(raw) or strings.setdefault(raw, raw.decode())
            n = b[p]
            p += 1
            if n & 0x80:
                n, p = read_uvarint(b, p - 1)
            if n == 0:
                parts.append((entity_type, None))
            else:
                parts.append((entity_type, b[p:p + n - 1].decode()))
                p += n - 1
            if b[p]:
                p = skip_tags(b, p)
            else:
                p += 1
        if m == 3 and parts[0][0] == CLIENT_ID:  # Kafka's HashMap order; Entity's is user first
            parts.reverse()
        # one pair, or user and client-id in order (most entities), need no canonical check
        entity = canonical(parts) if m == 2 or (m == 3 and parts[0][0] == USER and parts[1][0] ==
                                                CLIENT_ID) else Entity(parts)
        layout = layouts.get(b[p:p + 3])  # the values count, first key's length and first byte
        if layout is not None and p + layout.size <= end:
            # Entries whose Values bytes repeat an earlier entry's share its dict (clusters use
            # a few tiers: ~200 bytes less per entity); the bytes, keys included, are the key.
            chunk = b[p:p + layout.size]
            values = shared.get(chunk)
            if values is None:
                got = layout.unpack(b, p)
                if layout.fixed(got) == layout.expected:
                    values = layout.values(got)
                    if len(shared) < _SHARED_LIMIT:
                        shared[chunk] = values
            if values is not None:
                p += layout.size
                if values:
                    state[entity] = values
                continue
        values, p = _values_v1(b, p, strings, layouts)
        if values:
            state[entity] = values
    return DescribeResponse(error_code, message, state), skip_tags(b, p)


def _values_v1(b: bytes, p: int, strings: dict[bytes, str], layouts: dict[bytes, _ValuesLayout]
               ) -> tuple[dict[str, float], int]:
    """One entry's Values read field by field (the first entry of each layout, or one with a
    varint, a tag or a repeated key), and its layout learnt when it has none of those."""
    start = p
    k = b[p]
    p += 1
    if k & 0x80:
        k, p = read_uvarint(b, p - 1)
    values = {}
    plain = k < 0x80
    for _ in range(k - 1):
        n = b[p]
        p += 1
        if n & 0x80:
            n, p = read_uvarint(b, p - 1)
            plain = False
        raw = b[p:p + n - 1]
        p += n - 1
        values[strings.get(raw) or strings.setdefault(raw, raw.decode())] = _F64(b, p)[0]
        p += 8
        if b[p]:
            p = skip_tags(b, p)
            plain = False
        else:
            p += 1
    if b[p]:
        p = skip_tags(b, p)
        plain = False
    else:
        p += 1
    if plain and len(values) == k - 1 and p - start > 2:  # no varint, tag or repeated key
        layouts.setdefault(b[start:start + 3], _ValuesLayout.of(b, start, list(values)))
    return values, p


_SHARED_LIMIT = 4096  # distinct Values kept for sharing: a state of unique values pays little


class _ValuesLayout:
    """One entry's ``Values`` array (v1) as a single struct, for the entries that repeat its keys
    in its order: every byte but the doubles is checked against the first entry's, so an entry
    that differs in anything (a key, a length, a tagged field) is decoded field by field."""

    __slots__ = ("expected", "fixed", "size", "unpack", "values")

    def __init__(self, fmt: str, expected: tuple[object, ...], fixed: list[int], floats: list[int],
                 keys: list[str]) -> None:
        compiled = struct.Struct(fmt)
        self.unpack = compiled.unpack_from
        self.size = compiled.size
        self.expected = expected
        self.fixed = operator.itemgetter(*fixed)
        self.values = _values_builder(keys, floats)

    @classmethod
    def of(cls, b: bytes, p: int, keys: list[str]) -> _ValuesLayout:
        """The layout of the Values array at ``p``, already decoded once into ``keys``."""
        fmt = ">B"
        fixed = [0]
        floats: list[int] = []
        for key in keys:
            encoded = key.encode()
            fixed += [len(fixed) + len(floats), len(fixed) + len(floats) + 1]
            fmt += f"B{len(encoded)}s"
            floats.append(len(fixed) + len(floats))
            fmt += "d"
            fixed.append(len(fixed) + len(floats))
            fmt += "B"
        fixed.append(len(fixed) + len(floats))
        fmt += "B"
        layout = cls(fmt, (), fixed, floats, keys)
        layout.expected = layout.fixed(layout.unpack(b, p))
        return layout


def _values_builder(keys: list[str], at: list[int]) -> Callable[[tuple[Any, ...]], dict[str, float]]:
    """``{keys[i]: got[at[i]]}`` as a dict display for the usual 1-4 keys (dict(zip(...)) costs
    six times as much per entry)."""
    if len(keys) == 1:
        k0, i0 = keys[0], at[0]
        return lambda got: {k0: got[i0]}
    if len(keys) == 2:
        (k0, k1), (i0, i1) = keys, at
        return lambda got: {k0: got[i0], k1: got[i1]}
    if len(keys) == 3:
        (k0, k1, k2), (i0, i1, i2) = keys, at
        return lambda got: {k0: got[i0], k1: got[i1], k2: got[i2]}
    if len(keys) == 4:
        (k0, k1, k2, k3), (i0, i1, i2, i3) = keys, at
        return lambda got: {k0: got[i0], k1: got[i1], k2: got[i2], k3: got[i3]}
    return lambda got: dict(zip(keys, map(got.__getitem__, at), strict=True))
