"""The fast readers' one door: a file of the usual shape read without parsing it whole."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kqplan.manifest.parse import ALIAS_LIMITS, too_deep
from kqplan.manifest.shape import plain_entities

if TYPE_CHECKING:
    from kqplan.manifest.head import ManifestHead
    from kqplan.manifest.source import LoadedManifest, SourceFile


def read_apart(source: SourceFile, whole: Callable[[], LoadedManifest | None]
               ) -> tuple[ManifestHead, dict[str, Any]] | None:
    """A file whose document-level fields are plainly valid and whose entities are read without
    parsing the file whole: a plain list straight from the text (:mod:`kqplan.manifest.fast.plain`),
    or a big file's a slice at a time (:mod:`kqplan.manifest.fast.slices`, which calls ``whole``
    to read the file whole after all when a slice is unusual); None for every other file, which
    is parsed whole."""
    from kqplan.manifest.fast.plain import PLAIN_FILE_CHARS, read_plain
    from kqplan.manifest.fast.slices import BIG_FILE_CHARS, read_sliced

    size = len(source.text)
    if size < min(PLAIN_FILE_CHARS, BIG_FILE_CHARS) or too_deep(source.text) is not None:
        return None
    if size >= BIG_FILE_CHARS:
        return read_sliced(source.text, plain_entities, ALIAS_LIMITS, whole)
    return read_plain(source.text, ALIAS_LIMITS)
