"""A big manifest's entity list read in slices, so memory stays a small multiple of the file.

Parsing a whole document builds a Python object for every scalar: ~13× the file's size for an
entity list, the peak of a `validate` of a big file (issue 16). A file over
:data:`BIG_FILE_CHARS` whose ``entities:`` is a block list is read here instead: the document
with the list replaced by ``entities: []`` is parsed at once, and the list
(:class:`SlicedEntries`) a slice of :data:`SLICE_ITEMS` entries at a time, as compile iterates it:
each slice is read from its text when plain (:mod:`kqplan.manifest.fast.plain`), else parsed once and
shape-checked, then compiled and dropped. A slice this path is not sure of — a YAML error, an
alias across slices, an entry of unusual shape, an item count that does not match the line
scan — raises :class:`Unsliceable` midway through the compile, which then undoes
what the file added and reads it whole (:meth:`SlicedEntries.whole`), locating every problem
exactly as if it had never been sliced.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import yaml_rs

from kqplan.manifest.fast.plain import PlainEntries, plain_entries
from kqplan.manifest.head import ManifestHead, document_head
from kqplan.manifest.items import entity_list

if TYPE_CHECKING:
    from kqplan.manifest.source import LoadedManifest

BIG_FILE_CHARS = 4 << 20
"""Files at least this big are read in slices (below, the whole parse holds under ~60 MiB)."""
SLICE_ITEMS = 4096
"""Entries parsed at once: a few MiB of objects, whatever the file's size."""


class Unsliceable(Exception):
    """A slice did not parse alone as plain entries: the file must be read whole."""


class SlicedEntries:
    """A file's entity list, read a slice at a time as it is iterated (what compile does)."""

    __slots__ = ("_alias_limits", "_bounds", "_count", "_indent", "_plain", "_text", "whole")

    def __init__(self, text: str, bounds: list[tuple[int, int, int]], *, indent: int, alias_limits: Any,
                 plain: Callable[[list[Any]], bool], whole: Callable[[], LoadedManifest | None]) -> None:
        """``bounds``: each slice's start and end offsets in ``text`` and how many items it holds,
        items at column ``indent``."""
        self._text, self._bounds, self._count = text, bounds, sum(n for _, _, n in bounds)
        self._indent, self._alias_limits, self._plain = indent, alias_limits, plain
        self.whole = whole
        """The file read whole: its manifest, or None after reporting why (the loader's)."""

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[Any]:
        """Each entry, a slice read at a time; :class:`Unsliceable` where a slice is unusual."""
        for _, items in self.slices():
            yield from items

    def slices(self) -> Iterator[tuple[int, PlainEntries | list[Any]]]:
        """Each slice's first index and entries, in order: read from its text when plain (see
        :mod:`kqplan.manifest.fast.plain`), else parsed; :class:`Unsliceable` for a slice that is
        neither plain nor plain entries when parsed alone."""
        base = 0
        for items in self._read():
            if items is None:
                raise Unsliceable
            yield base, items
            base += len(items)
            del items

    def check(self) -> bool:
        """Whether every slice is usual (each read and let go in turn), for a caller that must
        know before it starts (compile reading the rest of the files for a profile)."""
        return all(items is not None for items in self._read())

    def _read(self) -> Iterator[PlainEntries | list[Any] | None]:
        """Each slice's entries, or None for a slice that is not plain entries when read alone."""
        text, indent, limits = self._text, self._indent, self._alias_limits
        for start, end, expected in self._bounds:
            plain = plain_entries(text, start, end, indent, limits)
            if plain is not None:  # its items are the slice's (no line of one starts an item)
                yield plain
                continue
            items = _parse_slice(text, start, end, limits)
            yield items if items is not None and len(items) == expected and self._plain(items) else None
            del items


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


def read_sliced(text: str, plain_shape: Callable[[list[Any]], bool], alias_limits: Any,
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
    raw["entities"] = SlicedEntries(text, bounds, indent=len(item) - 3, alias_limits=alias_limits,
                                    plain=plain_shape, whole=whole)
    return document, raw
