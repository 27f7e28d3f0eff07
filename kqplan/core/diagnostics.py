"""Diagnostics: located problems in user input, collected and rendered the way ruff does.

``path:line:col: error[KQP102] entity {user=a} is listed twice`` then ``= note:`` and
``= help:`` lines. Codes are stable, each explained on its page (:func:`doc_url`); tests assert
whole rendered strings. The concise text form lives here (it is the message of
:class:`DiagnosticsError`); the JSON and GitHub forms are views, in :mod:`kqplan.render.diagnostics`.
A problem found in parsed data starts as a :class:`Pending` (a data path) and is placed by
:func:`locate`.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from kqplan.core.entity import visible
from kqplan.core.errors import KqplanError


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, slots=True)
class Span:
    path: str
    line: int  # 1-based; 0 when the problem is the whole file
    column: int  # 1-based

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.column}" if self.line else self.path


@dataclass(frozen=True, slots=True)
class Related:
    """Secondary location, e.g. where a duplicate was first listed."""

    span: Span
    message: str


@dataclass(frozen=True, slots=True)
class Diagnostic:
    code: str
    message: str
    span: Span
    severity: Severity = Severity.ERROR
    hint: str | None = None
    related: tuple[Related, ...] = field(default=())

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR


class DiagnosticsError(KqplanError):
    """Raised when input has errors; carries every diagnostic found (errors and warnings)."""

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        self.diagnostics = tuple(diagnostics)
        errors = sum(d.is_error for d in self.diagnostics)
        super().__init__(render_text(self.diagnostics) + f"\nFound {errors} error(s).")


DOCS = "https://kqplan.dev/diagnostics/"
"""Where each code's page is published (mkdocs.yml's ``site_url``; the pages are
``docs/diagnostics/KQPnnn.md``)."""


def doc_url(code: str) -> str:
    """The page that explains ``code``, its rule, an example and the fix (mkdocs' directory URLs:
    ``docs/diagnostics/KQP110.md`` is served at ``…/diagnostics/KQP110/``)."""
    return f"{DOCS}{code}/"


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """The closest valid spelling, for hints on typos."""
    matches = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return matches[0] if matches else None


def sort_key(d: Diagnostic) -> tuple[str, int, int, str]:
    return (d.span.path, d.span.line, d.span.column, d.code)


def render_text(diagnostics: Iterable[Diagnostic]) -> str:
    """Concise, grep- and editor-clickable form: one line per diagnostic, note and help. A file name
    or a message echoing manifest text (an unknown key, a name) may hold any character: each line is
    written :func:`~kqplan.core.entity.visible`, so none can forge another line or move text."""
    lines: list[str] = []
    for d in diagnostics:
        lines.append(visible(f"{d.span}: {d.severity.value}[{d.code}] {d.message}"))
        lines.extend(visible(f"  = note: {r.message} at {r.span}") for r in d.related)
        if d.hint:
            lines.append(visible(f"  = help: {d.hint}"))
    return "\n".join(lines)


Loc = tuple[str | int, ...]
"""A place in a parsed document as a data path: mapping keys and list indexes."""


class Source(Protocol):
    """A file whose data paths can be turned into line and column (a manifest file: the
    manifest package's ``SourceFile`` composes its text on first use)."""

    @property
    def path(self) -> str:
        """The file as output shows it (from the repository root)."""
        ...

    @property
    def opened(self) -> str:
        """The file as it is opened (relative to the current directory, or absolute)."""
        ...

    def span(self, loc: Loc, *, at_key: bool = False) -> Span:
        """The line and column of ``loc`` (of its key when ``at_key``)."""
        ...

    def entity_place(self, index: int) -> tuple[int, int] | None:
        """Line and column of ``entities[index]``, when found by a scan of the text."""
        ...


@dataclass(frozen=True, slots=True)
class Pending:
    """A diagnostic whose position is still a data path; :func:`locate` places it."""

    code: str
    message: str
    loc: Loc
    at_key: bool = False
    hint: str | None = None
    severity: Severity = Severity.ERROR
    related: tuple[tuple[Source, Loc, str], ...] = ()


def locate(source: Source, pending: Pending) -> Diagnostic:
    """Turn a pending diagnostic into a located one (a manifest file is composed on first use)."""
    return Diagnostic(
        code=pending.code,
        message=pending.message,
        span=source.span(pending.loc, at_key=pending.at_key),
        severity=pending.severity,
        hint=pending.hint,
        # A related place named by a mapping key (a profile, a field) points at the key.
        related=tuple(Related(s.span(loc, at_key=bool(loc) and isinstance(loc[-1], str)), msg)
                      for s, loc, msg in pending.related),
    )
