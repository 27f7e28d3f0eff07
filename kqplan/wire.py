"""Kafka's wire format: the primitives kqplan's hand-written codecs share, on the client's side
(:mod:`kqplan.cluster.decode`, :mod:`kqplan.cluster.alter_wire`) and the sandbox broker's
(:mod:`kqplan.sandbox.apis`). Each codec is checked against kafka-python's generated classes
(tests/cluster, tests/sandbox); these exist because those classes are slow on big messages.

A version before the message's first "flexible" one writes a string with an int16 length (-1:
null) and an array with an int32 count; a flexible version writes both with an unsigned varint
of the length + 1 (0: null) and ends every struct with a tagged-field section (empty when kqplan
writes one)."""

from __future__ import annotations

import struct
from collections.abc import Callable

I8 = struct.Struct(">b")
I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
F64 = struct.Struct(">d")
NO_TAGS = b"\x00"
"""An empty tagged-field section."""


class Malformed(ValueError):
    """Bytes that are not the message of the version announced."""


# -- reading -----------------------------------------------------------------------------------

def read_uvarint(b: bytes, p: int) -> tuple[int, int]:
    """The unsigned varint at ``p``, and where it ends."""
    value, shift = 0, 0
    while True:
        byte = b[p]
        p += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, p
        shift += 7
        if shift > 28:
            raise Malformed("varint too long")


def skip_tags(b: bytes, p: int) -> int:
    """Past the tagged-field section at ``p``."""
    count, p = read_uvarint(b, p)
    check_count(count, b, p)
    for _ in range(count):
        _, p = read_uvarint(b, p)
        size, p = read_uvarint(b, p)
        p += size
    return p


def check_count(count: int, b: bytes, p: int) -> None:
    """An array count no frame could hold (every element takes at least a byte) is malformed:
    it would make a decoder loop, or allocate, far past the data."""
    if count < 0 or count > len(b) - p:
        raise Malformed(f"array count {count} runs past the {len(b)}-byte frame")


# -- writing -----------------------------------------------------------------------------------

_SMALL = [bytes((i,)) for i in range(0x80)]


def uvarint(n: int) -> bytes:
    """``n`` as an unsigned varint."""
    if n < 0x80:
        return _SMALL[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def count(n: int, *, flexible: bool) -> bytes:
    """An array's count of ``n`` elements."""
    return uvarint(n + 1) if flexible else I32.pack(n)


def strings(*, flexible: bool) -> Callable[[str | None], bytes]:
    """A writer of (nullable) strings that encodes each distinct one once: entity types, keys and
    error messages repeat through a message."""
    done: dict[str | None, bytes] = {None: b"\x00" if flexible else I16.pack(-1)}

    def string(text: str | None) -> bytes:
        found = done.get(text)
        if found is None:
            assert text is not None
            data = text.encode()
            found = done[text] = (uvarint(len(data) + 1) if flexible else I16.pack(len(data))) + data
        return found

    return string
