"""Diagnostics: located problems in user input, collected and rendered the way ruff does.

``path:line:col: error[KQP102] entity {user=a} is listed twice`` then ``= note:`` and
``= help:`` lines; also JSON and GitHub-annotation forms. Codes are stable and documented
in the README; tests assert whole rendered strings.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from kqplan.errors import KqplanError


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


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """The closest valid spelling, for hints on typos."""
    matches = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return matches[0] if matches else None


def sort_key(d: Diagnostic) -> tuple[str, int, int, str]:
    return (d.span.path, d.span.line, d.span.column, d.code)


def render_text(diagnostics: Iterable[Diagnostic]) -> str:
    """Concise, grep- and editor-clickable form."""
    lines: list[str] = []
    for d in diagnostics:
        lines.append(f"{d.span}: {d.severity.value}[{d.code}] {d.message}")
        lines.extend(f"  = note: {r.message} at {r.span}" for r in d.related)
        if d.hint:
            lines.append(f"  = help: {d.hint}")
    return "\n".join(lines)


def render_json(diagnostics: Iterable[Diagnostic]) -> str:
    return json.dumps(
        [
            {
                "code": d.code,
                "severity": d.severity.value,
                "message": d.message,
                "filename": d.span.path,
                "location": {"row": d.span.line, "column": d.span.column},
                "hint": d.hint,
                "related": [
                    {"message": r.message, "filename": r.span.path,
                     "location": {"row": r.span.line, "column": r.span.column}}
                    for r in d.related
                ],
            }
            for d in diagnostics
        ],
        indent=2,
        ensure_ascii=False,
    )


def _gh_escape(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def render_github(diagnostics: Iterable[Diagnostic]) -> str:
    """GitHub Actions workflow commands: each becomes an annotation on the PR."""
    out = []
    for d in diagnostics:
        level = "error" if d.is_error else "warning"
        text = d.message + (f" (help: {d.hint})" if d.hint else "")
        out.append(
            f"::{level} title=kqplan {d.code},file={d.span.path},line={max(d.span.line, 1)},"
            f"col={max(d.span.column, 1)}::{_gh_escape(text)}"
        )
    return "\n".join(out)
