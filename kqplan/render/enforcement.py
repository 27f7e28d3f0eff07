"""``apply --verify-enforcement``: per quota bucket, whether Kafka enforces what the plan changed,
and the numbers each verdict rests on — as text, and as the apply report's ``enforcement`` object.

Values in (:class:`EnforcementView`, the core's :class:`~kqplan.core.enforcement.Verdict`), text
and JSON out; names escaped for a terminal. Nothing is decided here.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kqplan.core.enforcement import FAR_UNDER, HELD, OVER, RECENT, Finding, Outcome, Sensors, Verdict
from kqplan.core.sensors import seconds
from kqplan.render.escape import terminal
from kqplan.render.throttled import amount

MARKS = {Outcome.CONFIRMED: "✓", Outcome.NOT_YET: "?", Outcome.CONTRADICTED: "✗"}
SHOWN_JOINED = 3


@dataclass(frozen=True, slots=True)
class EnforcementView:
    verdicts: Sequence[Verdict]
    changed: float
    """When the alter ended (seconds since the epoch)."""
    waited: float
    window: float
    sensors: Mapping[str, Sensors]
    units: Mapping[str, str]
    """Per key, the unit of its usage and quota (``B/s``, ``%``, ``/s``)."""
    status: str = "verified"
    """``verified`` (the watch ended), ``in progress`` (written before it), ``interrupted``."""

    @property
    def listed(self) -> list[Verdict]:
        """The verdicts shown: a bucket a split may reach and that showed no traffic is no finding."""
        return [v for v in self.verdicts if not (v.watch.split and v.finding is Finding.NO_TRAFFIC)]


def _clock(at: float | None) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(at)) + " UTC" if at is not None else "-"


def _iso(at: float | None) -> str | None:
    """UTC ISO 8601 to the millisecond (the judge's windows are seconds long)."""
    if at is None:
        return None
    ms = round(at * 1000)
    return f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(ms // 1000))}.{ms % 1000:03d}Z"


def _value(value: float | None, unit: str, none: str = "none") -> str:
    return amount(value, unit) if value is not None else none


def finding_text(v: Verdict, view: EnforcementView) -> str:
    """What the readings show, in words."""
    sensors = view.sensors[v.watch.key]
    return {
        Finding.HELD: "Kafka throttles it and holds it at its quota",
        Finding.UNDER: ("not throttled, and under its quota" if v.watch.quota is not None
                        else "not throttled, and no quota applies"),
        Finding.OVER: f"its usage stays over its quota (more than {OVER:g} ×): Kafka does not hold it",
        Finding.OVER_UNTHROTTLED: "over its quota, and Kafka throttles nothing",
        Finding.THROTTLED_UNDER: (f"Kafka throttles it while every reading stays under {FAR_UNDER:g} × "
                                  "its quota: another limit applies"),
        Finding.THROTTLED_UNLIMITED: "Kafka throttles it, though no quota applies",
        Finding.MUTED: (f"Kafka delayed it after the change by {(v.throttle_ms or 0) / 1000:.0f} s, what "
                        f"its usage asks at its new quota (≈{(v.asked_ms or 0) / 1000:.0f} s): its clients "
                        f"wait until {_clock(v.muted_until)}"),
        Finding.TOO_SOON: (f"fewer than {RECENT} usage readings {seconds(sensors.usage.clean)} or more "
                           "after the change (Kafka's quota window)"),
        Finding.NO_TRAFFIC: "no traffic since the change",
        Finding.ECHO: (f"its throttle-time may still echo throttling from before the change (Kafka's "
                       f"throttle sensor remembers {seconds(sensors.throttle.memory)}: until "
                       f"{_clock(v.echo_until)})"),
        Finding.NO_THROTTLE_SERIES: ("no throttle-time readings since the change (is throttle-time "
                                     "exported? --metric throttle.KEY names it)"),
        Finding.BELOW_HELD: (f"Kafka throttles it at usage under {HELD:g} × its quota, not far enough "
                             "under to say another limit applies"),
        Finding.LATELY_OVER: "throttled, but its recent usage is over its quota",
    }[v.finding]


def _numbers(v: Verdict, view: EnforcementView) -> str:
    unit = view.units.get(v.watch.key, "")
    w = v.watch
    before = f" (before: {_value(w.before, unit)})" if w.before != w.quota else ""
    parts = [f"quota {_value(w.quota, unit)}{before}"]
    if v.decided_at is not None:
        parts.insert(0, f"decided {v.decided_at - view.changed:.0f} s after the change")
    if v.readings:
        where = f" on {v.broker}" if v.broker else ""
        parts.append(f"usage {_value(v.usage, unit)} (median of the last {min(RECENT, v.readings)} of "
                     f"{v.readings} readings from {_clock(v.since)}{where}; of all "
                     f"{_value(v.overall, unit)})")
    if v.throttle_ms is not None:
        parts.append(f"throttle-time {v.throttle_ms:.0f} ms")
    elif v.readings:
        parts.append("throttle-time NaN (nothing throttled)")
    if v.throttled_since is not None:
        parts.append(f"throttled after the change from {_clock(v.throttled_since)}")
    return "; ".join(parts)


def _context(v: Verdict, view: EnforcementView) -> str | None:
    unit = view.units.get(v.watch.key, "")
    w = v.watch
    parts = []
    if w.joined:
        names = ", ".join(b.display for b in w.joined[:SHOWN_JOINED])
        more = f" and {len(w.joined) - SHOWN_JOINED} more" if len(w.joined) > SHOWN_JOINED else ""
        parts.append(f"joined by {names}{more} (Kafka's precedence)")
    if w.expect is not None:
        demand = f" (usage before {_value(w.demand, unit)})" if w.demand is not None else ""
        parts.append(f"forecast: {'throttled' if w.expect else 'not throttled'}{demand}")
    return "; ".join(parts) or None


def _sensors_line(view: EnforcementView) -> str:
    """The sensor windows the verdicts rest on, once for the keys that share them."""
    keys: dict[Sensors, list[str]] = {}
    for key, s in sorted(view.sensors.items()):
        keys.setdefault(s, []).append(key)
    shown = []
    for s, named in keys.items():
        shown.append(f"{', '.join(named)}: usage readings clean {seconds(s.usage.clean)} after a change "
                     f"({s.usage.settings[0]} {s.usage.samples} + 1 × {s.usage.settings[1]} "
                     f"{s.usage.window:g} s), throttle-time remembers {seconds(s.throttle.memory)} "
                     f"({s.throttle.settings[0]} {s.throttle.samples} × {s.throttle.settings[1]} "
                     f"{s.throttle.window * 1000:g})")
    return "; ".join(shown)


def render_enforcement(view: EnforcementView) -> str:
    listed = view.listed
    if not view.verdicts:
        return ("Enforcement: no bucket with traffic in the last 5 minutes has a quota or members this "
                "apply changed; nothing to verify.\n")
    counts = Counter(v.outcome for v in listed)
    told = ", ".join(f"{counts[o]} {o.value}" for o in MARKS if counts[o]) or "nothing to judge"
    lines = [f"Enforcement after {view.waited:.0f} s (window {seconds(view.window)}): {told}.",
             f"  Kafka's sensors on these brokers: {_sensors_line(view)}."]
    for v in listed:
        lines.append(f"  {MARKS[v.outcome]} {v.watch.bucket.display} {v.watch.key}: {v.outcome.value}: "
                     f"{finding_text(v, view)}")
        lines.append(f"      {_numbers(v, view)}")
        context = _context(v, view)
        if context:
            lines.append(f"      {context}")
    quiet = len(view.verdicts) - len(listed)
    if quiet:
        lines.append(f"  ({quiet} bucket{'s' if quiet != 1 else ''} that a split bucket's connections "
                     "could reach showed no traffic)")
    return "\n".join(terminal(line) for line in lines) + "\n"


def _number(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def enforcement_json(view: EnforcementView) -> dict[str, Any]:
    """The apply report's ``enforcement`` object: the same facts as the text."""
    listed = view.listed
    counts = Counter(v.outcome for v in listed)
    return {
        "status": view.status,
        "changed_at": _iso(view.changed),
        "waited_seconds": round(view.waited, 3),
        "window_seconds": view.window,
        "summary": {o.value.replace(" ", "_"): counts[o] for o in MARKS},
        "sensors": {key: {"usage_clean_seconds": s.usage.clean, "usage_samples": s.usage.samples,
                          "usage_window_seconds": s.usage.window,
                          "throttle_memory_seconds": s.throttle.memory,
                          "throttle_samples": s.throttle.samples,
                          "throttle_window_seconds": s.throttle.window}
                    for key, s in sorted(view.sensors.items())},
        "buckets": [{
            "bucket": v.watch.bucket.to_json(), "display": v.watch.bucket.display, "key": v.watch.key,
            "outcome": v.outcome.value, "finding": v.finding.value, "reason": finding_text(v, view),
            "unit": view.units.get(v.watch.key), "quota": v.watch.quota, "quota_before": v.watch.before,
            "usage": _number(v.usage), "usage_all": _number(v.overall), "readings": v.readings,
            "readings_from": _iso(v.since), "broker": v.broker, "throttle_ms": _number(v.throttle_ms),
            "throttled_after_change_from": _iso(v.throttled_since),
            "expected_throttled": v.watch.expect, "usage_before": _number(v.watch.demand),
            "joined": [b.to_json() for b in v.watch.joined], "decided_at": _iso(v.decided_at),
        } for v in listed],
        "quiet_split_buckets": len(view.verdicts) - len(listed),
    }
