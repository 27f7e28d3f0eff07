"""``fleet rightsize`` on Spark: the rows of :func:`kqplan.fleet.rightsize.proposal_rows` as
DataFrame operations over the joins of :mod:`kqplan.fleet.spark_impact` — the eight-level join for
the quota now, the bucket usage of impact, the rounding as a broadcast lookup, the eight-level join
again for the principals a new ``{user=U}`` may move. Rows come back only at the end."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kqplan.core.entity import Entity
from kqplan.core.quotas import QUOTA_KEYS
from kqplan.core.resolve import level_of
from kqplan.core.state import QuotaState
from kqplan.fleet.impact import DEFAULT_WINDOW
from kqplan.fleet.rightsize import (
    BYTE_STEPS,
    PLAIN_STEPS,
    UNWRITTEN,
    Action,
    ProposalRow,
    Rules,
    check_rows,
    target,
)
from kqplan.fleet.usage import USAGE_KEYS

if TYPE_CHECKING:
    from kqplan.fleet.spark_impact import Seen


def _bands() -> list[tuple[str, int, list[float]]]:
    """``(family, band, steps)``: the steps a need of ``floor(log2(need)) == band`` can round up
    to. A step is at most twice the one before, so the answer lies in that band or the next; one
    more on each side absorbs a log2 that errs by one near a power of two."""
    rows = []
    for family, steps in (("bytes", BYTE_STEPS), ("plain", PLAIN_STEPS)):
        exponents = [math.frexp(step)[1] - 1 for step in steps]  # floor(log2(step)), exactly
        for band in range(exponents[0] - 1, exponents[-1] + 2):
            rows.append((family, band, [step for step, e in zip(steps, exponents, strict=True)
                                        if band - 1 <= e <= band + 2]))
    return rows


def with_rounded(spark: Any, table: Any) -> Any:
    """``table`` with ``rounded``: ``need`` rounded up as :func:`~kqplan.fleet.rightsize.round_up`
    does. A lookup rather than arithmetic: log2 picks a small broadcast band of candidate steps,
    and the exact comparison ``step >= need`` picks the step (a CASE over all 150 steps outgrew
    Spark's 64 KB generated-method limit once the optimizer inlined it)."""
    from pyspark.sql import functions as F

    byte_keys = [k for k in USAGE_KEYS if QUOTA_KEYS[k].bytes_per_second]
    is_bytes = F.col("key").isin(byte_keys)
    first = F.when(is_bytes, F.lit(BYTE_STEPS[0])).otherwise(F.lit(PLAIN_STEPS[0]))
    last = F.when(is_bytes, F.lit(BYTE_STEPS[-1])).otherwise(F.lit(PLAIN_STEPS[-1]))
    need = F.greatest(F.col("need"), first)  # below the first step: the first step
    bands = spark.createDataFrame(_bands(), "family string, band int, steps array<double>")
    table = (table.withColumn("family", F.when(is_bytes, F.lit("bytes")).otherwise(F.lit("plain")))
             # NaN and needs beyond the last step get no band, so no step (Python: None)
             .withColumn("band", F.when(F.col("need") <= last, F.floor(F.log2(need)).cast("int")))
             .join(F.broadcast(bands), ["family", "band"], "left"))
    rounded = F.array_min(F.filter(F.col("steps"), lambda step: step >= need))
    return table.withColumn("rounded", rounded).drop("family", "band", "steps")


def _per_key(values: Mapping[str, float]) -> Any:
    """A column with ``values[key]`` for the row's key, null for other keys."""
    from pyspark.sql import functions as F

    column = F.lit(None).cast("double")
    for key, value in values.items():
        column = F.when(F.col("key") == key, F.lit(value)).otherwise(column)
    return column


def _decided(spark: Any, table: Any, rules: Rules) -> Any:
    """``table`` (with ``bucket_usage``, ``g_samples``, ``g_windows`` and the struct ``current``)
    with ``need``, ``proposal`` and ``action``: the tolerance rule, a lowering on too little
    evidence held, as :meth:`Rules.decide`."""
    from pyspark.sql import functions as F

    table = with_rounded(spark, table.withColumn("need", F.col("bucket_usage") * F.lit(rules.headroom)))
    rounded = F.col("rounded")
    proposal = F.when(rounded.isNotNull(), F.greatest(rounded, _per_key(rules.floors))) if rules.floors \
        else rounded
    if rules.caps:
        proposal = F.least(proposal, _per_key(rules.caps))  # least/greatest skip a null bound
    value, p = F.col("current.value"), F.col("proposal")
    lower = F.lit(Action.LOWER.value)
    if rules.min_samples:  # the evidence: the bucket's windows, or without ts its samples
        evidence = F.coalesce(F.col("g_windows"), F.col("g_samples"))
        lower = F.when(evidence < F.lit(rules.min_samples), F.lit(Action.HOLD.value)).otherwise(lower)
    action = (F.when(p.isNull(), F.lit(None))
              .when(value.isNull(), F.lit(Action.LIMIT.value))
              # Spark orders NaN above every number (Python: no comparison holds); both give lower
              .when((p <= value) & (value <= p * F.lit(1.0 + rules.tolerance)), F.lit(Action.KEEP.value))
              .when(value < p, F.lit(Action.RAISE.value)).otherwise(lower))
    return table.withColumn("proposal", proposal).withColumn("action", action)


_RANKS = {(u, c): level.rank for u, c, entity in (
    (True, True, Entity.user_client("U", "C")), (True, False, Entity.user("U")),
    (False, True, Entity.client("C"))) for level in (level_of(entity),) if level is not None}
"""The precedence rank of a bucket's own entity, by the names it carries (user, client-id)."""


def same_group(cluster: str, key: str, bu: str, bc: str) -> list[Any]:
    """Join conditions of a row's group columns to :func:`~kqplan.fleet.spark_impact.group_usage`'s:
    a bucket's tags are its identity, compared null-safe (a user bucket has no client-id tag)."""
    from pyspark.sql import functions as F

    return [F.col(mine).eqNullSafe(F.col(theirs)) for mine, theirs in (
        (cluster, "g_cluster"), (key, "g_key"), (bu, "g_bu"), (bc, "g_bc"))]


def spark_proposal_rows(spark: Any, states: Mapping[str, QuotaState], usage: Any, rules: Rules, *,
                        window: float = DEFAULT_WINDOW, seen: Seen | None = None) -> list[ProposalRow]:
    """The rows of :func:`~kqplan.fleet.rightsize.proposal_rows` from a usage frame
    (:func:`kqplan.fleet.spark_usage.usage_frame`); ``seen`` hears the clusters the usage names
    (:func:`kqplan.fleet.spark_impact.usage_aggregates`). A quota bucket's row is refused, naming
    its file and row, as ``read_usage`` refuses it: a proposal is made per principal."""
    from pyspark.sql import functions as F

    from kqplan.fleet.spark_impact import (
        KEYS,
        bucket_tags,
        group_usage,
        quota_entries,
        usage_aggregates,
        with_effective,
    )

    with usage_aggregates(usage, list(states), rules.q, window, seen) as (base, means, untimed, _):
        entries = quota_entries(spark, states)
        table = with_effective(spark, base.drop("own").where(F.col("usage").isNotNull()), entries, "current")
        unlimited = F.col("current").isNull()
        # the bucket now (null: unlimited), and the group a proposal is made for: the bucket, or
        # for an unlimited principal its own entity
        now_u, now_c = bucket_tags("current")
        own_c = F.when(F.col("client_id") != "", F.col("client_id"))
        table = (table.withColumn("now_u", now_u).withColumn("now_c", now_c)
                 .withColumn("bu", F.when(unlimited, F.col("user")).otherwise(now_u))
                 .withColumn("bc", F.when(unlimited, own_c).otherwise(now_c)))
        totals = group_usage(table.select(*KEYS, "usage", "samples", "bu", "bc"), means, total="bucket_usage",
                             q=rules.q, untimed=untimed, counts=True)
        table = (table.join(totals, same_group("cluster", "key", "bu", "bc"), "left")
                 .drop("g_cluster", "g_key", "g_bu", "g_bc"))
        # the decided table is read four times below: computed once, its plan cut short
        table = _decided(spark, table, rules).localCheckpoint()
        return _pinned(spark, table, entries, rules)


def _pinned(spark: Any, table: Any, entries: Any, rules: Rules) -> list[ProposalRow]:
    """The written buckets' entries on top of the cluster's, the principals a new ``{user=U}``
    moves out of their bucket pinned on their own entity, and the rows."""
    from pyspark.sql import functions as F

    from kqplan.fleet.spark import collect_rows
    from kqplan.fleet.spark_impact import KEYS, with_effective
    from kqplan.fleet.spark_tables import shown_tags

    written = ~F.col("action").isin(*(a.value for a in UNWRITTEN))

    def slot(name: str) -> Any:
        return F.when(F.col(name).isNull(), F.lit("A")).otherwise(F.concat(F.lit("N:"), F.col(name)))

    new = (table.where(written).select("cluster", slot("bu").alias("u"), slot("bc").alias("c"), "key",
                                        F.col("proposal").alias("value"),
                                        F.lit(None).cast("string").alias("source")).distinct())
    after_entries = entries.join(new, ["cluster", "u", "c", "key"], "left_anti").unionByName(new)
    # only a new {user=U} outranks the entity of another bucket of U's principals
    users = (table.where(written & F.col("bu").isNotNull() & F.col("bc").isNull())
             .select("cluster", "user", "key"))
    candidates = table.select(*KEYS).join(users.distinct(), ["cluster", "user", "key"], "left_semi")
    table = table.join(with_effective(spark, candidates, after_entries, "after").select(*KEYS, "after"),
                       KEYS, "left")
    group_rank = F.lit(None).cast("int")
    for (has_u, has_c), rank in _RANKS.items():
        carries = (F.col("bu").isNotNull() == F.lit(has_u)) & (F.col("bc").isNotNull() == F.lit(has_c))
        group_rank = F.when(carries, F.lit(rank)).otherwise(group_rank)
    expected = F.when(written, group_rank).otherwise(F.col("current.rank"))
    moved = F.coalesce(F.col("after").isNotNull() & (F.col("after.rank") != expected), F.lit(False))
    action = F.when(moved & ~written, F.lit(Action.PIN.value)).otherwise(F.col("action"))
    after_value = F.when(written, F.col("proposal")).otherwise(F.col("current.value"))
    result = table.select(*KEYS, "usage", "now_u", "now_c", "bucket_usage", "g_samples", "g_windows", "need",
                          "proposal", F.col("current.value"), F.col("current.source"), action.alias("action"),
                          after_value.alias("after_value"), moved.alias("moved"), "bu", "bc")
    collected = collect_rows(result)
    # r: 0-3 the principal-key, 4 usage, 5-6 the bucket now, 7 its usage, 8 samples, 9 windows, 10 need,
    # 11 proposal, 12-13 the quota now, 14 action, 15 after_value, 16 moved, 17-18 the bucket written
    check_rows([(r[0], r[1], r[2], r[3], shown_tags(r[17], r[18]), r[10], r[11]) for r in collected])
    rows = []
    for r in collected:
        kept = r[14] in {a.value for a in UNWRITTEN}
        shown = target(r[1], r[2]).display if r[16] else r[13] if kept else shown_tags(r[17], r[18])
        assert shown is not None  # a kept quota has a source; a written one an entity
        windows = None if r[9] is None else int(r[9])
        rows.append(ProposalRow(r[0], r[1], r[2], r[3], r[4], shown_tags(r[5], r[6]), r[7], r[10], r[11],
                                r[12], r[13], r[14], r[15], shown, int(r[8]), windows))
    return sorted(rows)
