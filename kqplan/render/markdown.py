"""A plan as a Markdown PR comment: the summary, a table per change, the unmanaged entities and the
blast radius, kept under GitHub's comment size limit."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kqplan.core.plan import Action, Change, Plan
from kqplan.render.escape import markdown_code, markdown_text
from kqplan.render.text import (
    NO_CHANGES,
    budget_text,
    change_remarks,
    key_rows,
    plural,
    show_value,
    summary_line,
    target_of,
)

if TYPE_CHECKING:
    from kqplan.core.impact import Impact

MAX_COMMENT_CHARS = 60_000
"""GitHub refuses comments over 65 536 characters; the rest of the budget is headroom."""


def _key_table(plan: Plan) -> list[str]:
    """Adds / changes / deletes per quota key, deletes in bold: what a reviewer reads first."""
    counts: dict[str, list[int]] = {}
    for change in plan.changes:
        for marker, key, _, _ in key_rows(change):
            counts.setdefault(key, [0, 0, 0])["+~-".index(marker)] += 1
    rows = ["| quota key | add | change | delete |", "|---|---:|---:|---:|"]
    for key, (adds, updates, deletes) in sorted(counts.items()):
        rows.append(f"| {markdown_code(key, cell=True)} | {adds or ''} | {updates or ''} | "
                    f"{f'**{deletes}**' if deletes else ''} |")
    return rows


def _change_block(change: Change, brokers: int | None = None) -> list[str]:
    head = f"#### `{change.action.marker}` {markdown_code(change.display)} ({change.action.value})"
    if change.origin:
        head += f" — from {markdown_code(change.origin)}"
    for remark in change_remarks(change):
        head += f" — {markdown_text(remark)}"
    out = [head, "", "| | key | before | after |", "|---|---|---|---|"]
    for marker, key, old, new in key_rows(change):
        before = show_value(key, old) if old is not None else ""
        after = show_value(key, new) if new is not None else ""
        budget = budget_text(change, key, new, brokers)
        if budget is not None:
            after += f" ({markdown_text(budget)})"
        out.append(f"| `{marker}` | {markdown_code(key, cell=True)} | {before} | {after} |")
    return [*out, ""]


def _size(lines: list[str]) -> int:
    return sum(len(line) + 1 for line in lines)


def _fit(items: list[list[str]], budget: int, more: Callable[[int], str]) -> list[str]:
    """As many whole items (each a group of lines) as ``budget`` characters hold, in order, then
    ``more(n)`` for the ``n`` left out."""
    out: list[str] = []
    for i, item in enumerate(items):
        size = _size(item)
        if size > budget:
            return [*out, more(len(items) - i)]
        budget -= size
        out += item
    return out


UNMANAGED_MARKDOWN = 50
"""Unmanaged entities listed by name in the PR comment; the plan JSON has them all."""


def render_markdown(plan: Plan, *, max_chars: int = MAX_COMMENT_CHARS, artifact: str | None = None,
                    impact: Impact | None = None) -> str:
    """A PR comment: summary and per-key table first, deletes set apart, warnings inside, details in
    collapsible blocks, cut with a count (and a pointer to ``artifact``) to stay under ``max_chars``."""
    s = plan.summary
    everything = f"the plan artifact {markdown_code(artifact)}" if artifact else "`kqplan plan --format json`"
    if not plan.has_changes:
        out = ["### kqplan: no changes", "",
               f"{NO_CHANGES} {plural(plan.unchanged, 'entity', 'entities')} checked on "
               f"{markdown_text(target_of(plan))}.", ""]
    else:
        out = [f"### kqplan: {s.add} to add, {s.change} to change, {s.delete} to delete", "",
               f"On {markdown_text(target_of(plan))}; {s.unchanged} entities unchanged.", "",
               *_key_table(plan), ""]
    deletes = [c for c in plan.changes if c.action is Action.DELETE]
    if deletes:
        shown = ", ".join(markdown_code(c.display) for c in deletes[:20])
        more = f" and {len(deletes) - 20} more" if len(deletes) > 20 else ""
        out += ["> [!WARNING]", f"> **{plural(len(deletes), 'entity', 'entities')} will be "
                f"deleted:** {shown}{more}", ""]
    # Notes, blast radius and unmanaged entities each get a share of the comment, so that the
    # details keep room and no list (thousands of lint warnings, say) can push it over the limit.
    if plan.notes:
        out += ["> [!NOTE]", *_fit([[f"> - {markdown_text(n)}"] for n in plan.notes if n], max_chars // 4,
                                   lambda n: f"> - … and {plural(n, 'more note', 'more notes')} "
                                             f"(all of them are in {everything}, `notes`)"), ""]
    if impact is not None:
        out += _impact_lines(impact, max_chars // 6)
    if plan.unmanaged:
        n = len(plan.unmanaged)
        listed = _fit([[f"- {markdown_code(e.display)}"] for e, _ in plan.unmanaged[:UNMANAGED_MARKDOWN]],
                      max_chars // 8, lambda _: "")
        if len(listed) < n:
            listed = [*filter(None, listed), f"- … the plan JSON lists all {n} (`unmanaged`)"]
        out += [f"<details><summary>{plural(n, 'entity', 'entities')} on the cluster "
                f"{'is' if n == 1 else 'are'} not managed by these manifests</summary>", "",
                *listed, "", "</details>", ""]
    tail = ["", summary_line(s)] if plan.has_changes else []
    budget = max_chars - _size(out + tail) - 400  # room for the cut notice
    groups = [(f"Deletes ({len(deletes)})", deletes),
              (f"Adds and changes ({len(plan.changes) - len(deletes)})",
               [c for c in plan.changes if c.action is not Action.DELETE])]
    hidden = 0
    for title, changes in groups:
        if not changes:
            continue
        block = [f"<details><summary>{title}</summary>", ""]
        for change in changes:
            lines = _change_block(change, plan.cluster.brokers)
            size = _size(lines)
            if budget - size < 0:
                hidden += 1
                continue
            budget -= size
            block += lines
        out += [*block, "</details>", ""]
    if hidden:
        out.append(f"**{hidden} more changes are not shown here** (comment size limit); "
                   f"see every change in {everything}.")
    return _cap("\n".join(out + tail).rstrip("\n") + "\n", max_chars)


def _cap(text: str, max_chars: int) -> str:
    """The last guard of the size limit (only very long entity names get here): cut at a line."""
    if len(text) <= max_chars:
        return text
    notice = "\n**This comment was cut at the size limit**; the plan JSON has everything.\n"
    cut = text[: max(0, max_chars - len(notice) - 40)].rsplit("\n", 1)[0]
    unclosed = cut.count("<details>") - cut.count("</details>")
    return cut + "\n" + "</details>\n" * max(0, unclosed) + notice


def _impact_lines(impact: Impact, budget: int) -> list[str]:
    """The --principals blast radius as a Markdown table: principals that lose a limit first."""
    out = [f"**Blast radius:** {markdown_text(impact.summary.line)}", ""]
    if not impact.principals:
        return out
    ordered = sorted(impact.principals, key=lambda p: not p.loses_limit)
    rows = [[f"| {markdown_code(item.entity.display, cell=True)} | {markdown_code(k.key, cell=True)} | "
             f"{markdown_text(k.before.show())} | {markdown_text(k.after.show())} |" for k in item.keys]
            for item in ordered]
    table = _fit(rows, budget, lambda n: f"\n… and {plural(n, 'more principal', 'more principals')}.")
    return [*out, "| principal | key | before | after |", "|---|---|---|---|", *table, ""]
