"""Where the items of a block-style ``entities:`` list start, by a line scan (no YAML composer):
the plan names each change's origin as ``file:line:col`` for valid files too, so this stays out
of :mod:`kqplan.manifest.positions` (which imports pyyaml for the error path)."""

from __future__ import annotations

import re

ENTITIES_HEAD = re.compile(r"^entities:[ \t]*(?:#.*)?$", re.M)
ITEM = re.compile(r"^([ ]*)- ", re.M)


def entity_items(text: str) -> list[tuple[int, int]]:
    """(line, column) of every item of a block-style ``entities:`` list, in order ([] otherwise)."""
    head = ENTITIES_HEAD.search(text)
    if head is None:
        return []
    first = ITEM.search(text, head.end())
    if first is None:
        return []
    # An item is a line starting with exactly the first item's indent and "- " (a deeper list's
    # item has a space where this one has "-"); split + startswith runs in C, 10x a regex scan.
    prefix = first.group(0)
    base = text.count("\n", 0, first.start()) + 1
    column = len(prefix) + 1
    return [(base + i, column) for i, line in enumerate(text[first.start():].split("\n"))
            if line.startswith(prefix)]
