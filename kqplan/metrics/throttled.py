"""Which quota buckets Kafka throttled in a window, and when, as its brokers measured it.

Per quota key, one range query over the window, ``max_over_time(THROTTLE[step]) > 0``: each
point covers the ``step`` before it, so no throttled sample between two points is missed, and
only the throttled steps come back (Kafka's throttle-time is NaN, or the gauge absent, where no
response was throttled). The series are grouped by bucket (:mod:`kqplan.metrics.buckets`) —
one per broker, as each broker enforces its quota on its own — into the bucket's peak
throttle-time, how many steps it was throttled in, the first and last of them, and which
brokers.

Kafka's throttle-time is an average over its throttle sensor's memory (``metrics.num.samples`` ×
``metrics.sample.window.ms``, 60 s by default: :mod:`kqplan.core.sensors`): it stays above 0 that
long after the last throttled response. So the throttling *ended* a memory before the last step
that shows it, unless that step is the window's last (it may go on). Then, for the keys with a
throttled bucket, one range query of the throttled buckets' usage (narrowed by label matchers),
whose peak *while each was throttled* (from its first throttled step to its end) is the row's
usage. When nothing is throttled, one more query per key counts the throttle series the window
holds, so that "nothing throttled" is told apart from "no metrics found".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from kqplan.core.entity import Entity
from kqplan.core.sensors import DEFAULTS, METRIC_SAMPLES, METRIC_WINDOW
from kqplan.metrics.buckets import bucket_of_labels, matchers
from kqplan.metrics.names import KeyMetrics, MetricNames, selector
from kqplan.metrics.prometheus import MAX_POINTS, Prometheus, Series

DEFAULT_MEMORY = DEFAULTS[METRIC_SAMPLES] * DEFAULTS[METRIC_WINDOW] / 1000
"""Seconds Kafka's throttle-time remembers a throttled response, with its default settings."""

MAX_CHUNKS = 100
"""A window of more than this many range chunks (1.1 million points) needs a larger step."""


@dataclass(frozen=True, slots=True)
class Window:
    """The last ``seconds`` before ``end`` (seconds since the epoch), in steps of ``step``."""

    end: float
    seconds: float
    step: float

    @property
    def steps(self) -> int:
        return max(1, math.ceil(self.seconds / self.step - 1e-9))

    @property
    def first(self) -> float:
        """The first point's time: the points ``first, first + step, … end`` cover the window."""
        return self.end - (self.steps - 1) * self.step

    @property
    def start(self) -> float:
        return self.end - self.seconds

    @property
    def chunks(self) -> int:
        return math.ceil(self.steps / MAX_POINTS)


@dataclass(frozen=True, slots=True)
class Throttled:
    """One bucket Kafka throttled on one key in the window."""

    key: str
    bucket: Entity | None
    """None: the series carry neither the user nor the client-id label (names wrong?)."""
    peak_ms: float
    """The highest throttle-time seen (ms: Kafka's mean delay of throttled responses)."""
    steps: int
    """In how many steps of the window some broker had it throttled."""
    first: float
    last: float
    """The end of the first and of the last throttled step (seconds since the epoch)."""
    brokers: tuple[str, ...]
    peak_usage: float | None = None
    """The highest usage of the bucket on one broker while it was throttled (the key's unit)."""
    ended: float | None = None
    """When its last throttled response was, as Kafka's throttle sensor tells it (:attr:`last`
    less the sensor's memory, never before :attr:`first`); None: it may go on (its last throttled
    step is the window's last)."""


@dataclass(frozen=True, slots=True)
class Observation:
    throttled: tuple[Throttled, ...]
    """Worst first: by peak throttle-time, then by throttled steps."""
    series: int | None
    """How many throttle series the window holds: counted only when nothing was throttled."""
    warnings: tuple[str, ...]


def duration(seconds: float) -> str:
    """A PromQL duration: whole seconds as ``60s``, else milliseconds."""
    ms = max(1, round(seconds * 1000))
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def observe_throttled(prom: Prometheus, names: MetricNames, extra: str, window: Window, *,
                      memory: float = DEFAULT_MEMORY) -> Observation:
    """The buckets throttled in ``window``, among the series ``extra`` (matchers) selects;
    ``memory``: seconds the brokers' throttle-time remembers a throttled response."""
    found: list[Throttled] = []
    warnings: list[str] = []
    for metrics in names.keys:
        expr = f"max_over_time({selector(metrics.throttle, extra)}[{duration(window.step)}]) > 0"
        series = prom.query_range(expr, window.first, window.end, window.step)
        rows = [_ended(row, window, memory) for row in _buckets(metrics.key, series, names)]
        if any(row.bucket is None for row in rows):
            warnings.append(f"throttled series of {metrics.key} carry neither label "
                            f"'{names.user_label}' nor '{names.client_id_label}': the quota bucket "
                            "is unknown (name the labels with --metric label.user=NAME, "
                            "label.client_id=NAME)")
        if rows:
            rows = _with_usage(prom, metrics, names, extra, window=window, rows=rows)
        found.extend(rows)
    counted = None if found else sum(_count(prom, m, extra, window) for m in names.keys)
    found.sort(key=lambda t: (-t.peak_ms, -t.steps, t.key, t.bucket.display if t.bucket else ""))
    return Observation(tuple(found), counted, tuple(warnings))


def _buckets(key: str, series: Sequence[Series], names: MetricNames) -> list[Throttled]:
    grouped: dict[Entity | None, list[Series]] = {}
    for one in series:
        labels = dict(one.labels)
        grouped.setdefault(bucket_of_labels(labels, names.user_label, names.client_id_label),
                           []).append(one)
    rows = []
    for bucket, members in grouped.items():
        points = [(t, v) for one in members for t, v in one.points if v > 0]  # NaN > 0 is False
        if not points:
            continue
        times = {t for t, _ in points}
        brokers = sorted({b for one in members if (b := dict(one.labels).get(names.broker_label))})
        rows.append(Throttled(key, bucket, max(v for _, v in points), len(times), min(times),
                              max(times), tuple(brokers)))
    return rows


def _ended(row: Throttled, window: Window, memory: float) -> Throttled:
    """``row`` with the end of its throttling: a memory before its last throttled step (None when
    that step is the window's last: it may go on)."""
    if row.last >= window.end - window.step / 2:
        return row
    return replace(row, ended=max(row.first, row.last - memory))


def _with_usage(prom: Prometheus, metrics: KeyMetrics, names: MetricNames, extra: str, *,
                window: Window, rows: list[Throttled]) -> list[Throttled]:
    """``rows`` with each bucket's peak usage on one broker while it was throttled: one range
    query of the throttled buckets' usage at the window's step."""
    buckets = [row.bucket for row in rows if row.bucket is not None]
    if not buckets:
        return rows
    by = f"{names.user_label}, {names.client_id_label}"
    narrow = ",".join(m for m in (extra, matchers(buckets, names.user_label, names.client_id_label)) if m)
    expr = f"max by ({by}) (max_over_time({selector(metrics.usage, narrow)}[{duration(window.step)}]))"
    points: dict[Entity, list[tuple[float, float]]] = {}
    for one in prom.query_range(expr, window.first, window.end, window.step):
        bucket = bucket_of_labels(dict(one.labels), names.user_label, names.client_id_label)
        if bucket is not None:
            points.setdefault(bucket, []).extend(one.points)
    found = []
    for row in rows:
        end = row.ended if row.ended is not None else window.end
        during = [v for t, v in (points.get(row.bucket, []) if row.bucket is not None else [])
                  if row.first - window.step < t <= end + window.step and not math.isnan(v)]
        found.append(replace(row, peak_usage=max(during) if during else None))
    return found


def _count(prom: Prometheus, metrics: KeyMetrics, extra: str, window: Window) -> int:
    """How many throttle series of ``metrics`` the window holds (NaN ones too)."""
    expr = f"count(last_over_time({selector(metrics.throttle, extra)}[{duration(window.seconds)}]))"
    return sum(int(s.value) for s in prom.query(expr, window.end) if not math.isnan(s.value))

