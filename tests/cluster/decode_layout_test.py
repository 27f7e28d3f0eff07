"""The v1 decoder reads an entry's Values array as one struct when an earlier entry had the same
keys in the same order (decode._ValuesLayout): entries that repeat a layout, and entries that
differ from it in any byte but the doubles, must decode exactly as field by field."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kqplan.cluster.decode import decode_describe_response
from kqplan.core.entity import Entity
from tests.cluster.decode_test import E, EntityData, ValueData, encode, generated_state, same

# few layouts, so that they repeat; the same first key with different later ones; a long key
# (a two-byte length); an empty key
layouts = st.sampled_from([
    ("producer_byte_rate", "consumer_byte_rate"), ("producer_byte_rate", "request_percentage"),
    ("consumer_byte_rate", "producer_byte_rate"), ("request_percentage",), ("x" * 130, "producer_byte_rate"),
    ("", "p"), ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate"),
    ("a", "b", "c", "d", "e"), ()])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(layouts, st.floats()), max_size=60))
def test_repeated_layouts_decode_as_field_by_field(rows: list[tuple[tuple[str, ...], float]]) -> None:
    entries = [E(entity=[EntityData(entity_type="user", entity_name=f"u{i}")],
                 values=[ValueData(key=k, value=value + j) for j, k in enumerate(keys)])
               for i, (keys, value) in enumerate(rows)]
    body = encode(1, entries)
    result = decode_describe_response(body, 1)
    assert result.state is not None
    assert same(result.state, generated_state(body, 1)[2])


def _compact(text: str) -> bytes:
    raw = text.encode()
    return bytes([len(raw) + 1]) + raw


def test_a_tagged_field_leaves_the_layout() -> None:
    import struct

    def entry(name: str, tag: bytes = b"\x00") -> bytes:
        return (b"\x02" + _compact("user") + _compact(name) + b"\x00" + b"\x03"
                + _compact("producer_byte_rate") + struct.pack(">d", 1.0) + b"\x00"
                + _compact("consumer_byte_rate") + struct.pack(">d", 2.0) + tag + b"\x00")

    tagged = b"\x01\x05\x02ab"  # one tagged field: tag 5, two bytes
    body = (struct.pack(">ih", 0, 0) + b"\x00" + b"\x04" + entry("a") + entry("b", tagged) + entry("c")
            + b"\x00")
    result = decode_describe_response(body, 1)
    assert result.state == {Entity.user(n): {"producer_byte_rate": 1.0, "consumer_byte_rate": 2.0}
                            for n in "abc"}
