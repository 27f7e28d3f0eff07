"""The Spark engine's tables written by Spark itself, where ``--out`` names a URI: ``impact``,
``buckets`` and ``unused`` (Parquet directories), with only the per-cluster summaries and the
charts' bin counts reaching this process; and ``fleet plan``'s ``changes``.

Display forms are the core's (:attr:`kqplan.core.entity.Entity.display`): a name of printable
ASCII that is not ``<default>`` and does not start with a backslash is shown as it is, in Spark;
the few other names are collected, spelled by the core, and joined back. The impact shows a
bucket (and a source) as :func:`kqplan.core.buckets.shown` does: the class of the names no row
names (:data:`~kqplan.core.buckets.OTHERS`) as ``(others)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kqplan.core.buckets import OTHERS_SHOWN, OTHERS_WHOLE
from kqplan.core.entity import CLIENT_ID, DEFAULT_NAME, USER, Entity, escape_name, visible
from kqplan.core.errors import KqplanError
from kqplan.core.filenames import component_problem
from kqplan.core.state import QuotaState
from kqplan.fleet.impact import DEFAULT_WINDOW, IMPACT_COLUMNS, BucketRow, ClusterImpact, Throttled
from kqplan.fleet.spark import filesystem_errors, frame_of
from kqplan.fleet.tables import BINS, CAP, Histogram, edges

if TYPE_CHECKING:
    from kqplan.fleet.spark_impact import Seen

IMPACT = "impact.parquet"
BUCKETS = "buckets.parquet"
UNUSED = "unused.parquet"
CHANGES = "changes.parquet"
BUCKET_COLUMNS = BucketRow._fields


def shown_tags(user: str | None, client_id: str | None) -> str | None:
    """A bucket's display form from its tags (the core's entity: names escaped as everywhere)."""
    parts = [(t, n) for t, n in ((USER, user), (CLIENT_ID, client_id)) if n is not None]
    return Entity(tuple(parts)).display if parts else None


def join_uri(base: str, name: str) -> str:
    """``base/name`` for a table Spark writes under a URI: ``name`` one plain file name (checked as
    :func:`kqplan.files.inside` checks a local one), so nothing lands outside ``base``."""
    problem = component_problem(name)
    if problem is not None:
        raise KqplanError(f"cannot write {visible(name)!r} under {visible(base)}: {problem}",
                          hint="names used as file names must be plain names, not paths")
    return base.rstrip("/") + "/" + name


def write_table(frame: Any, out: str, name: str) -> None:
    """``frame`` as the Parquet directory ``out/name`` (:func:`join_uri`), replaced when there; a
    filesystem Spark lacks or cannot reach is said so (:func:`~kqplan.fleet.spark.filesystem_error`)."""
    uri = join_uri(out, name)
    with filesystem_errors(frame.sparkSession, "--out", out):
        frame.write.mode("overwrite").parquet(uri)


def _plain(column: Any) -> Any:
    from pyspark.sql import functions as F

    return column.rlike("^[ -~]*$") & (column != F.lit(DEFAULT_NAME)) & ~column.startswith("\\")


def _shown_names(spark: Any, groups: Any) -> Any:
    """``(name, shown)`` for the bucket tags of ``groups`` that are not shown as they are (every
    bucket a row falls in is among them)."""
    from pyspark.sql import functions as F

    names = groups.select(F.col("bu").alias("name")).union(groups.select(F.col("bc").alias("name")))
    odd = [r[0] for r in names.where(F.col("name").isNotNull() & ~_plain(F.col("name"))).distinct().collect()]
    return frame_of(spark, [(n, visible(escape_name(n))) for n in odd], "name string, shown string")


def _others(text: Any) -> Any:
    """A display form with :data:`~kqplan.core.buckets.OTHERS` shown as :func:`kqplan.core.buckets.shown`
    shows it, in Spark."""
    from pyspark.sql import functions as F

    return F.regexp_replace(text, F.lit(OTHERS_WHOLE), F.lit(OTHERS_SHOWN))


def _with_group(frame: Any, shown: Any, prefix: str, name: str) -> Any:
    """``frame`` with ``name``: the bucket of the tags ``{prefix}bu, {prefix}bc`` in display form."""
    from pyspark.sql import functions as F

    for tag in ("bu", "bc"):
        odd = shown.select(F.col("name").alias(f"kq_{tag}"), F.col("shown").alias(f"kq_{tag}_shown"))
        frame = frame.join(odd, F.col(f"{prefix}{tag}") == F.col(f"kq_{tag}"), "left").drop(f"kq_{tag}")
    bu, bc = F.col(f"{prefix}bu"), F.col(f"{prefix}bc")
    su, sc = F.coalesce(F.col("kq_bu_shown"), bu), F.coalesce(F.col("kq_bc_shown"), bc)
    parts = F.concat_ws(", ", F.when(bu.isNotNull(), F.concat(F.lit("user="), su)),
                        F.when(bc.isNotNull(), F.concat(F.lit("client-id="), sc)))
    group = F.when(bu.isNotNull() | bc.isNotNull(), _others(F.concat(F.lit("{"), parts, F.lit("}"))))
    return frame.withColumn(name, group).drop("kq_bu_shown", "kq_bc_shown")


def with_display(spark: Any, table: Any, groups: Any) -> tuple[Any, Any]:
    """:func:`kqplan.fleet.spark_impact.impact_frame`'s tables with each bucket in display form:
    the columns of ``impact.parquet`` (and ``kq_after_source``, the entry as ``unused`` compares
    it) and of ``buckets.parquet``."""
    from pyspark.sql import functions as F

    shown = F.broadcast(_shown_names(spark, groups))
    for side in ("before", "after"):
        table = _with_group(table, shown, f"{side}_", f"{side}_group")
    table = table.withColumn("kq_after_source", F.col("after_source"))
    for side in ("before", "after"):
        table = table.withColumn(f"{side}_source", _others(F.col(f"{side}_source")))
    return (table.select(*IMPACT_COLUMNS, "kq_after_source"),
            _with_group(groups, shown, "", "bucket").select(*BUCKET_COLUMNS))


def _unused(spark: Any, states: Mapping[str, tuple[QuotaState, QuotaState]], table: Any) -> Any:
    """The quota entries after the plan that no observed row resolves to: ``cluster, entity, key``,
    as :func:`kqplan.fleet.impact.impact_rows` lists them."""
    from pyspark.sql import functions as F

    from kqplan.fleet.spark_impact import quota_entries

    entries = quota_entries(spark, {cluster: pair[1] for cluster, pair in states.items()})
    used = (table.where(F.col("kq_after_source").isNotNull())
            .select("cluster", F.col("kq_after_source").alias("source"), "key").distinct())
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


def _summaries(table: Any, groups: Any, unused: Any, clusters: Sequence[str], untimed: Sequence[str]
               ) -> dict[str, ClusterImpact]:
    """:func:`kqplan.fleet.impact.summarize` as aggregations: only their results come back."""
    from pyspark.sql import functions as F

    def per_cluster(frame: Any) -> dict[str, int]:
        return {r[0]: r[1] for r in frame.collect()}

    unit = ("user", "client_id", "bucket")
    principals = per_cluster(table.groupBy("cluster").agg(F.countDistinct(*unit)))
    unlimited = per_cluster(table.where(F.col("usage").isNotNull() & F.col("after_value").isNull()
                                        & ~F.col("after_split"))
                            .groupBy("cluster").agg(F.countDistinct(*unit)))
    unused_count = per_cluster(unused.groupBy("cluster").count())
    before, after = F.col("throttled_before"), F.col("would_throttle")
    group = ["cluster", "after_group", "key"]
    hit = (table.where(after.eqNullSafe(True) & before.eqNullSafe(False) & F.col("after_group").isNotNull())
           .groupBy(*group).agg(F.first("after_group_usage").alias("usage"),
                                F.first("after_value").alias("quota")))
    members = (table.where(F.col("after_group").isNotNull()).groupBy(*group)
               .agg(F.countDistinct(*unit).alias("members")))
    found: dict[str, tuple[list[Throttled], ...]] = {c: ([], [], []) for c in clusters}
    for r in hit.join(members, group).collect():
        found[r["cluster"]][0].append(
            Throttled(r["after_group"], r["key"], r["members"], r["usage"], r["quota"]))
    freed = (table.where(before.eqNullSafe(True) & after.eqNullSafe(False)
                         & F.col("before_group").isNotNull())
             .groupBy("cluster", "before_group", "key")
             .agg(F.countDistinct(*unit).alias("members"),
                  F.first("before_group_usage").alias("usage"), F.first("before_value").alias("quota")))
    for r in freed.collect():
        found[r["cluster"]][1].append(
            Throttled(r["before_group"], r["key"], r["members"], r["usage"], r["quota"]))
    unknown = groups.where((F.col("side") == "after") & F.col("throttled").isNull())
    for r in sorted(unknown.collect(), key=lambda r: (r["key"], r["bucket"])):  # the reference's order
        found[r["cluster"]][2].append(Throttled(r["bucket"], r["key"], r["members"] + r["shares"], r["usage"],
                                                r["value"], r["usage_max"]))
    return {c: ClusterImpact(principals.get(c, 0), tuple(sorted(found[c][0])), unlimited.get(c, 0),
                             unused_count.get(c, 0), c not in untimed, tuple(sorted(found[c][1])),
                             tuple(found[c][2]))
            for c in sorted(clusters)}


def write_impact(spark: Any, states: Mapping[str, tuple[QuotaState, QuotaState]], usage: Any,
                 q: float | None, *, out: str, window: float = DEFAULT_WINDOW, seen: Seen | None = None
                 ) -> tuple[dict[str, ClusterImpact], dict[str, Histogram]]:
    """``out/impact.parquet``, ``out/buckets.parquet`` and ``out/unused.parquet`` written by Spark
    (replaced when there), and what the summary and the charts need; ``seen`` hears the clusters
    the usage names before anything is written (:func:`kqplan.fleet.spark_impact.usage_aggregates`)."""
    from kqplan.fleet.spark_impact import impact_frame

    with impact_frame(spark, states, usage, q, window=window, seen=seen) as (frame, found, untimed):
        table, groups = with_display(spark, frame, found)
        table, groups = table.persist(), groups.persist()
        try:
            write_table(table.select(*IMPACT_COLUMNS), out, IMPACT)
            write_table(groups, out, BUCKETS)
            unused = _unused(spark, states, table).persist()
            try:
                write_table(unused, out, UNUSED)
                return _summaries(table, groups, unused, list(states), untimed), _histograms(table)
            finally:
                unused.unpersist()
        finally:
            table.unpersist()
            groups.unpersist()
