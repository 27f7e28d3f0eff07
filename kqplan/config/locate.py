"""Where a problem in ``kqplan.toml`` is: a data path turned into line and column, and the
located KQP190 diagnostic the reader and the schema both raise."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from pathlib import Path

from kqplan.config.model import CONFIG_ERROR
from kqplan.core.diagnostics import Diagnostic, Span

_BARE = re.compile(r"[A-Za-z0-9_-]+")
_BASIC = re.compile(r'"(?:[^"\\\n]|\\.)*"')


def _key(text: str) -> tuple[str, str] | None:
    """The first simple key of ``text`` (bare, "basic" with escapes, 'literal') and what follows."""
    if text.startswith('"'):
        m = _BASIC.match(text)
        if m is None:
            return None
        try:
            value = tomllib.loads(f"k = {m.group()}")["k"]
        except tomllib.TOMLDecodeError:
            return None
        return str(value), text[m.end():]
    if text.startswith("'"):
        end = text.find("'", 1)
        return None if end < 0 else (text[1:end], text[end + 1:])
    m = _BARE.match(text)
    return None if m is None else (m.group(), text[m.end():])


def dotted_key(text: str) -> tuple[list[str], str] | None:
    """A TOML dotted key at the start of ``text`` (``clusters."../evil".id``) as its parts, and
    the rest of the line; None when ``text`` does not start with one."""
    parts: list[str] = []
    rest = text
    while True:
        found = _key(rest.lstrip(" \t"))
        if found is None:
            return None
        part, rest = found
        parts.append(part)
        rest = rest.lstrip(" \t")
        if not rest.startswith("."):
            return parts, rest
        rest = rest[1:]


def _locate(text: str, loc: Sequence[str | int]) -> tuple[int, int]:
    """Line and column of a TOML key path: the key's own line, else the nearest table header or
    key above it (the longest match: ``[clusters.a]`` rather than a later ``[clusters]``)."""
    keys = [str(p) for p in loc]
    best, depth = (1, 1), 0
    table: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line.startswith("["):
            header = dotted_key(line.lstrip("[").lstrip(" \t"))
            if header is None or not header[1].startswith("]"):
                continue
            table = header[0]
            if keys[:len(table)] == table and len(table) >= depth:
                best, depth = (number, raw.index("[") + 1), len(table)
            continue
        found = dotted_key(line)
        if found is None or not found[1].startswith("="):
            continue
        path = [*table, *found[0]]
        if keys[:len(path)] == path and len(path) >= depth:
            best, depth = (number, raw.index(line[0]) + 1), len(path)
            if len(path) >= len(keys):
                return best
    return best


def config_error(path: Path, text: str, loc: Sequence[str | int], message: str,
                  hint: str | None = None, *, code: str = CONFIG_ERROR) -> Diagnostic:
    line, col = _locate(text, loc)
    return Diagnostic(code, message, Span(str(path), line, col), hint=hint)


def where(loc: Sequence[str | int]) -> str:
    return ".".join(str(p) for p in loc) or "(top level)"
