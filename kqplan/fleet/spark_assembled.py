"""The Spark engine's impact as this process assembles it: Spark computes what grows with the
samples, this process what grows with the principals — as the local engine does with DuckDB's
aggregates (:mod:`kqplan.fleet.columnar`), with the same code.

- Spark (:func:`kqplan.fleet.spark_impact.usage_aggregates`): the usage read, checked and
  aggregated per unit and key — the statistic over its samples; its mean per window and the
  statistic over those means; and, for the buckets with several units (or split
  ones), the units' means summed per window and the statistics over the windows. Collected: a row
  per unit and key, and a row per such bucket.
- This process (:mod:`kqplan.fleet.members`, :func:`kqplan.fleet.impact.placements`, the
  reference's rows): where each unit's members fall before and after the plan, each bucket's
  quota, usage and verdict, the rows and the unused entries.

A bucket of one unit wholly in it and none split — most of them, where principals are many —
takes that unit's statistic over its window means: no join. Measured on the windows shape
(benchmarks/README.md): Spark's joins of the principals' placements and the buckets took longer
than this process's resolution of the same principals.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kqplan.core.state import QuotaState
from kqplan.fleet.impact import DEFAULT_WINDOW, Impact, _rows, _unused, placements
from kqplan.fleet.members import Members, Memberships, Totals, judged_buckets, memberships, numbered
from kqplan.fleet.spark import collect_rows, frame_of
from kqplan.fleet.spark_impact import UNIT_KEYS, Seen, _statistic, unit_means, usage_aggregates
from kqplan.fleet.usage import USAGE_KEYS, Unit

_MEMBER = ("cluster string, user string, client_id string, bucket string, key string, number int, "
           "exact boolean, split boolean")


def impact_rows(spark: Any, states: Mapping[str, tuple[QuotaState, QuotaState]], usage: Any,
                q: float | None, *, window: float = DEFAULT_WINDOW, seen: Seen | None = None) -> Impact:
    """The :class:`~kqplan.fleet.impact.Impact` of :func:`kqplan.fleet.impact.impact_rows` from a
    usage frame (:func:`kqplan.fleet.spark_usage.usage_frame`); ``seen`` hears the clusters the
    usage names (:func:`~kqplan.fleet.spark_impact.usage_aggregates`)."""
    # no means per window from the pass (as many rows as the samples on the windows shape): only
    # the units of buckets with several members need theirs, read again for them (_totals)
    with usage_aggregates(usage, list(states), q, window, seen, buckets=True,
                          windows=False) as (base, _, untimed, _):
        stats: dict[Unit, dict[str, float]] = {}
        observed: set[Unit] = set()
        own: list[tuple[Unit, str, float]] = []
        for cluster, user, client_id, kind, key, value, alone in collect_rows(
                base.select(*UNIT_KEYS, "usage", "own")):
            unit = (cluster, user, client_id, kind)
            observed.add(unit)
            if value is not None:
                stats.setdefault(unit, {})[key] = value
            if alone is not None:
                own.append((unit, key, alone))
        units = sorted(observed)
        sides = placements(states, units)
        members = [Members.of(side) for side in sides]
        numbers = numbered(members)
        keys = {key for found in stats.values() for key in found}
        placed = memberships(members, numbers=numbers, untimed=untimed, keys=keys)
        totals = _totals(spark, placed, (usage, window), own, q)
    buckets = [judged_buckets(states, side, found, untimed=untimed, totals=totals, numbers=numbers,
                              stats=stats, q=q) for side, found in enumerate(members)]
    return Impact(_rows(units, sides, buckets, stats), _unused(states, sides), frozenset(untimed),
                  sorted(b for judged in buckets for b in judged.values()))


def _totals(spark: Any, placed: Memberships, usage: tuple[Any, float], own: Sequence[tuple[Unit, str, float]],
            q: float | None) -> Totals:
    """:data:`~kqplan.fleet.members.Totals` of the buckets :class:`Memberships` names: a bucket
    alone its unit's statistic over its window means (``own``: per unit and key, collected), the
    others their units' means per window (:func:`~kqplan.fleet.spark_impact.unit_means` of the
    ``usage`` frame and window, for those units only) summed per window on Spark, then the
    statistics over the windows."""
    from pyspark.sql import functions as F

    totals: dict[int, tuple[float | None, float | None]] = {}
    if placed.single:
        uids = {unit: uid for uid, unit in enumerate(placed.units)}
        for unit, key, value in own:
            uid = uids.get(unit)
            for number in placed.single.get((uid, key), ()) if uid is not None else ():
                totals[number] = (value, None)
    if placed.rows:
        rows = [(*placed.units[uid], USAGE_KEYS[k], number, exact, split)
                for uid, k, number, exact, split in placed.rows]
        frame, window = usage
        means = unit_means(frame, list(dict.fromkeys(placed.units[uid] for uid, *_ in placed.rows)), window)
        mean, exact, split = F.col("mean"), F.col("exact"), F.col("split")
        found = (frame_of(spark, rows, _MEMBER).join(means, UNIT_KEYS).groupBy("number", "w")
                 .agg(F.sum(F.when(exact, mean)).alias("known"), F.sum(F.when(split, mean)).alias("most"))
                 .groupBy("number").agg(_statistic("known", q), _statistic("most", q)))
        totals.update((n, (known, most)) for n, known, most in collect_rows(found))
    return totals

