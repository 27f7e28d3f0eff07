"""AlterClientQuotas (API 49, v0 and v1) on the wire, written and read by hand.

kafka-python's generated classes build an object per entry, per entity part and per op
before encoding them, and one per answered entity when decoding: for an apply of 1,000
entities (a validateOnly request, then the real one) that was ~50 ms of the command's ~0.5 s
(benchmarks/README.md, issue 42). Here the request's bytes are written straight from kqplan's
alterations, and the answer is read straight into (entity, error) results.
``tests/cluster/alter_wire_test.py`` checks both byte for byte against kafka-python's
generated encoder and decoder, on random requests and answers, v0 and v1.

Layout (Kafka's AlterClientQuotasRequest.json / AlterClientQuotasResponse.json; v1 is
"flexible"):

- request: ``Entries [ Entity [ EntityType string, EntityName nullable string ],
  Ops [ Key string, Value float64, Remove bool ] ], ValidateOnly bool``;
- response: ``ThrottleTimeMs int32, Entries [ ErrorCode int16, ErrorMessage nullable string,
  Entity [ EntityType string, EntityName nullable string ] ]``.

v0 strings are int16-length (-1 null), arrays int32-count; v1 strings and arrays are
unsigned-varint length+1 (0 null), and every struct ends with a tagged-field section (empty
when written here).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from kqplan.core.cluster import Alteration, EntityResult
from kqplan.core.entity import Entity
from kqplan.wire import F64, I16, I32, NO_TAGS, check_count, count, read_uvarint, skip_tags, strings
from kqplan.wire import Malformed as MalformedResponse

_TRUE, _FALSE = b"\x01", b"\x00"


def encode_alter_request(version: int, alterations: Sequence[Alteration], *, validate_only: bool) -> bytes:
    """The body (after the request header) of an AlterClientQuotasRequest of ``version``; a
    removed key's value is sent as 0.0, as kafka-python's classes were given it."""
    if version not in (0, 1):
        raise ValueError(f"AlterClientQuotasRequest v{version} is not written by this encoder")
    flexible = version == 1
    string = strings(flexible=flexible)  # types and keys repeat: each encoded once
    tag = NO_TAGS if flexible else b""
    pack = F64.pack
    out = [count(len(alterations), flexible=flexible)]
    for alteration in alterations:
        parts = tuple(alteration.entity)
        out.append(count(len(parts), flexible=flexible))
        for entity_type, name in parts:
            out += (string(entity_type), string(name), tag)
        out.append(count(len(alteration.ops), flexible=flexible))
        for op in alteration.ops:
            out += (string(op.key), pack(0.0 if op.value is None else op.value),
                    _TRUE if op.remove else _FALSE, tag)
        out.append(tag)
    out += (_TRUE if validate_only else _FALSE, tag)
    return b"".join(out)


def decode_alter_response(body: bytes, version: int) -> list[EntityResult]:
    """The broker's answer per entity, in its order; MalformedResponse when broken."""
    if version not in (0, 1):
        raise MalformedResponse(f"AlterClientQuotasResponse v{version} is not read by this decoder")
    try:
        results, end = _decode(body, flexible=version == 1)
    except (IndexError, struct.error, UnicodeDecodeError) as exc:
        raise MalformedResponse(f"cannot decode AlterClientQuotasResponse v{version}: "
                                f"{type(exc).__name__}") from None
    if end > len(body):
        raise MalformedResponse(f"AlterClientQuotasResponse v{version} is truncated")
    return results


def _decode(b: bytes, *, flexible: bool) -> tuple[list[EntityResult], int]:
    p = 4  # ThrottleTimeMs

    def length(p: int, size: struct.Struct) -> tuple[int, int]:
        """A string's length or an array's count (-1: null): a varint of it + 1, or ``size``."""
        if flexible:
            n, p = read_uvarint(b, p)
            return n - 1, p
        (n,) = size.unpack_from(b, p)
        return n, p + size.size

    def string(p: int) -> tuple[str | None, int]:
        n, p = length(p, I16)
        if n < -1:
            raise MalformedResponse(f"negative string length {n}")
        if n == -1:
            return None, p
        if p + n > len(b):
            raise MalformedResponse("a string runs past the end of the frame")
        return b[p:p + n].decode(), p + n

    def array(p: int) -> tuple[int, int]:
        n, p = length(p, I32)
        check_count(max(n, 0), b, p)
        return n, p

    entries, p = array(p)
    results: list[EntityResult] = []
    for _ in range(max(entries, 0)):
        (error_code,) = I16.unpack_from(b, p)
        message, p = string(p + 2)
        parts, p = array(p)
        entity: list[tuple[str, str | None]] = []
        for _ in range(max(parts, 0)):
            entity_type, p = string(p)
            if entity_type is None:
                raise MalformedResponse("an entity type is null")
            name, p = string(p)
            entity.append((entity_type, name))
            if flexible:
                p = skip_tags(b, p)
        if flexible:
            p = skip_tags(b, p)
        results.append(EntityResult(Entity.of(entity), error_code, message or None))
    if flexible:
        p = skip_tags(b, p)
    return results, p
