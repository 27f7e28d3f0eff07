"""A plan as GitHub Actions workflow commands: a notice per change at the manifest entry that
asks for it, lint warnings as warnings, and the summary (``plan --format github``)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from kqplan.core.diagnostics import Diagnostic
from kqplan.core.plan import Plan
from kqplan.core.units import format_number
from kqplan.render.diagnostics import render_github
from kqplan.render.escape import github_data, github_property
from kqplan.render.text import summary_line

_ORIGIN = re.compile(r"^(?P<file>.+?)(?::(?P<line>\d+):(?P<col>\d+))?(?: \(overrides .*\))?$", re.DOTALL)


def render_plan_github(plan: Plan, warnings: Sequence[Diagnostic] = ()) -> str:
    """One ``::notice`` per change (located when its origin is known), then warnings and summary."""
    lines: list[str] = []
    for change in plan.changes:
        ops = ", ".join(f"{op.key} removed" if op.value is None else f"{op.key}={format_number(op.value)}"
                        for op in change.ops)
        where = ""
        found = _ORIGIN.match(change.origin or "")
        if found:
            where = f",file={github_property(found['file'])}"
            if found["line"]:
                where += f",line={found['line']},col={found['col']}"
        level = "warning" if change.action.value == "delete" else "notice"
        lines.append(f"::{level} title=kqplan {github_property(change.action.value)}{where}::"
                     f"{github_data(change.action.marker + ' ' + change.display + ': ' + ops)}")
    if warnings:
        lines.append(render_github(warnings))
    for note in plan.notes:
        lines.append(f"::notice title=kqplan note::{github_data(note)}")
    if plan.unmanaged:
        lines.append(f"::warning title=kqplan unmanaged::{len(plan.unmanaged)} entities on the cluster are "
                     "not managed by these manifests")
    lines.append(f"::notice title=kqplan plan::{github_data(summary_line(plan.summary))}")
    return "\n".join(lines) + "\n"
