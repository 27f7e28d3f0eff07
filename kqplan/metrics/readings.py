"""What the brokers measured of some quota buckets since a moment, reading by reading: each
bucket's usage and throttle-time per broker, at the times Prometheus scraped them (the raw samples
of ``SERIES[span]``, not a resampled range), for ``apply --verify-enforcement``'s judge
(:mod:`kqplan.core.enforcement`).

Per quota key, two instant queries of a range vector, narrowed to the watched buckets by label
matchers (:func:`kqplan.metrics.buckets.matchers`); each series is then keyed by the bucket its
labels name, exactly, and by its broker label. A throttle-time reading of NaN (Kafka's ``Avg`` of
no throttled response) is kept: it says that nothing was throttled.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping

from kqplan.core.enforcement import Points, Readings
from kqplan.core.entity import Entity
from kqplan.metrics.buckets import bucket_of_labels, matchers
from kqplan.metrics.names import MetricNames, selector
from kqplan.metrics.prometheus import Prometheus, Series
from kqplan.metrics.throttled import duration


def bucket_readings(prom: Prometheus, names: MetricNames, extra: str,
                    watched: Mapping[str, Collection[Entity]], *, since: float,
                    at: float) -> dict[tuple[Entity, str], Readings]:
    """(bucket, key) → its readings in (``since``, ``at``], for the buckets ``watched`` per key."""
    span = duration(max(1.0, math.ceil(at - since)))
    found: dict[tuple[Entity, str], Readings] = {}
    for key, buckets in watched.items():
        if not buckets:
            continue
        metrics = names.of(key)
        narrow = ",".join(m for m in (extra, matchers(buckets, names.user_label, names.client_id_label)) if m)
        usage = _by_bucket(prom.query_samples(f"{selector(metrics.usage, narrow)}[{span}]", at),
                           names, buckets)
        throttle = _by_bucket(prom.query_samples(f"{selector(metrics.throttle, narrow)}[{span}]", at),
                              names, buckets)
        for bucket in buckets:
            found[bucket, key] = Readings(usage.get(bucket, {}), throttle.get(bucket, {}))
    return found


def _by_bucket(series: list[Series], names: MetricNames,
               buckets: Collection[Entity]) -> dict[Entity, dict[str, Points]]:
    """The series of ``buckets``, per bucket and broker (one broker's series of a bucket merged)."""
    points: dict[Entity, dict[str, list[tuple[float, float]]]] = {}
    wanted = set(buckets)
    for one in series:
        labels = dict(one.labels)
        bucket = bucket_of_labels(labels, names.user_label, names.client_id_label)
        if bucket is None or bucket not in wanted:
            continue
        points.setdefault(bucket, {}).setdefault(labels.get(names.broker_label, ""), []).extend(one.points)
    return {bucket: {broker: tuple(sorted(p)) for broker, p in brokers.items()}
            for bucket, brokers in points.items()}
