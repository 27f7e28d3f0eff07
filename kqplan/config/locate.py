"""Where a problem in ``kqplan.toml`` is: a data path turned into line and column, and the
located KQP190 diagnostic the reader and the schema both raise."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kqplan.config.model import CONFIG_ERROR
from kqplan.core.diagnostics import Diagnostic, Span


def _locate(text: str, loc: Sequence[str | int]) -> tuple[int, int]:
    """Line and column of a TOML key path: the key's own line, else its table header."""
    keys = [str(p) for p in loc]
    best = (1, 1)
    table: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line.startswith("["):
            table = [p.strip().strip('"') for p in line.strip("[]").split(".")]
            if keys[:len(table)] == table:
                best = (number, raw.index("[") + 1)
            continue
        name = line.split("=", 1)[0].strip().strip('"') if "=" in line else None
        if name is None:
            continue
        path = [*table, *[p.strip().strip('"') for p in name.split(".")]]
        if keys[:len(path)] == path:
            best = (number, raw.index(line[0]) + 1)
            if len(path) >= len(keys):
                return best
    return best


def config_error(path: Path, text: str, loc: Sequence[str | int], message: str,
                  hint: str | None = None) -> Diagnostic:
    line, col = _locate(text, loc)
    return Diagnostic(CONFIG_ERROR, message, Span(str(path), line, col), hint=hint)


def where(loc: Sequence[str | int]) -> str:
    return ".".join(str(p) for p in loc) or "(top level)"
