"""A plan as text: terraform's markers, then the summary line.

Renderers only read the plan. The markers, the summary line and the rows of a change are built
here once, from ``Action.marker`` and ``Plan.summary``, and the Markdown view
(:mod:`kqplan.render.markdown`) uses them too, so the formats cannot disagree.
"""

from __future__ import annotations

from kqplan.core.budgets import Budget
from kqplan.core.expiry import show_when
from kqplan.core.plan import Change, ClusterRef, Plan, Summary
from kqplan.core.quotas import QUOTA_KEYS
from kqplan.core.units import format_bytes, format_number
from kqplan.render.escape import terminal

NO_CHANGES = "No changes. The cluster matches the manifests."


def plural(n: int, one: str, many: str) -> str:
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


def key_rows(change: Change) -> list[tuple[str, str, float | None, float | None]]:
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


def change_remarks(change: Change) -> list[str]:
    """What safe rollout says of a change: ``expires 2026-12-01T00:00Z``, ``override expired
    2026-12-01T00:00Z (overlays/prod/q.yaml:5:5)`` (raw: each view escapes them)."""
    remarks = [f"expires {show_when(change.expires)}"] if change.expires is not None else []
    return [*remarks, *change.expired]


def budget_text(change: Change, key: str, value: float | None, brokers: int | None) -> str | None:
    """``300 MiB per cluster ÷ 3 brokers = 100 MiB per broker`` for a key of ``after`` written as a
    budget; None for any other."""
    per_cluster = change.per_cluster.get(key) if change.per_cluster else None
    if per_cluster is None or value is None or brokers is None:
        return None
    return Budget(change.entity, key, per_cluster, brokers, value).show()


def target_line(cluster: ClusterRef) -> str:
    """``cluster ID (ADDRESS), Kafka >=3.9 (zookeeper)``: which cluster, and what kqplan knows of it;
    ``cluster NAME (id ID, ADDRESS), …`` for an inventory cluster, its name first."""
    where = f"cluster {cluster.id or 'unknown id'} ({cluster.address})" if cluster.name is None else \
        f"cluster {cluster.name} (id {cluster.id or 'unknown'}, {cluster.address})"
    if cluster.version:
        where += f", Kafka {cluster.version}"
    if cluster.mode:
        where += f" ({cluster.mode})"
    return terminal(where)


def target_of(plan: Plan) -> str:
    return target_line(plan.cluster)


_COLORS = {"+": "\x1b[32m", "~": "\x1b[33m", "-": "\x1b[31m"}
_RESET = "\x1b[0m"
UNMANAGED_SHOWN = 10
"""Unmanaged entities listed by name in text and Markdown; JSON has them all."""


def paint(marker: str, text: str, color: bool) -> str:
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
        checked = plural(plan.unchanged, "entity", "entities")
        lines.append(f"{NO_CHANGES} ({checked} checked on {target_of(plan)})")
        lines.extend(map(terminal, plan.notes))
        if unmanaged:
            lines += ["", *unmanaged]
        return "\n".join(lines) + "\n"
    lines.append(f"kqplan will perform the following actions on {target_of(plan)}:")
    lines.append("")
    for change in plan.changes:
        marker = change.action.marker
        head = f"  {paint(marker, marker, color)} {change.display}"
        remarks = [change.origin] if change.origin is not None else []
        remarks += change_remarks(change)
        if remarks:
            head += f"  # {terminal('; '.join(remarks))}"
        lines.append(head)
        for mark, name, old, new in key_rows(change):
            sign, key = paint(mark, mark, color), terminal(name)
            budget = budget_text(change, name, new, plan.cluster.brokers)
            tail = f"  # {budget}" if budget is not None else ""
            if mark == "~":
                lines.append(f"      {sign} {key} = {show_value(name, old)} -> {show_value(name, new)}{tail}")
            elif mark == "+":
                lines.append(f"      {sign} {key} = {show_value(name, new)}{tail}")
            else:
                lines.append(f"      {sign} {key} = {show_value(name, old)}")
        lines.append("")
    lines.extend(map(terminal, plan.notes))
    if unmanaged:
        lines += [*unmanaged, ""]
    lines.append(summary_line(plan.summary))
    return "\n".join(lines) + "\n"


# -- apply reports ------------------------------------------------------------------------------
