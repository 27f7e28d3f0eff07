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


def entity_list(text: str) -> tuple[re.Match[str], int, str, int] | None:
    """Where a block-style ``entities:`` list is: its head line, its first item's offset, the
    newline and prefix that start every item, and where the list ends; None for another layout,
    or anything between the head line and the first item."""
    head = ENTITIES_HEAD.search(text)
    if head is None:
        return None
    first = ITEM.search(text, head.end())
    if first is None or text[head.end():first.start()].strip("\r\n"):
        return None  # something between `entities:` and its first item: let the parser judge
    # Scans in C, each a literal search (a line-anchored regex over 9 MiB cost 60-85 ms apiece).
    # What they do not rule out — a second `entities:`, an item on its own line (`-` then a
    # nested block), a key between items — makes the blanked document refuse to parse (yaml_rs
    # refuses a duplicate key), or the items read apart differ from what the callers expect.
    item = "\n" + first.group(0)
    last = max(text.rfind(item), first.start() - 1) + 1
    # The list ends at the first line after its last item that is not deeper, blank or a comment.
    block_end = re.compile(rf"^(?!{re.escape(first.group(1))} |[ \t]*(?:#|\r?$))", re.M).search(
        text, last + len(item) - 1)
    return head, first.start(), item, len(text) if block_end is None else block_end.start()
