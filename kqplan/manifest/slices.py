"""A big manifest's entity list read in slices, so memory stays a small multiple of the file.

Parsing a whole document builds a Python object for every scalar: ~13× the file's size for an
entity list, the peak of a `validate` of a big file (issue 16). A file over
:data:`BIG_FILE_CHARS` whose ``entities:`` is a block list is read here instead: the document
with the list's lines blanked (same line numbers) is parsed once, each slice of
:data:`SLICE_ITEMS` entries is parsed and shape-checked, then dropped, and compile parses them
again one slice at a time (:class:`SlicedEntries`). Anything this path is not sure of — a YAML
error, an alias across slices, an entry of unusual shape, an item count that does not match the
line scan — answers None, and the file is read whole as before, which locates every problem.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import yaml_rs

from kqplan.manifest.head import ManifestHead, plain_head
from kqplan.manifest.items import ENTITIES_HEAD, ITEM

BIG_FILE_CHARS = 16 << 20
"""Files at least this big are read in slices (smaller ones parse whole faster: one pass)."""
SLICE_ITEMS = 4096
"""Entries parsed at once: a few MiB of objects, whatever the file's size."""


class SlicedEntries:
    """A file's entity list, parsed a slice at a time as it is iterated (what compile does)."""

    __slots__ = ("_alias_limits", "_bounds", "_count", "_text")

    def __init__(self, text: str, bounds: list[tuple[int, int]], count: int, alias_limits: Any) -> None:
        self._text, self._bounds, self._count, self._alias_limits = text, bounds, count, alias_limits

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[Any]:
        for start, end in self._bounds:
            yield from _parse_slice(self._text, start, end, self._alias_limits) or ()

    def __setitem__(self, index: int, value: object) -> None:
        """Compile lets each entry go once compiled: a slice already is."""


def _parse_slice(text: str, start: int, end: int, alias_limits: Any) -> list[Any] | None:
    """The entries of ``text[start:end]`` (whole items of a block list), or None if that is not
    how they parse alone."""
    try:
        doc = yaml_rs.loads("s:\n" + text[start:end], parse_datetime=False, alias_limits=alias_limits)
    except yaml_rs.YAMLDecodeError:
        return None
    if doc.__class__ is not dict or len(doc) != 1 or doc.get("s").__class__ is not list:
        return None
    items: list[Any] = doc["s"]
    return items


def read_sliced(text: str, plain_entities: Callable[[list[Any]], bool], alias_limits: Any
                ) -> tuple[ManifestHead, dict[str, Any]] | None:
    """The document-level fields and the raw document (its ``entities`` a :class:`SlicedEntries`)
    of a big, plainly valid manifest; None whenever the whole-file path must decide."""
    head = ENTITIES_HEAD.search(text)
    if head is None or ENTITIES_HEAD.search(text, head.end()) is not None:
        return None
    first = ITEM.search(text, head.end())
    if first is None or text[head.end():first.start()].strip("\r\n"):
        return None  # something between `entities:` and its first item: let the parser judge
    indent = re.escape(first.group(1))
    # The list ends at the first line that is not an item, a deeper line, blank or a comment.
    block_end = re.compile(rf"^(?!{indent}(?:- | )|[ \t]*(?:#|\r?$))", re.M).search(text, first.start())
    end = len(text) if block_end is None else block_end.start()
    if re.compile(rf"^{indent}-\r?$", re.M).search(text, first.start(), end) is not None:
        return None  # an item on its own line ("-" then a nested block): left to the whole parse
    starts = [m.start() for m in re.compile(rf"^{re.escape(first.group(0))}", re.M).finditer(
        text, first.start(), end)]
    blanked = (text[:head.start()] + "entities: []" + "\n" * text.count("\n", head.end(), end)
               + text[end:])
    try:
        raw = yaml_rs.loads(blanked, parse_datetime=False, alias_limits=alias_limits)
    except yaml_rs.YAMLDecodeError:
        return None
    if raw.__class__ is not dict or raw.get("entities") != []:
        return None
    document = plain_head(raw)
    if document is None:
        return None
    bounds = []
    for i in range(0, len(starts), SLICE_ITEMS):
        stop = starts[i + SLICE_ITEMS] if i + SLICE_ITEMS < len(starts) else end
        items = _parse_slice(text, starts[i], stop, alias_limits)
        if items is None or len(items) != min(SLICE_ITEMS, len(starts) - i) or not plain_entities(items):
            return None
        bounds.append((starts[i], stop))
    raw["entities"] = SlicedEntries(text, bounds, len(starts), alias_limits)
    return document, raw
