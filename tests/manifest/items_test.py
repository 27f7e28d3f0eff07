"""The entity item scan (plan origins ``file:line:col``) against the plain line-by-line reading
it replaced: split the text into lines, and every line starting with the first item's indent and
``- `` is an item."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kqplan.manifest.items import ENTITIES_HEAD, ITEM, entity_items


def by_lines(text: str) -> list[tuple[int, int]]:
    head = ENTITIES_HEAD.search(text)
    if head is None:
        return []
    first = ITEM.search(text, head.end())
    if first is None:
        return []
    prefix = first.group(0)
    base = text.count("\n", 0, first.start()) + 1
    return [(base + i, len(prefix) + 1) for i, line in enumerate(text[first.start():].split("\n"))
            if line.startswith(prefix)]


pieces = st.sampled_from(["entities:", "entities: # c", "  - ", "- ", "    - ", "  -", "\n", "\r\n", " ",
                          "user: a", "quotas:", "  ", "-", "#", "x"])


@settings(max_examples=2000, deadline=None)
@given(st.lists(pieces, max_size=40))
def test_same_items_as_a_line_scan(parts: list[str]) -> None:
    text = "".join(parts)
    assert entity_items(text) == by_lines(text)


def test_block_list() -> None:
    text = ("apiVersion: kqplan/v1\nentities:\n  - user: a\n    quotas: {x: 1}\n  - user: b\n"
            "    tags:\n    - not an item\n  - client-id: c\n")
    assert entity_items(text) == [(3, 5), (5, 5), (8, 5)]
    assert entity_items("entities: []\n") == []
