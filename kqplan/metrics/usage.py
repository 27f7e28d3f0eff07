"""What each quota bucket used, over a window, as Kafka's brokers measured it: usage rows for
``kqplan fleet usage`` (``schemas/usage-v1.json``).

Per quota key, one range query (chunked under the server's points limit by
:meth:`~kqplan.metrics.prometheus.Prometheus.query_range`)::

    max by (user, client_id) (avg_over_time(USAGE{selector}[step]))

each point the mean of the step before it, on the busiest broker (Kafka enforces a quota per
broker, so a bucket's usage is compared with its quota broker by broker). The series are keyed
by the bucket their labels name (:mod:`kqplan.metrics.buckets`), as Kafka's sensors are:

- ``{user=U, client-id=C}`` (both labels): one principal's usage, a row with ``user`` U,
  ``client_id`` C and no ``bucket``;
- ``{user=U}`` (only the user label): all of U's client-ids together, a row with ``bucket``
  ``user``, ``user`` U and no ``client_id``;
- ``{client-id=C}`` (only the client-id label): all users of C together, ``bucket``
  ``client-id``, ``client_id`` C and no ``user``.

A bucket's row is never spread over its members: how its usage divides among them is not
measured. The four keys of one bucket at one time are one row.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from kqplan.core.entity import Entity
from kqplan.metrics.buckets import bucket_of_labels
from kqplan.metrics.names import MetricNames, selector
from kqplan.metrics.prometheus import Labels, Prometheus
from kqplan.metrics.throttled import Window, duration


@dataclass(frozen=True, slots=True)
class BucketUsage:
    """One bucket's usage at one time, every key of the metric table."""

    bucket: Entity
    """``{user=U, client-id=C}``, ``{user=U}`` or ``{client-id=C}``: the series' metric tags."""
    ts: float
    rates: tuple[float | None, ...]
    """Per key of the metric table (its order): the rate, None where not measured."""


@dataclass(frozen=True, slots=True)
class Pulled:
    rows: tuple[BucketUsage, ...]
    """Sorted by bucket, then time."""
    series: int
    """How many series Prometheus returned, of every key."""
    unlabelled: int
    """Series with neither the user nor the client-id label: left out (their bucket is unknown)."""
    unusable: tuple[tuple[str, Labels], ...] = ()
    """(key, labels) of the series with a bucket none of whose points is a usage (every one NaN,
    ±Inf or negative): Kafka's rates are never NaN, so the names point at something else."""


def usage_expr(usage: str, extra: str, names: MetricNames, step: float) -> str:
    """The range query of one key's usage series."""
    by = f"{names.user_label}, {names.client_id_label}"
    return f"max by ({by}) (avg_over_time({selector(usage, extra)}[{duration(step)}]))"


def pull_usage(prom: Prometheus, names: MetricNames, extra: str, window: Window,
               progress: Callable[[str], None] | None = None) -> Pulled:
    """Every bucket's usage in ``window``, among the series ``extra`` (matchers) selects."""
    found: dict[tuple[Entity, float], list[float | None]] = {}
    series = unlabelled = 0
    unusable: list[tuple[str, Labels]] = []
    for i, metrics in enumerate(names.keys):
        if progress is not None:
            progress(f"Asking Prometheus at {prom.shown} for {metrics.key} ({i + 1}/{len(names.keys)})")
        answered = prom.query_range(usage_expr(metrics.usage, extra, names, window.step),
                                    window.first, window.end, window.step)
        series += len(answered)
        for one in answered:
            bucket = bucket_of_labels(dict(one.labels), names.user_label, names.client_id_label)
            if bucket is None:
                unlabelled += 1
                continue
            usable = False
            for ts, value in one.points:
                if math.isfinite(value) and value >= 0:
                    found.setdefault((bucket, ts), [None] * len(names.keys))[i] = value
                    usable = True
            if not usable and one.points:
                unusable.append((metrics.key, one.labels))
    rows = sorted((BucketUsage(b, ts, tuple(rates)) for (b, ts), rates in found.items()),
                  key=lambda r: (r.bucket.display, r.ts))
    return Pulled(tuple(rows), series, unlabelled, tuple(unusable))
