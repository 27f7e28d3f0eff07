"""A manifest file as read: its path and text (positions found on first use), and what loading
made of it (the document fields, the parsed data)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kqplan.core.diagnostics import Diagnostic, Loc, Span
from kqplan.manifest.head import ManifestHead

if TYPE_CHECKING:
    from kqplan.core.intent import QuotaTest
    from kqplan.manifest.models import Manifest
    from kqplan.manifest.positions import Locator

MANIFEST_SUFFIXES = (".yaml", ".yml")


@dataclass(slots=True)
class SourceFile:
    path: str
    """The file as output shows it (:func:`kqplan.files.display_path`: from the repository root)."""
    text: str
    file: str | None = None
    """The file as it is opened (``path`` when None): relative to the current directory, or absolute."""
    _locator: Locator | None = None
    _items: tuple[list[int], int] | None = None

    def entity_place(self, index: int) -> tuple[int, int] | None:
        """Line and column of ``entities[index]`` in a block-style list (one scan of the file, on
        first use); None for other layouts."""
        if self._items is None:
            from kqplan.manifest.items import entity_lines

            self._items = entity_lines(self.text)
        lines, column = self._items
        return (lines[index], column) if 0 <= index < len(lines) else None

    @classmethod
    def of(cls, path: str, text: str, file: str | None = None) -> SourceFile:
        return cls(path, text, file)

    @property
    def opened(self) -> str:
        """The path to open the file by (never :attr:`path`, which may be from elsewhere)."""
        return self.file if self.file is not None else self.path

    def span(self, loc: Loc, *, at_key: bool = False) -> Span:
        """Where ``loc`` is in the file (composes the text on first use)."""
        return self.locator.span(loc, at_key=at_key)

    @property
    def locator(self) -> Locator:
        """Created on first use: valid files never import pyyaml or compose their text."""
        if self._locator is None:
            from kqplan.manifest.positions import Locator

            self._locator = Locator(self.path, self.text)
        return self._locator


@dataclass(slots=True)
class LoadedManifest:
    source: SourceFile
    manifest: Manifest | ManifestHead
    """The document-level fields (the pydantic model only when the plain check could not tell)."""
    raw: dict[str, Any]
    """The parsed YAML, to tell an explicit ``user: null`` from a missing ``user``."""


@dataclass(slots=True)
class LoadedTests:
    """A ``kind: QuotaTests`` file: its tests (:mod:`kqplan.manifest.intent`), valid ones only."""

    source: SourceFile
    tests: list[QuotaTest]


@dataclass(slots=True)
class LoadResult:
    manifests: list[LoadedManifest | LoadedTests] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
