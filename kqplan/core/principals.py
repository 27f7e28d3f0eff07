"""The principals of ``plan --principals``, parsed from a file's text (the file is read by
:func:`kqplan.pipeline.inputs.read_principals`): the (user, client-id) pairs that connect.

Two forms, told apart by the first non-blank character: CSV (``user,client-id`` header
optional) or JSON lines (``{"user": "alice", "client-id": "app"}``). Names are the ones
Kafka sees — the principal name without ``User:``, the client-id as sent — so ``<default>``
here is a real name, and an empty client-id means the client sent none (reference §4.1).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kqplan.core.diagnostics import Diagnostic, DiagnosticsError, Span, did_you_mean
from kqplan.core.errors import KqplanError

CODE = "KQP180"
"""Diagnostic code of every problem in a principals file."""
HEADER = ("user", "client-id")
_MAX_PROBLEMS = 20  # a file in the wrong format would otherwise give one error per line


@dataclass(frozen=True, slots=True, order=True)
class Principal:
    """A connection's identity: principal name (never empty) and client-id (may be empty)."""

    user: str
    client_id: str


class _Problems:
    def __init__(self, path: str) -> None:
        self.path = path
        self.found: list[Diagnostic] = []

    def add(self, line: int, message: str, hint: str) -> None:
        self.found.append(Diagnostic(CODE, message, Span(self.path, line, 1), hint=hint))

    @property
    def full(self) -> bool:
        return len(self.found) >= _MAX_PROBLEMS


def _check(user: Any, client_id: Any, line: int, problems: _Problems) -> Principal | None:
    if not isinstance(user, str) or not user:
        problems.add(line, "user is empty or not a string",
                     "every connection has a principal name (ANONYMOUS without authentication)")
        return None
    if not isinstance(client_id, str):
        problems.add(line, "client-id is not a string",
                     'write "" for a client that sends no client-id')
        return None
    return Principal(user, client_id)


def _csv_rows(text: str, problems: _Problems) -> Iterator[Principal]:
    reader = csv.reader(io.StringIO(text, newline=""))
    for row in reader:
        line = reader.line_num
        if not row or (len(row) == 1 and not row[0].strip()):
            continue  # blank line
        if line == 1 and tuple(c.strip().lower() for c in row) == HEADER:
            continue
        if len(row) != 2:
            problems.add(line, f"expected 2 columns (user,client-id), found {len(row)}",
                         "quote names that contain commas: \"a,b\",app")
        elif (found := _check(row[0], row[1], line, problems)) is not None:
            yield found
        if problems.full:
            return


def _json_rows(text: str, problems: _Problems) -> Iterator[Principal]:
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            doc = json.loads(raw)
        except json.JSONDecodeError as exc:
            problems.add(line, f"not JSON: {exc.msg}",
                         'one object per line: {"user": "alice", "client-id": "app"}')
            doc = None
        if doc is not None and not isinstance(doc, dict):
            problems.add(line, "not a JSON object",
                         'one object per line: {"user": "alice", "client-id": "app"}')
        elif isinstance(doc, dict):
            missing = [k for k in HEADER if k not in doc]
            if missing:
                guess = did_you_mean(missing[0], [k for k in doc if isinstance(k, str)])
                problems.add(line, f"missing \"{missing[0]}\"",
                             f"did you mean \"{missing[0]}\" for \"{guess}\"?" if guess else
                             'each object needs "user" and "client-id" ("" for none)')
            elif (found := _check(doc["user"], doc["client-id"], line, problems)) is not None:
                yield found
        if problems.full:
            return


def parse_principals(text: str, *, source: str) -> list[Principal]:
    """Principals in file order, duplicates dropped; DiagnosticsError naming ``source:line``."""
    problems = _Problems(source)
    stripped = text.lstrip("\ufeff")
    rows = _json_rows if stripped.lstrip().startswith("{") else _csv_rows
    found = list(dict.fromkeys(rows(stripped, problems)))
    if problems.found:
        raise DiagnosticsError(problems.found)
    if not found:
        raise KqplanError(f"{source}: no principals found",
                          hint="write one `user,client-id` pair per line")
    return found
