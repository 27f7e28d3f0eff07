"""fleet rightsize's proposals as Markdown (``proposals.md``, ``--format markdown``): a row per
cluster, then a table of changes per cluster.

The fleet package computes the values (counts, rates, the values now and proposed) and hands them
over as plain text and numbers (:class:`ProposalsView`); this view lays them out and escapes every
one for where it lands: cluster names, entity names and keys as code, the rest as table cells
(:mod:`kqplan.render.escape`), so no name or error can add a row, a column or a comment.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from kqplan.render.escape import markdown_cell, markdown_code, markdown_text

SUMMARY_COLUMNS = ("principals", "raise", "lower", "limit", "pin", "keep", "hold", "entities")
"""The counts of a cluster's row, in this order (``hold``: lowerings held back on too few samples)."""

ChangeRow = tuple[str, int, str, str, str, str, str, str, str, str]
"""entity, principals, key, the statistic, samples, windows, need, now, proposal, action."""


class ProposalsView(Protocol):
    """What the tables show. ``clusters``: (name, counts in :data:`SUMMARY_COLUMNS` order or None
    when it failed, error); ``changes``: (cluster, rows of (entity, principals, key, stat, samples,
    windows, need, now, proposal, action), how many more there are than rows)."""

    @property
    def stat(self) -> str: ...

    @property
    def rules(self) -> str: ...

    @property
    def clusters(self) -> Sequence[tuple[str, Sequence[int] | None, str | None]]: ...

    @property
    def changes(self) -> Sequence[tuple[str, Sequence[ChangeRow], int]]: ...


def _row(cells: Sequence[str]) -> str:
    """A table row of escaped cells (an empty one as ``| |``)."""
    return "|" + "".join(f" {cell} |" if cell else " |" for cell in cells)


def _change_row(row: ChangeRow) -> str:
    entity, members, key, stat, samples, windows, need, now, proposal, action = row
    return _row([markdown_code(entity, cell=True), str(members), markdown_code(key, cell=True),
                 *(markdown_cell(text) for text in (stat, samples, windows, need, now, proposal, action))])


def render_markdown(view: ProposalsView) -> str:
    """The PR-comment summary (the changes of ``view``, however many it holds)."""
    lines = ["### kqplan fleet rightsize", "", markdown_text(view.rules), "",
             "| cluster | " + " | ".join(SUMMARY_COLUMNS) + " | error |",
             "|---|" + "---:|" * len(SUMMARY_COLUMNS) + "---|"]
    for cluster, counts, error in view.clusters:
        shown = [str(n) for n in counts] if counts is not None else [""] * len(SUMMARY_COLUMNS)
        lines.append(_row([markdown_code(cluster, cell=True), *shown,
                           markdown_cell(error) if error is not None else ""]))
    for cluster, rows, more in view.changes:
        if not rows and not more:
            continue
        lines += ["", f"#### {markdown_code(cluster)}", "",
                  f"| entity | principals | key | {markdown_cell(view.stat)} "
                  "| samples | windows | need | now | proposal | action |",
                  "|---|---:|---|---:|---:|---:|---:|---|---:|---|"]
        lines += [_change_row(row) for row in rows]
        if more:
            lines.append(f"\n… and {more} more in `proposals.md`.")
    return "\n".join(lines) + "\n"
