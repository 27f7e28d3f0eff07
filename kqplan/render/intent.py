"""``kqplan test``'s three forms: text (a line per test, each failure as a located error), JSON (every
test and every miss as data) and GitHub workflow commands (an annotation per failure at its test)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from kqplan.core.diagnostics import Diagnostic, render_text
from kqplan.core.entity import visible
from kqplan.core.intent import NEEDS_BROKERS, TEST_FAILS, Miss, Verdict
from kqplan.core.resolve import UNNAMED
from kqplan.render.diagnostics import render_github as github_annotations
from kqplan.render.escape import github_data

FORMAT_VERSION = 1


def _counts(verdicts: Sequence[Verdict]) -> tuple[int, int, int]:
    """How many tests hold, fail, and cannot be judged offline."""
    held = sum(v.holds for v in verdicts)
    unknown = sum(v.unknown for v in verdicts)
    return held, len(verdicts) - held - unknown, unknown


def _summary(verdicts: Sequence[Verdict], judged: str) -> str:
    held, failed, unknown = _counts(verdicts)
    parts = [f"{held} hold", f"{failed} fail"] + ([f"{unknown} cannot be judged offline"] if unknown else [])
    return f"Tests: {', '.join(parts)} (of {len(verdicts)}), judged on {judged}."


def render_tests_text(verdicts: Sequence[Verdict], failures: Sequence[Diagnostic], judged: str) -> str:
    lines = []
    for verdict in verdicts:
        mark = "holds" if verdict.holds else ("unknown" if verdict.unknown else "FAILS")
        lines.append(visible(f"{mark:<7} {verdict.test.name}  ({verdict.test.span()})"))
    if failures:
        lines += ["", render_text(failures)]
    lines.append(_summary(verdicts, judged))
    return "\n".join(lines) + "\n"


def _miss(miss: Miss) -> dict[str, Any]:
    expectation = miss.expectation
    return {
        "key": expectation.key,
        "why": miss.why.value,
        "expected": {"bound": expectation.bound.value, "value": expectation.value},
        "value": miss.value,
        "source": miss.supplier.to_json() if miss.supplier is not None else None,
        # the client-id a test without one was found failing for: "" none sent, null any other
        "client_id": None if miss.client_id == UNNAMED else miss.client_id,
        "connection": miss.context,
    }


def render_json(verdicts: Sequence[Verdict], failures: Sequence[Diagnostic], judged: str) -> str:
    tests = []
    for verdict in verdicts:
        test = verdict.test
        span = test.span()
        tests.append({
            "name": test.name,
            "filename": span.path,
            "location": {"row": span.line, "column": span.column},
            "result": "holds" if verdict.holds else ("unknown" if verdict.unknown else "fails"),
            "code": None if verdict.holds else (NEEDS_BROKERS if verdict.unknown else TEST_FAILS),
            "misses": [_miss(m) for m in verdict.misses],
        })
    held, failed, unknown = _counts(verdicts)
    doc = {"format_version": FORMAT_VERSION, "judged": judged, "tests": tests,
           "summary": {"tests": len(verdicts), "hold": held, "fail": failed, "unknown": unknown}}
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def render_github(verdicts: Sequence[Verdict], failures: Sequence[Diagnostic], judged: str) -> str:
    lines = [github_annotations(failures)] if failures else []
    level = "error" if failures else "notice"
    lines.append(f"::{level} title=kqplan test::{github_data(_summary(verdicts, judged))}")
    return "\n".join(lines) + "\n"
