"""kqplan/fleet/spark_sorted.py's arithmetic against the reference's, without Spark: each unit's
statistic over its samples, their count, its means per window and the statistic over those, the
samples without ``ts`` and the refused rows (the Spark engine's rows are held to the reference by
impact_test.py, spark_bucket_rows_test.py and rightsize_test.py)."""

from __future__ import annotations

import math

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from kqplan.fleet import spark_sorted as sorting
from kqplan.fleet.impact import window_means
from kqplan.fleet.samples import Sample, statistic
from kqplan.fleet.spark_impact import UNIT
from kqplan.fleet.usage import USAGE_KEYS

values = st.floats(min_value=0.0, max_value=1e12, allow_nan=False, allow_infinity=False)
stats = st.sampled_from([None, 0.0, 0.01, 0.5, 0.9, 0.99, 0.999, 1.0])


def test_its_names_are_kqplans():
    """The module imports nothing of kqplan's (it travels to the executors by value)."""
    assert sorting.KEYS == USAGE_KEYS
    assert tuple(UNIT) == sorting.UNIT


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), values), max_size=60), st.integers(6, 8), stats)
def test_quantiles_are_the_references_to_the_bit(pairs, count, q):
    import numpy as np

    groups = np.array([g for g, _ in pairs], dtype=np.int64)
    found, n = sorting.quantiles(np.array([v for _, v in pairs], dtype=np.float64), groups, count, q)
    for g in range(count):
        mine = [v for h, v in pairs if h == g]
        assert n[g] == len(mine)
        if mine:  # equal, and of the same sign where zero (0.0 == -0.0, but not here)
            expected = statistic(mine, q)
            assert found[g] == expected
            assert math.copysign(1, found[g]) == math.copysign(1, expected)
        else:
            assert math.isnan(found[g])


units = st.tuples(st.sampled_from(["c", "d", None]), st.sampled_from(["alice", "bob"]),  # None: refused
                  st.sampled_from(["", "app"]), st.sampled_from(["", "user"]))
rows = st.tuples(units, st.one_of(st.none(), st.sampled_from([0.0, 30.0, 59.9, 61.0, 125.0, 3600.5])),
                 st.lists(st.one_of(st.none(), values), min_size=len(USAGE_KEYS), max_size=len(USAGE_KEYS)),
                 st.booleans())


@settings(max_examples=200, deadline=None)
@given(st.lists(rows, max_size=40), stats, st.sampled_from([1.0, 60.0]))
def test_a_partitions_rows_are_the_references(drawn, q, window):
    """Every unit's row and every window's, as the reference computes them from the same rows
    (their order shuffled by the sort: the means summed in the rows' order all the same)."""
    table = pa.table({
        **{c: pa.array([r[0][i] for r in drawn], pa.string()) for i, c in enumerate(UNIT)},
        "w": pa.array([None if r[1] is None else math.floor(r[1] / window) for r in drawn], pa.int64()),
        **{k: pa.array([r[2][i] for r in drawn], pa.float64()) for i, k in enumerate(USAGE_KEYS)},
        "untimed": pa.array([r[1] is None and any(v is not None for v in r[2]) for r in drawn], pa.bool_()),
        "bad": pa.array([r[3] for r in drawn], pa.bool_())})
    out = sorting.unit_table(table, q).to_pylist()
    samples = [Sample(*r[0][:3], k, v, r[1], r[0][3])
               for r in drawn for k, v in zip(USAGE_KEYS, r[2], strict=True) if v is not None]
    means = window_means([s for s in samples if s.ts is not None], window, units=True)
    found = {tuple(o[c] for c in UNIT): o for o in out if not o["window"]}
    assert set(found) == {r[0] for r in drawn}
    assert len(found) == sum(1 for o in out if not o["window"])  # a row per unit, a null name's too
    for unit, row in found.items():
        mine = [r for r in drawn if r[0] == unit]
        assert row["untimed"] == sum(1 for r in mine if r[1] is None and any(v is not None for v in r[2]))
        assert row["bad"] == any(r[3] for r in mine)
        for k in USAGE_KEYS:
            theirs = [s.value for s in samples if s.unit == unit and s.key == k]
            assert row[f"n_{k}"] == len(theirs)
            assert row[k] == (statistic(theirs, q) if theirs else None)
            windowed = means.get((unit, k), {})
            assert row[f"o_{k}"] == (statistic(list(windowed.values()), q) if windowed else None)
    windows = {(tuple(o[c] for c in UNIT), o["w"]): o for o in out if o["window"]}
    expected = {(unit, w) for (unit, _), found_means in means.items() for w in found_means}
    assert set(windows) == expected
    for (unit, w), row in windows.items():
        for k in USAGE_KEYS:
            assert row[k] == means.get((unit, k), {}).get(w)


def test_an_empty_partition_gives_no_rows():
    table = pa.table({**{c: pa.array([], pa.string()) for c in UNIT}, "w": pa.array([], pa.int64()),
                      **{k: pa.array([], pa.float64()) for k in USAGE_KEYS},
                      "untimed": pa.array([], pa.bool_()), "bad": pa.array([], pa.bool_())})
    assert sorting.unit_table(table, 0.99).num_rows == 0
    assert list(sorting.aggregator(0.99)(iter([]))) == []


def sorted_partition(drawn):
    """The rows drawn as a partition reaches the executors' Python: sorted by unit and window."""
    table = pa.table({
        **{c: pa.array([r[0][i] for r in drawn], pa.string()) for i, c in enumerate(UNIT)},
        "w": pa.array([None if r[1] is None else math.floor(r[1] / 60.0) for r in drawn], pa.int64()),
        **{k: pa.array([r[2][i] for r in drawn], pa.float64()) for i, k in enumerate(USAGE_KEYS)},
        "untimed": pa.array([r[1] is None for r in drawn], pa.bool_()),
        "bad": pa.array([r[3] for r in drawn], pa.bool_())})
    return table.sort_by([(c, "ascending") for c in (*UNIT, "w")])


def in_batches(table, sizes):
    """``table`` cut into batches of ``sizes`` (cycled), as Arrow hands a partition over."""
    batches, at = [], 0
    for size in sizes * (1 + table.num_rows):
        if at >= table.num_rows:
            break
        batches.append(table.slice(at, size).to_batches()[0])
        at += size
    return batches


def in_order(rows):
    return sorted(rows, key=lambda row: tuple((v is None, v) for v in row.values()))


@settings(max_examples=150, deadline=None)
@given(st.lists(rows, max_size=40), stats, st.lists(st.integers(1, 7), min_size=1, max_size=40))
def test_batches_give_the_rows_of_their_partition_whole(drawn, q, sizes):
    """A partition's rows in batches of any sizes, sorted as Spark sorts them (a unit going on
    from one batch to the next): the rows of the partition taken whole."""
    table = sorted_partition(drawn)
    out = pa.Table.from_batches(list(sorting.aggregator(q)(iter(in_batches(table, sizes)))),
                                sorting.unit_table(table, q).schema)
    assert in_order(out.to_pylist()) == in_order(sorting.unit_table(table, q).to_pylist())


@settings(max_examples=100, deadline=None)
@given(st.lists(rows, max_size=40), stats, st.lists(st.integers(1, 7), min_size=1, max_size=40))
def test_without_windows_a_partition_gives_its_units_rows_only(drawn, q, sizes):
    """``windows`` false (the impact job's pass): the units' rows of the partition, the same as
    with the windows' rows, and no window's row; in batches of any sizes too."""
    table = sorted_partition(drawn)
    whole = [o for o in sorting.unit_table(table, q).to_pylist() if not o["window"]]
    assert sorting.unit_table(table, q, windows=False).to_pylist() == whole
    out = [row for batch in sorting.aggregator(q, windows=False)(iter(in_batches(table, sizes)))
           for row in batch.to_pylist()]
    assert in_order(out) == in_order(whole)
