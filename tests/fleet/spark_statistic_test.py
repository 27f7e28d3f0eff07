"""The Spark engine's statistic (max, or Spark SQL's exact ``percentile``) is the reference's
(:func:`kqplan.fleet.samples.statistic`): the same ranks and interpolation on one value, two, ties,
a group with most of the values, values of every magnitude; a group with no value is null. The
maximum is equal bit for bit; a quantile within 1e-12 of it, relatively: Spark interpolates as
``(high - position) * v[low] + (position - low) * v[high]``, the reference as ``v[low] + (v[high] -
v[low]) * (position - low)``, a last bit apart at most. (Computing the reference's arithmetic on
Spark from each group's values sorted was tried, issue 42: 14-18 % slower; benchmarks/README.md.)
(This file asks for the session ``spark`` fixture: it sorts after connect_test.py.)"""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from kqplan.fleet.samples import statistic
from kqplan.fleet.spark import frame_of
from kqplan.fleet.spark_impact import _statistic


def _groups() -> dict[int, list[float]]:
    draw = random.Random(42)
    groups: dict[int, list[float]] = {0: [5.0], 1: [10.0, 20.0], 2: [3.0, 3.0, 3.0], 3: [0.0, -0.0, 1.0],
                                      4: [1e300, 1e-300, 7.5], 5: [2.0, 1.0] * 50}
    for g in range(6, 400):
        n = draw.choice([1, 2, 3, 7, 99, 100, 101, 1000])
        scale = draw.choice([1.0, 1e-3, 1e9])
        # ties within a group: some groups draw from a few values only
        pool = [draw.random() * scale for _ in range(draw.choice([2, 5, n]))]
        groups[g] = [draw.choice(pool) for _ in range(n)]
    groups[400] = [draw.random() for _ in range(20_000)]  # one group with most of the values
    return groups


@pytest.mark.parametrize("q", [None, 0.5, 0.9, 0.99, 0.999, 0.01, 1 / 3])
def test_the_spark_statistic_is_the_reference_s(spark: Any, q: float | None) -> None:
    groups = _groups()
    rows = [(g, v) for g, values in groups.items() for v in values] + [(-1, None), (-1, None)]
    frame = frame_of(spark, rows, "g int, v double")
    found = {g: v for g, v in frame.groupBy("g").agg(_statistic("v", q).alias("s")).collect()}
    assert found.pop(-1) is None  # a group without a value (nulls only): no statistic
    wrong = {g: (found[g], statistic(values, q)) for g, values in groups.items()
             if not (found[g] == statistic(values, q) if q is None
                     else math.isclose(found[g], statistic(values, q), rel_tol=1e-12, abs_tol=1e-300))}
    assert not wrong, f"{len(wrong)} groups differ, e.g. {sorted(wrong.items())[:3]}"


# -- a unit of millions of samples: the bounded way (kqplan/fleet/spark_heavy.py) -------------------

def _heavy_frame(spark: Any) -> tuple[Any, dict[int, dict[str, list[float]]]]:
    """Units ``g`` with the four keys: the statistic test's groups (one value, ties, ±0, 1e±300,
    20,000 values), producer as drawn, consumer their negatives, request with no value at all,
    controller every other value only."""
    from kqplan.fleet.usage import USAGE_KEYS

    groups = {g: v for g, v in _groups().items() if g <= 5 or len(v) >= 1000}
    groups[401] = [random.Random(7).random() for _ in range(200_000)]
    rows, keyed = [], {}
    for g, values in groups.items():
        columns = {USAGE_KEYS[0]: values, USAGE_KEYS[1]: [-v for v in values], USAGE_KEYS[2]: [],
                   USAGE_KEYS[3]: values[::2]}
        keyed[g] = columns
        rows += [(g, v, -v, None, v if i % 2 == 0 else None) for i, v in enumerate(values)]
    schema = "g int, " + ", ".join(f"{k} double" for k in USAGE_KEYS)
    return frame_of(spark, rows, schema), keyed


@pytest.mark.parametrize("q", [0.5, 0.99, 0.01])  # the top side at its least, at p99; the bottom side
def test_the_bounded_quantile_of_a_heavy_unit_is_the_reference_s_to_the_bit(spark: Any, q: float) -> None:
    """Every key's quantile from the values kept around its closest ranks, in the reference's own
    arithmetic: equal bit for bit; a unit of few samples (whose bound may fall within its ranks)
    gives Spark's percentile (within 1e-12); a key without a value, null; the other aggregates
    ride along."""
    from pyspark.sql import functions as F

    from kqplan.fleet import spark_heavy
    from kqplan.fleet.usage import USAGE_KEYS

    frame, keyed = _heavy_frame(spark)
    units = [(g,) for g in keyed]
    big = [(g,) for g, columns in keyed.items() if len(columns[USAGE_KEYS[0]]) >= 10_000]
    _, _, stats = spark_heavy.bounded(frame, ["g"], big, q, {})  # the bounded way itself, no fallback
    assert len(big) == 2
    for (g,) in big:
        for k, values in keyed[g].items():
            assert stats[(g,)][k] == (statistic(values, q) if values else None), (g, k, stats[(g,)][k])
    table = spark_heavy.heavy_table(frame, ["g"], units, q, {"rows": F.count(F.lit(1))})
    found = {row["g"]: row for row in table.collect()}
    assert set(found) == set(keyed)
    for g, columns in keyed.items():
        assert found[g]["rows"] == len(columns[USAGE_KEYS[0]])
        for k, values in columns.items():
            assert found[g][f"n_{k}"] == len(values)
            if not values:
                assert found[g][k] is None
                continue
            want = statistic(values, q)
            if len(values) >= 10_000:  # the bounded way, the reference's arithmetic
                assert found[g][k] == want, (g, k, found[g][k], want)
                assert math.copysign(1, found[g][k]) == math.copysign(1, want)
            else:
                assert math.isclose(found[g][k], want, rel_tol=1e-12, abs_tol=1e-300), (g, k)


def test_the_heavy_units_are_those_a_sample_finds_with_a_million_samples(spark: Any, monkeypatch) -> None:
    from kqplan.fleet import spark_heavy

    frame, _ = _heavy_frame(spark)
    monkeypatch.setattr(spark_heavy, "HEAVY", 100_000)  # 80 in the sample of 0.1 % at least
    assert spark_heavy.heavy_units(frame, ["g"]) == [(401,)]  # 200,000 samples: about 200 drawn; 20,000: 20


def test_a_unit_of_well_under_heavy_samples_stays_in_the_one_pass(spark: Any, monkeypatch) -> None:
    """A unit of 60 % of HEAVY samples is aggregated by the one pass, which holds it whole and is
    faster at that size (the skewed fleet at 10^6: 5 x 10^5 samples); one of 120 % is heavy."""
    from kqplan.fleet import spark_heavy

    monkeypatch.setattr(spark_heavy, "HEAVY", 100_000)  # 100 expected draws of such a unit, found from 80
    rows = [(1, float(i)) for i in range(60_000)] + [(2, float(i)) for i in range(120_000)]
    frame = frame_of(spark, rows, "g int, v double")
    drawn = dict(frame.sample(withReplacement=False, fraction=spark_heavy.SAMPLED, seed=42)
                 .groupBy("g").count().collect())
    assert 50 <= drawn[1] < 80 <= drawn[2]  # half of the expected draws would have found both
    assert spark_heavy.heavy_units(frame, ["g"]) == [(2,)]
