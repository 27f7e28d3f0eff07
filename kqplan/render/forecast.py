"""``plan --usage``: the buckets the plan would throttle, as text, Markdown or a JSON value.

The command hands over plain values (:class:`ForecastView`, one :class:`ForecastBucket` per
bucket and key); this view lays them out and decides nothing. Names are escaped for where they
land (:mod:`kqplan.render.escape`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kqplan.render.escape import github_data, github_property, markdown_code, markdown_text, terminal
from kqplan.render.throttled import amount

_UNITS = {"producer_byte_rate": "B/s", "consumer_byte_rate": "B/s", "request_percentage": "%",
          "controller_mutation_rate": "/s"}


@dataclass(frozen=True, slots=True)
class ForecastBucket:
    bucket: str
    """Its display form (``{user=alice}``)."""
    key: str
    members: int
    """Observed rows in it (principals and measured buckets), a split row's share included."""
    usage: float | None
    """Its usage known (None: only shares of split rows)."""
    usage_max: float | None
    """Split unknown: the most it may be."""
    quota: float | None
    newly: bool = False
    held: bool = False
    """Kafka throttled it in the window (throttled after the plan: the plan keeps or lowers its
    quota; relieved: it raises or removes it): its usage is what the quota let through."""


@dataclass(frozen=True, slots=True)
class ForecastView:
    cluster: str
    source: str
    rows: int
    throttled: Sequence[ForecastBucket]
    unknown: Sequence[ForecastBucket]
    relieved: Sequence[ForecastBucket]
    windowed: bool

    @property
    def newly(self) -> int:
        return sum(b.newly for b in self.throttled)

    @property
    def line(self) -> str:
        """``Would throttle: 2 buckets (1 newly); 1 split unknown; relieves 1.``"""
        n = len(self.throttled)
        text = f"Would throttle: {n} bucket{'' if n == 1 else 's'} ({self.newly} newly)"
        if self.unknown:
            text += f"; {len(self.unknown)} split unknown"
        if self.relieved:
            text += f"; relieves {len(self.relieved)}"
        return text + "."


def _observed(rows: int) -> str:
    return f"{rows} principal{'' if rows == 1 else 's'} or measured bucket{'' if rows == 1 else 's'} observed"


def _amount(key: str, value: float | None) -> str:
    return "none" if value is None else amount(value, _UNITS.get(key, ""))


def _over(b: ForecastBucket) -> str:
    if b.held:
        return (f"throttled by Kafka in the window, at {_amount(b.key, b.usage)} of "
                f"{_amount(b.key, b.quota)} (its quota is not raised)")
    return f"{_amount(b.key, b.usage)} over {_amount(b.key, b.quota)}"


def _before(b: ForecastBucket) -> str:
    if b.held:
        return f"throttled by Kafka in the window, at {_amount(b.key, b.usage)} of {_amount(b.key, b.quota)}"
    return f"{_amount(b.key, b.usage)} over {_amount(b.key, b.quota)} before"


def _split(b: ForecastBucket) -> str:
    known = f"{_amount(b.key, b.usage)} known, " if b.usage is not None else ""
    return f"{known}up to {_amount(b.key, b.usage_max)}, quota {_amount(b.key, b.quota)}"


def render_text(view: ForecastView) -> str:
    lines = [terminal(f"{view.line} (usage: {view.source}; {_observed(view.rows)}"
                      f"{'' if view.windowed else '; not windowed: members summed'})")]
    lines += _capped([terminal(f"  {'+' if b.newly else ' '} {b.bucket} {b.key}: {_over(b)}"
                               f"{' (newly)' if b.newly else ''}") for b in view.throttled], "  ")
    if view.unknown:
        lines.append("  Split unknown (the plan splits a measured bucket; how its usage divides among "
                     "the new buckets is not measured):")
        lines += _capped([terminal(f"    ? {b.bucket} {b.key}: {_split(b)}") for b in view.unknown], "    ")
    if view.relieved:
        lines.append("  Relieved (over their quota or throttled by Kafka before the plan, not after):")
        lines += _capped([terminal(f"    - {b.bucket} {b.key}: {_before(b)}") for b in view.relieved],
                         "    ")
    return "\n".join(lines) + "\n"


SHOWN = 20
"""Buckets listed per block in text and Markdown (JSON lists them all)."""


def _capped(lines: list[str], indent: str) -> list[str]:
    if len(lines) <= SHOWN:
        return lines
    return [*lines[:SHOWN], f"{indent}… and {len(lines) - SHOWN} more (--format json lists them all)"]


def render_markdown(view: ForecastView) -> str:
    lines = [f"#### {markdown_text(view.line)}", "",
             f"Usage: {markdown_text(view.source)}; {_observed(view.rows)}.", ""]
    if view.throttled or view.unknown or view.relieved:
        lines += ["| | bucket | key | usage | quota |", "|---|---|---|---|---|"]
        rows = [(f"{'newly throttled' if b.newly else 'throttled'}", b, _amount(b.key, b.usage), "")
                for b in view.throttled]
        rows += [("split unknown", b, f"up to {_amount(b.key, b.usage_max)}", "") for b in view.unknown]
        rows += [("relieved", b, _amount(b.key, b.usage), " (before)") for b in view.relieved]
        for state, b, usage, when in rows[:3 * SHOWN]:
            lines.append(f"| {state} | {markdown_code(b.bucket, cell=True)} | {b.key} | {usage} | "
                         f"{_amount(b.key, b.quota)}{when} |")
        if len(rows) > 3 * SHOWN:
            lines.append(f"| … | and {len(rows) - 3 * SHOWN} more (`--format json` lists them all) | | | |")
        lines.append("")
    return "\n".join(lines) + "\n"


def to_json(view: ForecastView) -> dict[str, Any]:
    def one(b: ForecastBucket) -> dict[str, Any]:
        return {"bucket": b.bucket, "key": b.key, "members": b.members, "usage": b.usage,
                "usage_max": b.usage_max, "quota": b.quota, "newly": b.newly, "throttled_in_window": b.held}

    return {"cluster": view.cluster, "source": view.source, "observed": view.rows,
            "would_throttle": len(view.throttled), "newly": view.newly, "windowed": view.windowed,
            "throttled": [one(b) for b in view.throttled], "split_unknown": [one(b) for b in view.unknown],
            "relieved": [one(b) for b in view.relieved]}


def with_forecast(plan_json: str, view: ForecastView | None) -> str:
    """The plan's JSON with ``"usage"``: the forecast (the saved plan file keeps the plan alone);
    without one, the plan's JSON as it is."""
    if view is None:
        return plan_json
    data = json.loads(plan_json)
    data["usage"] = to_json(view)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def render_github(view: ForecastView) -> str:
    """A workflow warning when the plan would newly throttle a bucket, else a notice line."""
    level = "warning" if view.newly else "notice"
    listed = "; ".join(f"{b.bucket} {b.key}: {_over(b)}" for b in view.throttled if b.newly)
    text = view.line + (f" Newly: {listed}" if listed else "")
    return f"::{level} title={github_property('kqplan usage')}::{github_data(text)}\n"
