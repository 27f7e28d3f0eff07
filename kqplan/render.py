"""Views of a plan: text (terraform's markers), Markdown for PR comments, and JSON.

Renderers only read the plan. The markers and the summary line are built here once, from
``Action.marker`` and ``Plan.summary``, so the three formats cannot disagree.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import StrEnum
from typing import TYPE_CHECKING

from kqplan.plan import Action, Change, ClusterRef, Plan, Summary, same_value
from kqplan.planfile import dumps_plan
from kqplan.quotas import QUOTA_KEYS
from kqplan.units import format_bytes, format_number

if TYPE_CHECKING:
    from kqplan.apply import ApplyReport
    from kqplan.impact import Impact

NO_CHANGES = "No changes. The cluster matches the manifests."


class Format(StrEnum):
    TEXT = "text"
    MARKDOWN = "markdown"
    JSON = "json"


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def summary_line(s: Summary) -> str:
    return f"Plan: {s.add} to add, {s.change} to change, {s.delete} to delete."


def show_value(key: str, value: float | None) -> str:
    """``1048576 (1 MiB)`` for byte rates, the plain number otherwise."""
    if value is None:
        return "(none)"
    text = format_number(value)
    spec = QUOTA_KEYS.get(key)
    human = format_bytes(value) if spec is not None and spec.bytes_per_second else None
    return f"{text} ({human})" if human else text


def _rows(change: Change) -> list[tuple[str, str, float | None, float | None]]:
    """(marker, key, before, after) for every key that differs, in key order."""
    before = change.before or {}
    rows: list[tuple[str, str, float | None, float | None]] = []
    for op in change.ops:
        if op.value is None:
            rows.append(("-", op.key, before.get(op.key), None))
        elif op.key in before:
            rows.append(("~", op.key, before[op.key], op.value))
        else:
            rows.append(("+", op.key, None, op.value))
    return rows


def target_line(cluster: ClusterRef) -> str:
    """``cluster ID (ADDRESS), Kafka >=3.9 (zookeeper)``: which cluster, and what kqplan knows of it."""
    where = f"cluster {cluster.id or 'unknown id'} ({cluster.address})"
    if cluster.version:
        where += f", Kafka {cluster.version}"
    if cluster.mode:
        where += f" ({cluster.mode})"
    return where


def _target(plan: Plan) -> str:
    return target_line(plan.cluster)


_COLORS = {"+": "\x1b[32m", "~": "\x1b[33m", "-": "\x1b[31m"}
_RESET = "\x1b[0m"
UNMANAGED_SHOWN = 10
"""Unmanaged entities listed by name in text and Markdown; JSON has them all."""


def _paint(marker: str, text: str, color: bool) -> str:
    """terraform's colours for the markers: green create, yellow update, red delete."""
    return f"{_COLORS[marker]}{text}{_RESET}" if color and marker in _COLORS else text


def unmanaged_lines(plan: Plan, *, limit: int = UNMANAGED_SHOWN) -> list[str]:
    """The "not managed by these manifests" section: count, then the first entities."""
    if not plan.unmanaged:
        return []
    n = len(plan.unmanaged)
    lines = [f"{n} entit{'y' if n == 1 else 'ies'} on the cluster {'is' if n == 1 else 'are'} not managed "
             "by these manifests (left untouched; adopt with `kqplan import`):"]
    lines += [f"  ? {entity.display}" for entity, _ in plan.unmanaged[:limit]]
    if n > limit:
        lines.append(f"  … and {n - limit} more (--format json lists every one)")
    return lines


def render_text(plan: Plan, *, color: bool = False) -> str:
    lines: list[str] = []
    unmanaged = unmanaged_lines(plan)
    if not plan.has_changes:
        checked = _plural(plan.unchanged, "entity", "entities")
        lines.append(f"{NO_CHANGES} ({checked} checked on {_target(plan)})")
        lines.extend(plan.notes)
        if unmanaged:
            lines += ["", *unmanaged]
        return "\n".join(lines) + "\n"
    lines.append(f"kqplan will perform the following actions on {_target(plan)}:")
    lines.append("")
    for change in plan.changes:
        marker = change.action.marker
        head = f"  {_paint(marker, marker, color)} {change.display}"
        if change.origin is not None:
            head += f"  # {change.origin}"
        lines.append(head)
        for mark, key, old, new in _rows(change):
            sign = _paint(mark, mark, color)
            if mark == "~":
                lines.append(f"      {sign} {key} = {show_value(key, old)} -> {show_value(key, new)}")
            elif mark == "+":
                lines.append(f"      {sign} {key} = {show_value(key, new)}")
            else:
                lines.append(f"      {sign} {key} = {show_value(key, old)}")
        lines.append("")
    lines.extend(plan.notes)
    if unmanaged:
        lines += [*unmanaged, ""]
    lines.append(summary_line(plan.summary))
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    """Escape what would end a Markdown table cell."""
    return text.replace("|", "\\|")


def _code(text: str, *, cell: bool = False) -> str:
    """``text`` as an inline code span, exactly: a fence longer than any run of backticks in it (a
    name with a backtick must not show as another name), pipes escaped inside a table ``cell``."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if longest else ""
    return f"{fence}{pad}{_md(text) if cell else text}{pad}{fence}"


def _text(text: str) -> str:
    """Plain Markdown text outside code spans: GitHub would drop ``<default>`` as an unknown HTML tag
    (and ``</details>`` in a name would end a block), and turn ``@name`` into a mention."""
    return _md(text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("@", "&#64;"))


MAX_COMMENT_CHARS = 60_000
"""GitHub refuses comments over 65 536 characters; the rest of the budget is headroom."""


def _key_table(plan: Plan) -> list[str]:
    """Adds / changes / deletes per quota key, deletes in bold: what a reviewer reads first."""
    counts: dict[str, list[int]] = {}
    for change in plan.changes:
        for marker, key, _, _ in _rows(change):
            counts.setdefault(key, [0, 0, 0])["+~-".index(marker)] += 1
    rows = ["| quota key | add | change | delete |", "|---|---:|---:|---:|"]
    for key, (adds, updates, deletes) in sorted(counts.items()):
        rows.append(f"| {_code(key, cell=True)} | {adds or ''} | {updates or ''} | "
                    f"{f'**{deletes}**' if deletes else ''} |")
    return rows


def _change_block(change: Change) -> list[str]:
    head = f"#### `{change.action.marker}` {_code(change.display)} ({change.action.value})"
    if change.origin:
        head += f" — from {_code(change.origin)}"
    out = [head, "", "| | key | before | after |", "|---|---|---|---|"]
    for marker, key, old, new in _rows(change):
        before = show_value(key, old) if old is not None else ""
        after = show_value(key, new) if new is not None else ""
        out.append(f"| `{marker}` | {_code(key, cell=True)} | {before} | {after} |")
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
    everything = f"the plan artifact {_code(artifact)}" if artifact else "`kqplan plan --format json`"
    if not plan.has_changes:
        out = ["### kqplan: no changes", "",
               f"{NO_CHANGES} {_plural(plan.unchanged, 'entity', 'entities')} checked on "
               f"{_text(_target(plan))}.", ""]
    else:
        out = [f"### kqplan: {s.add} to add, {s.change} to change, {s.delete} to delete", "",
               f"On {_text(_target(plan))}; {s.unchanged} entities unchanged.", "", *_key_table(plan), ""]
    deletes = [c for c in plan.changes if c.action is Action.DELETE]
    if deletes:
        shown = ", ".join(_code(c.display) for c in deletes[:20])
        more = f" and {len(deletes) - 20} more" if len(deletes) > 20 else ""
        out += ["> [!WARNING]", f"> **{_plural(len(deletes), 'entity', 'entities')} will be "
                f"deleted:** {shown}{more}", ""]
    # Notes, blast radius and unmanaged entities each get a share of the comment, so that the
    # details keep room and no list (thousands of lint warnings, say) can push it over the limit.
    if plan.notes:
        out += ["> [!NOTE]", *_fit([[f"> - {_text(n)}"] for n in plan.notes], max_chars // 4,
                                   lambda n: f"> - … and {_plural(n, 'more note', 'more notes')} "
                                             f"(all of them are in {everything}, `notes`)"), ""]
    if impact is not None:
        out += _impact_lines(impact, max_chars // 6)
    if plan.unmanaged:
        n = len(plan.unmanaged)
        listed = _fit([[f"- {_code(e.display)}"] for e, _ in plan.unmanaged[:UNMANAGED_MARKDOWN]],
                      max_chars // 8, lambda _: "")
        if len(listed) < n:
            listed = [*filter(None, listed), f"- … the plan JSON lists all {n} (`unmanaged`)"]
        out += [f"<details><summary>{_plural(n, 'entity', 'entities')} on the cluster "
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
            lines = _change_block(change)
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
    out = [f"**Blast radius:** {_text(impact.summary.line)}", ""]
    if not impact.principals:
        return out
    ordered = sorted(impact.principals, key=lambda p: not p.loses_limit)
    rows = [[f"| {_code(item.entity.display, cell=True)} | {_code(k.key, cell=True)} | "
             f"{_text(k.before.show())} | {_text(k.after.show())} |" for k in item.keys] for item in ordered]
    table = _fit(rows, budget, lambda n: f"\n… and {_plural(n, 'more principal', 'more principals')}.")
    return [*out, "| principal | key | before | after |", "|---|---|---|---|", *table, ""]


def render_json(plan: Plan) -> str:
    return dumps_plan(plan)


RENDERERS: dict[Format, Callable[[Plan], str]] = {
    Format.TEXT: render_text,
    Format.MARKDOWN: render_markdown,
    Format.JSON: render_json,
}



# -- apply reports ------------------------------------------------------------------------------

_SHOW_ALL_UP_TO = 1000  # past this many entities, only the ones needing attention are listed


def render_apply(report: ApplyReport, *, color: bool = False) -> str:
    """Per-entity results, then a terraform-style closing line; ``color``: the markers as in plans,
    and what did not apply in red."""
    from kqplan.apply import Status
    from kqplan.cluster.base import error_name

    lines: list[str] = []
    outcomes = report.outcomes
    show_all = len(outcomes) <= _SHOW_ALL_UP_TO
    hidden = 0
    for o in outcomes:
        if o.status is Status.APPLIED and not show_all:
            hidden += 1
            continue
        marker = o.change.action.marker
        status = o.status.value if o.ok else _paint("-", o.status.value, color)
        text = f"  {_paint(marker, marker, color)} {o.change.display}: {status}"
        if o.error_code:
            text += f": {error_name(o.error_code)}: {o.error_message or ''}".rstrip(": ")
        elif o.status is Status.UNVERIFIED:
            text += " (the broker accepted it, but describe did not show it before the deadline)"
        elif o.status is Status.UNKNOWN:
            text += (" (the answer to the alter was lost and describe does not show the change: it "
                     "may still land; run `kqplan plan` to see)")
        elif o.status is Status.STORED_DIFFERENTLY and o.stored is not None:
            asked = o.change.after or {}
            text += ": " + ", ".join(f"{k}={format_number(o.stored[k])} (asked {format_number(asked[k])})"
                                     for k in sorted(asked) if k in o.stored
                                     and not same_value(o.stored[k], asked[k]))
        lines.append(text)
    if hidden:
        lines.append(f"  … and {hidden} more applied (the --report file lists every entity)")
    lines.extend(report.notes)
    if report.preflight_failed:
        failed = report.count(Status.FAILED)
        lines.append(f"Apply refused by the broker's validation: {failed} entit"
                     f"{'y' if failed == 1 else 'ies'} failed; nothing was changed.")
    elif report.ok:
        counts = {a: sum(o.change.action is a for o in outcomes) for a in Action}
        lines.append(f"Apply complete: {counts[Action.CREATE]} added, {counts[Action.UPDATE]} "
                     f"changed, {counts[Action.DELETE]} deleted.")
    else:
        applied = report.count(Status.APPLIED)
        problems = ", ".join(f"{report.count(s)} {s.value}" for s in Status
                             if s is not Status.APPLIED and report.count(s))
        advice = ("Run apply again to converge." if not report.count(Status.STORED_DIFFERENTLY) else
                  "Re-running cannot converge where the cluster stores values differently: change the "
                  "manifest to what it keeps (ZooKeeper-mode brokers truncate whole-number keys).")
        lines.append(f"Apply incomplete: {applied} of {len(outcomes)} entities applied; {problems}. {advice}")
    return "\n".join(lines) + "\n"
