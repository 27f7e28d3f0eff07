"""Where the items of a block-style ``entities:`` list start, by a line scan (no YAML composer):
the plan names each change's origin as ``file:line:col`` for valid files too, so this stays out
of :mod:`kqplan.manifest.positions` (which imports pyyaml for the error path)."""

from __future__ import annotations

import itertools
import re

ENTITIES_HEAD = re.compile(r"^entities:[ \t]*(?:#.*)?$", re.M)
ITEM = re.compile(r"^([ ]*)- ", re.M)


def entity_lines(text: str) -> tuple[list[int], int]:
    """The line of every item of a block-style ``entities:`` list, in order, and their column
    (([], 0) for other layouts)."""
    head = ENTITIES_HEAD.search(text)
    if head is None:
        return [], 0
    first = ITEM.search(text, head.end())
    if first is None:
        return [], 0
    # An item is a line starting with exactly the first item's indent and "- " (a deeper list's
    # item has a space where this one has "-"). The scan runs in C: one regex pass for the item
    # starts, then the newlines between consecutive ones (4x a split and a test per line).
    prefix = first.group(0)
    start = first.start()
    ends = [start, *[m.end() for m in re.compile("\n" + re.escape(prefix)).finditer(text, start)]]
    lines = itertools.accumulate(map(text.count, itertools.repeat("\n"), ends, ends[1:]),
                                 initial=text.count("\n", 0, start) + 1)
    return list(lines), len(prefix) + 1


def entity_items(text: str) -> list[tuple[int, int]]:
    """(line, column) of every item of a block-style ``entities:`` list, in order ([] otherwise)."""
    lines, column = entity_lines(text)
    return [(line, column) for line in lines]
