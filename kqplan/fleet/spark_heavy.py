"""The exact quantile of a unit with millions of samples, on Spark, in bounded memory.

The one pass over the usage (:mod:`kqplan.fleet.spark_sorted`) holds each unit's rows whole in a
Python worker, as Spark SQL's exact ``percentile`` held every distinct value of a group (a hash
map of boxed doubles, merged whole in one task, then sorted): the skewed fleet's one principal
with 5M samples of four keys outgrew a 4 GiB task heap (benchmarks/README.md, issue 42). The
quantile interpolated between closest ranks needs only the values around those ranks, as the
local engine keeps them (:class:`kqplan.fleet.columnar_stats.Ranks`). So a *heavy* unit — one a
sample of the usage finds with about :data:`HEAVY` samples or more — takes two small passes
instead, spread over every task:

1. per unit and key, its count ``n`` and a bound ``t`` from ``percentile_approx`` a little below
   the quantile (above it for a quantile under the median), whose rank error is at most ``n /``
   :data:`ACCURACY`: every value from the lower closest rank up lies on ``t``'s side;
2. the values on ``t``'s side (about ``n × (1 − q + 5/ACCURACY)``: for p99, 1.05 % of them),
   and the count ``m`` of those on the other side — collected, sorted here, and the
   quantile taken by the reference's own arithmetic (:func:`kqplan.fleet.samples.quantile_at`),
   the value of rank ``r`` being the kept list's ``r − m``.

The bound is checked, not assumed: where a closest rank is not among the kept values (a unit of
few samples, whose ranks the approximation's error and its discrete ranks may cross), that unit
takes Spark's exact ``percentile`` after all — few samples, little memory.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kqplan.fleet.samples import closest_ranks, quantile_at
from kqplan.fleet.usage import USAGE_KEYS

HEAVY = 1_000_000
"""Samples of one unit from which its quantile takes the bounded way. Below it the one pass
(:mod:`kqplan.fleet.spark_sorted`) holds the unit whole in a Python worker: 10^6 rows of one unit
took 70 MiB of Arrow and 69 more to aggregate, 5 x 10^5 half that (measured). It does so faster:
the skewed fleet's principal with 5 x 10^5 samples took 8 s more the bounded way (its two passes and
its window means are three more Spark jobs; benchmarks/README.md, issue 42). Spark SQL's
``percentile`` over four keys of 5M samples each ran out of a 4 GiB heap."""
SAMPLED = 0.001
"""The fraction of the usage's rows the heavy units are found from (seeded: the same units on
the same files)."""
FOUND = 0.8
"""The share of its expected draws (``HEAVY × SAMPLED``) a unit of :data:`HEAVY` samples is found
heavy from: it is drawn about 1,000 times, give or take 32 (the binomial's standard deviation),
so it is found with certainty (6 standard deviations); a unit of half as many samples (500 draws,
give or take 22) never is."""
ACCURACY = 10_000
"""``percentile_approx``'s accuracy: its rank error is at most ``n / ACCURACY``."""
MARGIN = 5 / ACCURACY
"""How far from the quantile the bound is asked for: five times the rank error, so that the bound
lies outside the closest ranks whatever the approximation's error."""


def heavy_units(frame: Any, unit: Sequence[str]) -> list[tuple[Any, ...]]:
    """The units of ``frame`` (by the columns ``unit``) a seeded sample of its rows finds with
    :data:`HEAVY` samples or more (:data:`FOUND` of that in the sample: a unit a little below the
    line may go either way, and both ways give its quantile to the bit)."""
    from pyspark.sql import functions as F

    least = max(1, round(HEAVY * SAMPLED * FOUND))
    drawn = frame.select(*unit).sample(withReplacement=False, fraction=SAMPLED, seed=42)
    found = drawn.groupBy(*unit).count().where(F.col("count") >= least).select(*unit).collect()
    return [tuple(row) for row in found]


def among(frame: Any, unit: Sequence[str], units: Sequence[tuple[Any, ...]], how: str,
          columns: Mapping[str, Sequence[float | None]] | None = None) -> Any:
    """``frame`` joined (``how``: ``left_semi``, ``left_anti``, ``inner``) with the ``units`` by
    the columns ``unit`` (null-safe; the units as a broadcast frame, however many), with
    ``columns`` (name → a value per unit, doubles) added by an inner join."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, StructField, StructType

    types = {f.name: f.dataType for f in frame.schema.fields}
    extra = dict(columns or {})
    schema = StructType([*(StructField(f"kq_{c}", types[c]) for c in unit),
                         *(StructField(name, DoubleType()) for name in extra)])
    rows = [(*values, *(extra[name][i] for name in extra)) for i, values in enumerate(units)]
    match = F.lit(True)
    for c in unit:
        match = match & F.col(c).eqNullSafe(F.col(f"kq_{c}"))
    joined = frame.join(F.broadcast(frame.sparkSession.createDataFrame(rows, schema)), match, how)
    return joined.drop(*(f"kq_{c}" for c in unit)) if how == "inner" else joined


def heavy_table(frame: Any, unit: Sequence[str], units: Sequence[tuple[Any, ...]], q: float,
                others: Mapping[str, Any]) -> Any:
    """The rows of ``frame`` of the heavy ``units`` aggregated as :func:`kqplan.fleet.spark_impact
    .usage_table` aggregates a unit: its columns ``unit``, each key's ``q`` quantile, each key's
    count ``n_KEY``, and ``others`` (name → an aggregate over all its rows)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, StructField, StructType

    first, bounds, stats = bounded(frame, unit, units, q, others)
    unbounded = [values for values, found in stats.items() if any(v is UNBOUNDED for v in found.values())]
    if unbounded:  # a bound within the closest ranks (a unit of few samples): Spark's exact percentile
        for row in among(frame, unit, unbounded, "left_semi").groupBy(*unit).agg(
                *(F.percentile(k, F.lit(q)).alias(k) for k in USAGE_KEYS)).collect():
            found = stats[tuple(row[c] for c in unit)]
            found.update({k: row[k] for k, v in found.items() if v is UNBOUNDED})
    rows = [(*values, *(stats[values][k] for k in USAGE_KEYS), *(row[f"n_{k}"] for k in USAGE_KEYS),
             *(row[name] for name in others)) for values, row in bounds.items()]
    fields = {f.name: f for f in first.schema.fields}
    schema = StructType([*(fields[c] for c in unit), *(StructField(k, DoubleType()) for k in USAGE_KEYS),
                         *(fields[f"n_{k}"] for k in USAGE_KEYS), *(fields[name] for name in others)])
    return frame.sparkSession.createDataFrame(rows, schema)


Stats = dict[tuple[Any, ...], dict[str, float | None]]


def bounded(frame: Any, unit: Sequence[str], units: Sequence[tuple[Any, ...]], q: float,
            others: Mapping[str, Any]) -> tuple[Any, dict[tuple[Any, ...], Any], Stats]:
    """The two passes: the first aggregation (its frame, and its row per unit: ``n_KEY``,
    ``t_KEY``, ``others``), and each unit's ``q`` quantile per key from the values kept beyond
    the bound — :data:`UNBOUNDED` where a closest rank is not among them."""
    from pyspark.sql import functions as F

    top = q >= 0.5  # the kept side: the smaller one
    near = max(0.0, q - MARGIN) if top else min(1.0, q + MARGIN)
    first = among(frame, unit, units, "left_semi").groupBy(*unit).agg(
        *(F.count(k).alias(f"n_{k}") for k in USAGE_KEYS),
        *(F.percentile_approx(k, F.lit(near), F.lit(ACCURACY)).alias(f"t_{k}") for k in USAGE_KEYS),
        *(column.alias(name) for name, column in others.items()))
    bounds = {tuple(row[c] for c in unit): row for row in first.collect()}
    kept: list[Any] = []
    for k in USAGE_KEYS:
        side = F.col(k) >= F.col(f"t_{k}") if top else F.col(k) <= F.col(f"t_{k}")
        kept += [F.collect_list(F.when(side, F.col(k))).alias(f"v_{k}"),
                 F.count(F.when(~side, 1)).alias(f"m_{k}")]
    bound = {f"t_{k}": [row[f"t_{k}"] for row in bounds.values()] for k in USAGE_KEYS}
    second = {tuple(row[c] for c in unit): row for row in
              among(frame, unit, list(bounds), "inner", bound).groupBy(*unit).agg(*kept).collect()}
    stats = {values: {k: _quantile(row[f"n_{k}"], second[values], k, q, top=top) for k in USAGE_KEYS}
             for values, row in bounds.items()}
    return first, bounds, stats


UNBOUNDED = float("nan")
"""A quantile whose closest ranks are not all among the values kept (:func:`_quantile`)."""


def _quantile(n: int, row: Any, key: str, q: float, *, top: bool) -> float | None:
    """The ``q`` quantile of ``n`` values of ``key`` from the kept ones of ``row`` (``top``: every
    value from the bound up, the ``m`` others below it; else every value up to it); None without a
    value; :data:`UNBOUNDED` when a closest rank is not among those kept."""
    if not n:
        return None
    ordered = sorted(row[f"v_{key}"])
    below = row[f"m_{key}"] if top else 0
    _, low, high = closest_ranks(n, q)
    if low < below or high - below >= len(ordered):
        return UNBOUNDED
    return quantile_at(lambda rank: float(ordered[rank - below]), n, q)
