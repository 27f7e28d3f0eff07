"""Each unit's statistics from its samples sorted, in the executors' Python (Arrow and numpy).

The usage rows are shuffled once by unit (:data:`UNIT`) and sorted by unit and window within
each partition, by Spark; they reach Python as Arrow batches (``mapInArrow``), and numpy computes,
for the units of a batch at once, per unit and key: the count of samples, the statistic over them,
the mean per window and the statistic over those means; per unit, its samples without ``ts`` and
whether a row of it is refused. A unit may go on in the next batch: its rows wait for it, so a
worker holds a batch and the largest unit at most, whatever the partition's size.

Why not Spark SQL's ``percentile``: it keeps a hash map of boxed doubles per group, and the engine
needed it twice per unit (over the samples, then over the window means, after a second read of the
usage for the means). Sorting is the reference's own way (:func:`kqplan.fleet.samples.statistic`),
and its arithmetic here (:func:`quantiles`) is the reference's, elementwise on float64: the value
of the closest rank below plus the gap to the one above times the position's fraction — equal to
the reference's to the bit, where ``percentile`` may differ in the last one (a window's mean may
still differ in the last bit: Spark's sort does not keep the rows' order within a window).
Measured in benchmarks/README.md (issue 42).

A unit with millions of samples takes :mod:`kqplan.fleet.spark_heavy`'s way instead, as before
(the caller leaves it out of this pass): in bounded memory, where here it would be held whole.

The executors need numpy and pyarrow (pyspark's Arrow features need pyarrow already), not kqplan:
this module's functions travel by value and import nothing of kqplan's.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

UNIT = ("cluster", "user", "client_id", "bucket")
KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")
""":data:`kqplan.fleet.usage.USAGE_KEYS` (held equal by the tests): this module imports nothing of
kqplan's."""

SORTED = ", ".join(["cluster string, user string, client_id string, bucket string, w long, window boolean",
                    *(f"`{k}` double, `n_{k}` long, `o_{k}` double" for k in KEYS),
                    "untimed long, bad boolean"])
"""The rows :func:`sorted_units` gives: a row per unit (``window`` false; each key's statistic
over its samples, their count ``n_``, the statistic over its window means ``o_``; ``untimed``, its
samples without ``ts``; ``bad``, whether a row of it is refused), and a row per unit and window
with a mean (``window`` true, ``w``; each key's mean in it, null without samples)."""
COLUMNS = [field.split(" ")[0].strip("`") for field in SORTED.split(", ")]
""":data:`SORTED`'s column names, in order."""


def sorted_units(frame: Any, q: float | None, window: float, *, untimed: Any, bad: Any,
                 windows: bool = True) -> Any:
    """The :data:`SORTED` rows of a usage frame; ``untimed`` and ``bad``: whether a row is a sample
    without ``ts``, and refused (boolean columns); ``q`` None: the maximum; ``windows`` false: the
    units' rows only (a row per unit and window is as many rows as the samples where they are one
    per window). Three steps of plan (a Spark Connect plan is nested, and its depth is bounded)."""
    from pyspark import cloudpickle
    from pyspark.sql import functions as F

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]
    rows = frame.select(*UNIT, F.floor(F.col("ts") / F.lit(window)).alias("w"), *KEYS,
                        untimed.alias("untimed"), bad.alias("bad"))
    ordered = rows.repartition(*UNIT).sortWithinPartitions(*UNIT, "w")
    return ordered.mapInArrow(aggregator(q, windows=windows), SORTED)


def aggregator(q: float | None, *, windows: bool = True) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The function each partition's batches go through: :func:`unit_table` of them all."""
    def aggregate(batches: Iterator[Any]) -> Iterator[Any]:
        import numpy as np
        import pyarrow as pa

        pending: list[Any] = []  # the batches of the last unit so far (and of the one before it)
        for batch in batches:
            cut = int(np.flatnonzero(_changes(pa.table(batch), UNIT))[-1]) if batch.num_rows else 0
            if cut == 0:  # every row of the batch one unit's: it may go on in the next one
                pending.append(batch)
                continue
            done = pa.Table.from_batches([*pending, batch.slice(0, cut)])
            yield from unit_table(done, q, ordered=True, windows=windows).to_batches()
            pending = [batch.slice(cut)]
        if pending:
            last = pa.Table.from_batches(pending)
            yield from unit_table(last, q, ordered=True, windows=windows).to_batches()
    return aggregate


def unit_table(table: Any, q: float | None, *, ordered: bool = False, windows: bool = True) -> Any:
    """:data:`SORTED`'s rows of usage rows (a pyarrow Table: ``UNIT``, ``w``, the keys,
    ``untimed``, ``bad``), every unit of which is whole in it; ``ordered``: they are sorted by
    unit and window already; ``windows`` false: the units' rows only."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if not ordered:
        table = table.sort_by([(c, "ascending") for c in (*UNIT, "w")])
    units = _changes(table, UNIT)
    starts = units | _changes(table, ("w",))  # of a unit's window
    unit_of = np.cumsum(units) - 1
    firsts, window_firsts = np.flatnonzero(units), np.flatnonzero(starts)
    window_of = np.cumsum(starts) - 1
    count, window_count = len(firsts), len(window_firsts)
    timed = pc.is_valid(table.column("w")).to_numpy(zero_copy_only=False)[window_firsts]
    window_unit = unit_of[window_firsts]  # each window's unit
    heads, window_heads = pa.array(firsts), pa.array(window_firsts)
    per_unit: dict[str, Any] = {c: table.column(c).take(heads) for c in UNIT}
    per_window: dict[str, Any] = {}  # made only when asked for
    if windows:
        per_window = {c: table.column(c).take(window_heads) for c in (*UNIT, "w")}
        per_window["window"] = pa.array(np.ones(window_count, dtype=bool))
    per_unit |= {"w": pa.nulls(count, pa.int64()), "window": pa.array(np.zeros(count, dtype=bool))}
    known = np.zeros(window_count, dtype=bool)
    for key in KEYS:
        column = table.column(key)
        valid = pc.is_valid(column).to_numpy(zero_copy_only=False)
        values = pc.fill_null(column, 0.0).to_numpy(zero_copy_only=False)[valid]
        stat, n = quantiles(values, unit_of[valid], count, q)
        sums = np.bincount(window_of[valid], weights=values, minlength=window_count)
        seen = np.bincount(window_of[valid], minlength=window_count)
        means = sums / np.maximum(seen, 1)
        has_mean = (seen > 0) & timed
        known |= has_mean
        own, means_n = quantiles(means[has_mean], window_unit[has_mean], count, q)
        per_unit |= {key: _doubles(stat, n > 0), f"n_{key}": pa.array(n),
                     f"o_{key}": _doubles(own, means_n > 0)}
        if windows:
            per_window |= {key: _doubles(means, seen > 0), f"n_{key}": pa.nulls(window_count, pa.int64()),
                           f"o_{key}": pa.nulls(window_count, pa.float64())}
    flags = {name: pc.fill_null(table.column(name), False).to_numpy(zero_copy_only=False)
             for name in ("untimed", "bad")}
    per_unit |= {"untimed": pa.array(np.bincount(unit_of, weights=flags["untimed"], minlength=count)
                                     .astype(np.int64)),
                 "bad": pa.array(np.bincount(unit_of, weights=flags["bad"], minlength=count) > 0)}
    units_table = pa.table({n: per_unit[n] for n in COLUMNS})
    if not windows:
        return units_table
    per_window |= {"untimed": pa.nulls(window_count, pa.int64()), "bad": pa.nulls(window_count, pa.bool_())}
    windowed = pa.table({n: per_window[n] for n in COLUMNS}).filter(pa.array(known))
    return pa.concat_tables([units_table, windowed])


def quantiles(values: Any, groups: Any, count: int, q: float | None) -> tuple[Any, Any]:
    """Per group ``0..count-1`` of ``values`` (``groups``: each value's), the ``q`` quantile
    interpolated between closest ranks (``q`` None: the maximum; NaN for a group without values)
    and the count of values: the reference's arithmetic (:func:`kqplan.fleet.samples.quantile_at`),
    elementwise."""
    import numpy as np

    order = np.lexsort((values, groups))
    ordered = values[order]
    n = np.bincount(groups, minlength=count)
    first = np.cumsum(n) - n
    has = n > 0
    result = np.full(count, np.nan)
    if q is None:
        result[has] = ordered[(first + n - 1)[has]]
        return result, n
    position = q * (n[has] - 1).astype(np.float64)
    low = np.floor(position)
    high = np.minimum(low + 1, n[has] - 1)
    at_low = ordered[first[has] + low.astype(np.int64)]
    at_high = ordered[first[has] + high.astype(np.int64)]
    result[has] = at_low + (at_high - at_low) * (position - low)
    return result, n


def _changes(table: Any, columns: Sequence[str]) -> Any:
    """Per row of a sorted table, whether it starts a new run of ``columns`` (the first row does;
    nulls equal each other)."""
    import numpy as np
    import pyarrow.compute as pc

    rows = table.num_rows
    starts = np.zeros(rows, dtype=bool)
    if rows == 0:
        return starts
    starts[0] = True
    for name in columns:
        column = table.column(name)
        before, after = column.slice(0, rows - 1), column.slice(1)
        differ = pc.fill_null(pc.not_equal(before, after), False)
        differ = pc.or_(differ, pc.not_equal(pc.is_null(before), pc.is_null(after)))
        starts[1:] |= differ.to_numpy(zero_copy_only=False)
    return starts


def _doubles(values: Any, present: Any) -> Any:
    import pyarrow as pa

    return pa.array(values, mask=~present, type=pa.float64())
