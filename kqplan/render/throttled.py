"""``kqplan throttled``: the buckets Kafka throttled, as text, Markdown or JSON.

The command hands over plain values (:class:`ThrottledView`, one :class:`ThrottledRow` per
throttled bucket and key, worst first); this view lays them out and decides nothing. Every name
(entities, paths, brokers, the URL and selector) is escaped for where it lands
(:mod:`kqplan.render.escape`).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kqplan.core.entity import Entity
from kqplan.core.units import format_bytes, format_number
from kqplan.render.escape import markdown_cell, markdown_code, markdown_text, terminal


@dataclass(frozen=True, slots=True)
class ThrottledRow:
    """One bucket Kafka throttled on one key, with what supplies its quota now."""

    key: str
    bucket: Entity | None
    """None: the series carried no user/client-id label (shown as unknown)."""
    peak_ms: float
    steps: int
    first: float
    last: float
    brokers: tuple[str, ...]
    peak_usage: float | None
    unit: str
    """``B/s``, ``%`` or ``/s``: the unit of the usage and the quota."""
    quota: float | None
    """The bucket's quota now (per broker); None: none applies now."""
    source: Entity | None
    """The entity that sets it (resolved against the cluster's describe)."""
    declared: str | None
    """``path:line:column`` of the manifest entry that declares ``source``; None: none does."""
    ended: float | None = None
    """When its last throttled response was (None: it may go on at the window's end)."""
    below_quota: bool = False
    """Its usage while throttled stayed well under its quota *now*: the quota changed since, or
    another limit applied (Kafka holds a throttled bucket at its quota)."""


@dataclass(frozen=True, slots=True)
class ThrottledView:
    prometheus: str
    selector: str
    """The matchers that picked the cluster's series (``""``: all series)."""
    cluster: str
    """The inventory name, else the cluster id, else the address."""
    start: float
    end: float
    step: float
    manifests: bool
    """Whether manifests were read (else "declared" is not known, rather than "not managed")."""
    rows: Sequence[ThrottledRow]
    memory: float = 60.0
    """Seconds the brokers' throttle-time stays above 0 after a throttled response."""
    memory_settings: tuple[str, str] = ("metrics.num.samples", "metrics.sample.window.ms")


def span(seconds: float) -> str:
    """``15 min``, ``2 h``, ``90 s``, ``3 d``: a window or a step as people say it."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:.0f} {unit}"
    return f"{format_number(seconds)} s" if seconds >= 1 else f"{seconds * 1000:.0f} ms"


def amount(value: float, unit: str) -> str:
    """A usage or quota in its unit: ``≈19.68 KiB/s``, ``812 B/s``, ``35.5 %``, ``0.62 /s``."""
    if not math.isfinite(value):
        return str(value)
    if unit == "B/s":
        scaled = format_bytes(value)
        return f"{scaled}/s" if scaled else f"{value:.0f} B/s"
    return f"{value:.3g} {unit}" if value < 1000 else f"{value:.0f} {unit}"


def _clock(at: float, view: ThrottledView) -> str:
    same_day = time.gmtime(view.start)[:3] == time.gmtime(view.end)[:3]
    return time.strftime("%H:%M:%S" if same_day else "%Y-%m-%d %H:%M", time.gmtime(at))


def _iso(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def _bucket(row: ThrottledRow) -> str:
    return row.bucket.display if row.bucket is not None else "(unknown bucket: no user/client-id label)"


def _quota(row: ThrottledRow) -> str:
    if row.bucket is None:
        return "unknown (which bucket is unknown)"
    if row.quota is None or row.source is None:
        return "none now (removed since it throttled?)"
    raw = f" ({format_number(row.quota)})" if row.unit == "B/s" and row.quota >= 1024 else ""
    return f"{amount(row.quota, row.unit)}{raw} per broker, from {row.source.display}"


def _declared(row: ThrottledRow, view: ThrottledView) -> str:
    if row.source is None:
        return "-"
    if row.declared is not None:
        return row.declared
    return "not managed" if view.manifests else "unknown (no manifests read: give PATH or --cluster)"


def _steps(row: ThrottledRow, view: ThrottledView) -> str:
    """``16 of 120 steps of 1 s (from 13:41:14 to 13:41:29 UTC), on 1 broker``."""
    steps = round((view.end - view.start) / view.step)
    when = (f"at {_clock(row.last, view)}" if row.first == row.last
            else f"from {_clock(row.first, view)} to {_clock(row.last, view)}")
    brokers = f", on {len(row.brokers)} broker{'s' if len(row.brokers) != 1 else ''}" if row.brokers else ""
    return f"{row.steps} of {steps} steps of {span(view.step)} ({when} UTC){brokers}"


def _ended(row: ThrottledRow, view: ThrottledView) -> str:
    """When the throttling ended, and why it is not the last step that showed it."""
    if row.ended is None:
        return "still throttled at the end of the window"
    return (f"≈{_clock(row.ended, view)} UTC: Kafka's throttle-time stays above 0 for "
            f"{span(view.memory)} after the last throttled response ({view.memory_settings[0]} × "
            f"{view.memory_settings[1]})")


def _note(row: ThrottledRow) -> str | None:
    if not row.below_quota or row.peak_usage is None or row.quota is None:
        return None
    return (f"its usage while throttled ({amount(row.peak_usage, row.unit)}) stayed under its quota now "
            f"({amount(row.quota, row.unit)}): the quota was lower then and changed since, or another "
            "limit applied (Kafka holds a throttled bucket at its quota)")


def _header(view: ThrottledView) -> str:
    n = len(view.rows)
    what = (f"Kafka throttled {n} quota bucket{'s' if n != 1 else ''}" if n
            else "Kafka throttled no quota bucket")
    where = f"Prometheus {view.prometheus}" + (f", {{{view.selector}}}" if view.selector else "")
    return (f"{what} of cluster {view.cluster} in the last {span(view.end - view.start)} (to "
            f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(view.end))} UTC; {where})")


def render_text(view: ThrottledView) -> str:
    """Terminal text: a block per throttled bucket, worst first."""
    lines = [terminal(_header(view) + (", worst first:" if view.rows else "."))]
    for row in view.rows:
        usage = (f"peak {amount(row.peak_usage, row.unit)} on one broker while throttled"
                 if row.peak_usage is not None else "not found")
        lines += ["", terminal(f"{_bucket(row)}  {row.key}"),
                  terminal(f"    throttled  up to {row.peak_ms:.0f} ms, in {_steps(row, view)}"),
                  terminal(f"    ended      {_ended(row, view)}"),
                  terminal(f"    usage      {usage}"),
                  terminal(f"    quota      {_quota(row)}")]
        note = _note(row)
        if note is not None:
            lines.append(terminal(f"    note       {note}"))
        lines.append(terminal(f"    declared   {_declared(row, view)}"))
    return "\n".join(lines) + "\n"


_COLUMNS = ("bucket", "key", "peak throttle", "throttled", "ended", "peak usage while throttled", "quota",
            "declared in")


def render_markdown(view: ThrottledView) -> str:
    """A PR comment or a report page: a sentence, then a table, worst first."""
    lines = ["### kqplan throttled", "", markdown_text(_header(view) + ".")]
    if view.rows:
        lines += ["", "| " + " | ".join(_COLUMNS) + " |", "|---|---|---:|---|---|---:|---|---|"]
    for row in view.rows:
        cells = [markdown_code(_bucket(row), cell=True), markdown_code(row.key, cell=True),
                 markdown_cell(f"{row.peak_ms:.0f} ms"),
                 markdown_cell(_steps(row, view)),
                 markdown_cell(_ended(row, view)),
                 markdown_cell(amount(row.peak_usage, row.unit) if row.peak_usage is not None else "-"),
                 markdown_cell(_quota(row) + (f" ({_note(row)})" if _note(row) else "")),
                 markdown_code(_declared(row, view), cell=True) if row.declared
                 else markdown_cell(_declared(row, view))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _row_json(row: ThrottledRow) -> dict[str, Any]:
    return {"bucket": row.bucket.to_json() if row.bucket is not None else None, "key": row.key,
            "peak_throttle_ms": row.peak_ms, "throttled_steps": row.steps,
            "first_throttled": _iso(row.first), "last_throttled_step": _iso(row.last),
            "ended": _iso(row.ended) if row.ended is not None else None, "ongoing": row.ended is None,
            "brokers": list(row.brokers), "peak_usage": row.peak_usage, "unit": row.unit,
            "quota": row.quota, "source": row.source.to_json() if row.source is not None else None,
            "declared": row.declared, "usage_under_quota_now": row.below_quota, "note": _note(row)}


def render_json(view: ThrottledView) -> str:
    """The facts of the text form, for machines: times in UTC ISO 8601, values as numbers."""
    doc = {"prometheus": view.prometheus, "selector": view.selector, "cluster": view.cluster,
           "window": {"start": _iso(view.start), "end": _iso(view.end),
                      "seconds": view.end - view.start, "step_seconds": view.step},
           "manifests": view.manifests, "throttle_memory_seconds": view.memory,
           "throttled": [_row_json(row) for row in view.rows]}
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
