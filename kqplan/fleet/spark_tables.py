"""The Spark engine's tables written by Spark itself, where ``--out`` names a URI: ``impact`` and
``unused`` (Parquet directories), with only the per-cluster summaries and the charts' bin counts
reaching this process; and ``fleet plan``'s ``changes``.

Display forms are the core's (:attr:`kqplan.core.entity.Entity.display`): a name of printable
ASCII that is not ``<default>`` and does not start with a backslash is shown as it is, in Spark;
the few other names are collected, spelled by the core, and joined back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kqplan.core.entity import DEFAULT_NAME, escape_name, visible
from kqplan.core.errors import KqplanError
from kqplan.core.filenames import component_problem
from kqplan.core.state import QuotaState
from kqplan.fleet.impact import DEFAULT_WINDOW, ClusterImpact, Throttled
from kqplan.fleet.spark import frame_of
from kqplan.fleet.tables import BINS, CAP, Histogram, edges

if TYPE_CHECKING:
    from kqplan.fleet.spark_impact import Seen

IMPACT = "impact.parquet"
UNUSED = "unused.parquet"
CHANGES = "changes.parquet"


def join_uri(base: str, name: str) -> str:
    """``base/name`` for a table Spark writes under a URI: ``name`` one plain file name (checked as
    :func:`kqplan.files.inside` checks a local one), so nothing lands outside ``base``."""
    problem = component_problem(name)
    if problem is not None:
        raise KqplanError(f"cannot write {visible(name)!r} under {visible(base)}: {problem}",
                          hint="names used as file names must be plain names, not paths")
    return base.rstrip("/") + "/" + name


def _plain(column: Any) -> Any:
    from pyspark.sql import functions as F

    return column.rlike("^[ -~]*$") & (column != F.lit(DEFAULT_NAME)) & ~column.startswith("\\")


def _shown_names(spark: Any, table: Any) -> Any:
    """``(name, shown)`` for the users and client-ids of ``table`` that are not shown as they are."""
    from pyspark.sql import functions as F

    names = (table.select(F.col("user").alias("name"))
             .union(table.select(F.col("client_id").alias("name"))))
    odd = [r[0] for r in names.where(~_plain(F.col("name"))).distinct().collect()]
    return frame_of(spark, [(n, visible(escape_name(n))) for n in odd], "name string, shown string")


def with_display(spark: Any, table: Any) -> Any:
    """:func:`kqplan.fleet.spark_impact.impact_frame`'s table with each side's bucket in display
    form (``before_group``, ``after_group``): the columns of ``impact.parquet``."""
    from pyspark.sql import functions as F

    shown = F.broadcast(_shown_names(spark, table))
    table = (table.join(shown.select(F.col("name").alias("user"), F.col("shown").alias("su")), "user", "left")
             .join(shown.select(F.col("name").alias("client_id"), F.col("shown").alias("sc")), "client_id",
                   "left"))
    su, sc = F.coalesce(F.col("su"), F.col("user")), F.coalesce(F.col("sc"), F.col("client_id"))

    def group(side: str) -> Any:
        bu, bc = F.col(f"{side}_bu"), F.col(f"{side}_bc")
        parts = F.concat_ws(", ", F.when(bu.isNotNull(), F.concat(F.lit("user="), su)),
                            F.when(bc.isNotNull(), F.concat(F.lit("client-id="), sc)))
        return F.when(bu.isNotNull() | bc.isNotNull(), F.concat(F.lit("{"), parts, F.lit("}")))

    return table.select(
        "cluster", "user", "client_id", "key", "usage", "before_value", "before_source",
        group("before").alias("before_group"), "before_group_usage", "after_value", "after_source",
        group("after").alias("after_group"), "after_group_usage", "utilization", "would_throttle")


def _unused(spark: Any, states: Mapping[str, tuple[QuotaState, QuotaState]], table: Any) -> Any:
    """The quota entries after the plan that no observed principal resolves to: ``cluster, entity,
    key``, as :func:`kqplan.fleet.impact.impact_rows` lists them."""
    from pyspark.sql import functions as F

    from kqplan.fleet.spark_impact import quota_entries

    entries = quota_entries(spark, {cluster: pair[1] for cluster, pair in states.items()})
    used = (table.where(F.col("after_source").isNotNull())
            .select("cluster", F.col("after_source").alias("source"), "key").distinct())
    return (entries.join(used, ["cluster", "source", "key"], "left_anti")
            .select("cluster", F.col("source").alias("entity"), "key"))


def _bins(values: Any) -> Any:
    """Each value's bin among :func:`~kqplan.fleet.tables.edges`, as numpy's histogram bins it
    (clipped into [0, CAP]; a bin holds its lower edge, the last one both)."""
    from pyspark.sql import functions as F

    bounds = F.array(*(F.lit(e) for e in edges()))
    v = F.least(F.greatest(values, F.lit(0.0)), F.lit(CAP))
    guess = F.least(F.floor(v * F.lit(BINS / CAP)).cast("int"), F.lit(BINS - 1))
    below = v < F.element_at(bounds, guess + 1)
    above = (guess != F.lit(BINS - 1)) & (v >= F.element_at(bounds, guess + 2))
    return F.when(below, guess - 1).when(above, guess + 1).otherwise(guess)


def _histograms(table: Any) -> dict[str, Histogram]:
    from pyspark.sql import functions as F

    buckets = (table.where(F.col("utilization").isNotNull())
               .select("cluster", "after_group", "key", "utilization").distinct())
    counts: dict[str, list[int]] = {}
    over: dict[str, int] = {}
    for cluster, bin_, n, high in (buckets.groupBy("cluster", _bins(F.col("utilization")).alias("bin"))
                                   .agg(F.count("*"), F.sum(F.when(F.col("utilization") > 1, 1)
                                                            .otherwise(0)))).collect():
        counts.setdefault(cluster, [0] * BINS)[bin_] += n
        over[cluster] = over.get(cluster, 0) + high
    return {c: Histogram(tuple(v), over[c]) for c, v in counts.items()}


def _summaries(table: Any, unused: Any, clusters: Sequence[str], untimed: Sequence[str]
               ) -> dict[str, ClusterImpact]:
    """:func:`kqplan.fleet.impact.summarize` as aggregations: only their results come back."""
    from pyspark.sql import functions as F

    def per_cluster(frame: Any) -> dict[str, int]:
        return {r[0]: r[1] for r in frame.collect()}

    principals = per_cluster(table.groupBy("cluster").agg(F.countDistinct("user", "client_id")))
    unlimited = per_cluster(table.where(F.col("usage").isNotNull() & F.col("after_value").isNull())
                            .groupBy("cluster").agg(F.countDistinct("user", "client_id")))
    unused_count = per_cluster(unused.groupBy("cluster").count())
    before = (F.col("before_group_usage").isNotNull() & F.col("before_value").isNotNull()
              & (F.col("before_group_usage") > F.col("before_value")))
    group = ["cluster", "after_group", "key"]
    hit = (table.where(F.col("would_throttle") & ~before & F.col("after_group").isNotNull())
           .groupBy(*group).agg(F.first("after_group_usage").alias("usage"),
                                F.first("after_value").alias("quota")))
    members = (table.where(F.col("after_group").isNotNull()).groupBy(*group)
               .agg(F.countDistinct("user", "client_id").alias("members")))
    throttled: dict[str, list[Throttled]] = {}
    for r in hit.join(members, group).collect():
        throttled.setdefault(r["cluster"], []).append(
            Throttled(r["after_group"], r["key"], r["members"], r["usage"], r["quota"]))
    relieved: dict[str, list[Throttled]] = {}
    freed = (table.where(before & ~F.col("would_throttle") & F.col("before_group").isNotNull())
             .groupBy("cluster", "before_group", "key")
             .agg(F.countDistinct("user", "client_id").alias("members"),
                  F.first("before_group_usage").alias("usage"), F.first("before_value").alias("quota")))
    for r in freed.collect():
        relieved.setdefault(r["cluster"], []).append(
            Throttled(r["before_group"], r["key"], r["members"], r["usage"], r["quota"]))
    return {c: ClusterImpact(principals.get(c, 0), tuple(sorted(throttled.get(c, []))), unlimited.get(c, 0),
                             unused_count.get(c, 0), c not in untimed, tuple(sorted(relieved.get(c, []))))
            for c in sorted(clusters)}


def write_impact(spark: Any, states: Mapping[str, tuple[QuotaState, QuotaState]], usage: Any,
                 q: float | None, *, out: str, window: float = DEFAULT_WINDOW, seen: Seen | None = None
                 ) -> tuple[dict[str, ClusterImpact], dict[str, Histogram]]:
    """``out/impact.parquet`` and ``out/unused.parquet`` written by Spark (replaced when there),
    and what the summary and the charts need; ``seen`` hears the clusters the usage names before
    anything is written (:func:`kqplan.fleet.spark_impact.usage_aggregates`)."""
    from kqplan.fleet.spark_impact import impact_frame

    with impact_frame(spark, states, usage, q, window=window, seen=seen) as (frame, untimed):
        table = with_display(spark, frame).persist()
        try:
            table.write.mode("overwrite").parquet(join_uri(out, IMPACT))
            unused = _unused(spark, states, table).persist()
            try:
                unused.write.mode("overwrite").parquet(join_uri(out, UNUSED))
                return _summaries(table, unused, list(states), untimed), _histograms(table)
            finally:
                unused.unpersist()
        finally:
            table.unpersist()
