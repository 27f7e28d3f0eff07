"""A big manifest's entity list read in slices, so memory stays a small multiple of the file.

Parsing a whole document builds a Python object for every scalar: ~13× the file's size for an
entity list, the peak of a `validate` of a big file (issue 16). A file over
:data:`BIG_FILE_CHARS` whose ``entities:`` is a block list is read here instead: the document
with the list replaced by ``entities: []`` is parsed at once, and the list
(:class:`SlicedEntries`) a slice of :data:`SLICE_ITEMS` entries at a time, as compile iterates it:
each slice is parsed once, shape-checked, compiled and dropped. A slice this path is not sure of
— a YAML error, an alias across slices, an entry of unusual shape, an item count that does not
match the line scan — raises :class:`Unsliceable` midway through the compile, which then undoes
what the file added and reads it whole (:meth:`SlicedEntries.whole`), locating every problem
exactly as if it had never been sliced.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import yaml_rs

from kqplan.manifest.head import ManifestHead, plain_head
from kqplan.manifest.items import ENTITIES_HEAD, ITEM

if TYPE_CHECKING:
    from kqplan.manifest.loader import LoadedManifest

BIG_FILE_CHARS = 4 << 20
"""Files at least this big are read in slices (below, the whole parse holds under ~60 MiB)."""
SLICE_ITEMS = 4096
"""Entries parsed at once: a few MiB of objects, whatever the file's size."""


class Unsliceable(Exception):
    """A slice did not parse alone as plain entries: the file must be read whole."""


class SlicedEntries:
    """A file's entity list, parsed a slice at a time as it is iterated (what compile does)."""

    __slots__ = ("_alias_limits", "_bounds", "_count", "_plain", "_text", "whole")

    def __init__(self, text: str, bounds: list[tuple[int, int, int]], alias_limits: Any,
                 plain: Callable[[list[Any]], bool], whole: Callable[[], LoadedManifest | None]) -> None:
        """``bounds``: each slice's start and end offsets in ``text`` and how many items it holds."""
        self._text, self._bounds, self._count = text, bounds, sum(n for _, _, n in bounds)
        self._alias_limits, self._plain = alias_limits, plain
        self.whole = whole
        """The file read whole: its manifest, or None after reporting why (the loader's)."""

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[Any]:
        """Each entry, a slice parsed at a time; :class:`Unsliceable` where a slice is unusual."""
        for items in self._parsed():
            if items is None:
                raise Unsliceable
            yield from items
            del items

    def check(self) -> bool:
        """Whether every slice is usual (each parsed and let go in turn), for a caller that must
        know before it starts (compile reading the rest of the files for a profile)."""
        return all(items is not None for items in self._parsed())

    def _parsed(self) -> Iterator[list[Any] | None]:
        """Each slice's entries, or None for a slice that is not plain entries when parsed alone."""
        for start, end, expected in self._bounds:
            items = _parse_slice(self._text, start, end, self._alias_limits)
            yield items if items is not None and len(items) == expected and self._plain(items) else None
            del items

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


def read_sliced(text: str, plain_entities: Callable[[list[Any]], bool], alias_limits: Any,
                whole: Callable[[], LoadedManifest | None]) -> tuple[ManifestHead, dict[str, Any]] | None:
    """The document-level fields and the raw document (its ``entities`` a :class:`SlicedEntries`)
    of a big manifest whose document-level fields are plainly valid; None whenever the
    whole-file path must decide at once."""
    found = entity_list(text)
    if found is None:
        return None
    head, first, item, end = found
    read = document_head(text, head, end, alias_limits)
    if read is None:
        return None
    document, raw = read
    later = re.compile(re.escape(item)).finditer(text, first)
    starts = [first, *[m.start() + 1 for m in later]]
    per = SLICE_ITEMS
    bounds = [(starts[i], starts[i + per] if i + per < len(starts) else end, min(per, len(starts) - i))
              for i in range(0, len(starts), per)]
    raw["entities"] = SlicedEntries(text, bounds, alias_limits, plain_entities, whole)
    return document, raw


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


def document_head(text: str, head: re.Match[str], end: int, alias_limits: Any
                  ) -> tuple[ManifestHead, dict[str, Any]] | None:
    """The document with its entity list (``head`` to ``end``) as ``entities: []``: its
    document-level fields and raw form, when they are plainly valid; else None (no error of this
    parse is reported: the whole-file parse locates it)."""
    blanked = text[:head.start()] + "entities: []\n" + text[end:]  # `end` starts a line
    try:
        raw = yaml_rs.loads(blanked, parse_datetime=False, alias_limits=alias_limits)
    except yaml_rs.YAMLDecodeError:
        return None
    if raw.__class__ is not dict or raw.get("entities") != []:
        return None
    document = plain_head(raw)
    if document is None:
        return None
    return document, raw
