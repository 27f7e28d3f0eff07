"""The Spark engine's impact: the usage read by Spark, every observed principal joined against the
eight precedence levels before and after the plan, its bucket, and the
bucket's usage, as DataFrame operations. The rows of :func:`kqplan.fleet.impact.impact_rows`, which
the tests hold it to; the levels and the bucket rule are the core's, taken as data.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from kqplan.core.buckets import bucket
from kqplan.core.entity import CLIENT_ID, USER, Entity, EntityKind
from kqplan.core.resolve import CLIENT_LEVELS, Match, level_of
from kqplan.core.state import QuotaState
from kqplan.fleet.impact import DEFAULT_WINDOW, Impact, ImpactRow, UnusedRow
from kqplan.fleet.spark import collect_rows, frame_of
from kqplan.fleet.usage import USAGE_KEYS


def _slot(match: Match, name: str | None) -> str:
    """An entity part as a join key: ``N:<name>``, ``D`` (the default) or ``A`` (no such part)."""
    return "A" if match is Match.ABSENT else "D" if name is None else f"N:{name}"


_ENTRY = "cluster string, u string, c string, key string, value double, source string"


def quota_entries(spark: Any, states: Mapping[str, QuotaState]) -> Any:
    """Each cluster's user/client-id quota entries keyed by the slots their level is looked up by:
    ``(cluster, u, c, key, value, source)``, source in display form (:func:`with_effective`)."""
    rows = []
    for cluster, state in states.items():
        for entity, quotas in state.items():
            level = level_of(entity)
            if level is None:
                continue
            u = _slot(level.user, entity.get(USER) if USER in entity else None)
            c = _slot(level.client_id, entity.get(CLIENT_ID) if CLIENT_ID in entity else None)
            shown = entity.display
            rows += [(cluster, u, c, k, float(v), shown) for k, v in quotas.items()]
    return frame_of(spark, rows, _ENTRY)


KEYS = ["cluster", "user", "client_id", "key"]


def usage_table(usage: Any, q: float | None) -> Any:
    """Every observed principal × the four keys, with ``usage``: the statistic (max, or Spark SQL's
    exact ``percentile``) over its samples, null for a key without samples; ``samples``, their
    count; ``untimed``, its usage
    rows with a sample and without a ``ts``; and ``bad``, whether a row of it breaks a rule (an
    unchecked usage frame of :func:`kqplan.fleet.spark_usage.usage_frame` carries ``problem``). One
    aggregation of the wide usage rows per principal, the keys side by side."""
    from pyspark.sql import functions as F

    sampled = F.lit(False)
    for k in USAGE_KEYS:
        sampled = sampled | F.col(k).isNotNull()
    bad = F.max(F.col("problem").isNotNull()) if "problem" in usage.columns else F.lit(False)
    wide = usage.groupBy("cluster", "user", "client_id").agg(
        *(_statistic(k, q).alias(k) for k in USAGE_KEYS), *(F.count(k).alias(f"n_{k}") for k in USAGE_KEYS),
        F.count(F.when(sampled & F.col("ts").isNull(), 1)).alias("untimed"), bad.alias("bad"))
    triples = ", ".join(f"'{k}', `{k}`, `n_{k}`" for k in USAGE_KEYS)
    stacked = F.expr(f"stack({len(USAGE_KEYS)}, {triples}) as (key, usage, samples)")
    return wide.select("cluster", "user", "client_id", "untimed", "bad", stacked)


def _stacked(name: str) -> Any:
    """The four key columns of a wide row as rows ``(key, name)``."""
    from pyspark.sql import functions as F

    pairs = ", ".join(f"'{k}', `{k}`" for k in USAGE_KEYS)
    return F.expr(f"stack({len(USAGE_KEYS)}, {pairs}) as (key, {name})")


def _statistic(column: Any, q: float | None) -> Any:
    from pyspark.sql import functions as F

    column = F.col(column) if isinstance(column, str) else column
    return F.max(column) if q is None else F.percentile(column, F.lit(q))


def winners(spark: Any, table: Any, entries: Any, label: str) -> Any:
    """``(cluster, user, client_id, key, label)`` for the principal-keys of ``table``, ``label`` a
    struct ``(rank, value, source, tag_user, tag_client)`` of the entry of ``entries``
    (:func:`quota_entries`) that supplies the key — the first of the eight precedence levels that
    sets it; no row where none does (unlimited). The join's strategy is Spark's: a
    broadcast forced on the entries of a large fleet passes the driver's memory. ``tag_user`` and
    ``tag_client`` say which of the connection's names the key's bucket carries
    (:func:`kqplan.core.buckets.bucket`)."""
    from pyspark.sql import functions as F

    # every principal-key at each of the eight levels, as the entity slots that level looks up
    levels = frame_of(
        spark, [(lv.rank, lv.user.value, lv.client_id.value, lv.empty_client_id,
                 USER in bucket(lv, "U", "C"), CLIENT_ID in bucket(lv, "U", "C")) for lv in CLIENT_LEVELS],
        "rank int, u_match string, c_match string, empty_ok boolean, tag_user boolean, tag_client boolean")

    def slot(match: Any, name: Any) -> Any:
        return (F.when(match == Match.NAME.value, F.concat(F.lit("N:"), name))
                .when(match == Match.DEFAULT.value, F.lit("D")).otherwise(F.lit("A")))

    probes = (table.select(*KEYS).crossJoin(levels)
              .where(~((F.col("client_id") == F.lit("")) & ~F.col("empty_ok")))  # empty: 2 levels only
              .withColumn("u", slot(F.col("u_match"), F.col("user")))
              .withColumn("c", slot(F.col("c_match"), F.col("client_id"))))
    hits = probes.join(entries, ["cluster", "u", "c", "key"])
    return (hits.groupBy(*KEYS)  # lowest rank wins
            .agg(F.min(F.struct("rank", "value", "source", "tag_user", "tag_client")).alias(label)))


def with_effective(spark: Any, table: Any, entries: Any, label: str) -> Any:
    """``table`` (``cluster, user, client_id, key``, …) with the struct column ``label`` of
    :func:`winners`, null where no entry supplies the key (unlimited)."""
    return table.join(winners(spark, table, entries, label), KEYS, "left")


def bucket_tags(side: str) -> tuple[Any, Any]:
    """The bucket's user and client-id tags of a principal-key on one side (:func:`winners`'s
    struct ``side``): the connection's names the bucket carries, null for the others."""
    from pyspark.sql import functions as F

    return (F.when(F.col(f"{side}.tag_user"), F.col("user")),
            F.when(F.col(f"{side}.tag_client"), F.col("client_id")))


def _bucket_usage(base: Any, won: Any, means: Any, *, side: str, q: float | None,
                  untimed: Sequence[str]) -> Any:
    """``(g_cluster, g_key, g_bu, g_bc, {side}_group_usage)`` per bucket of one side
    (:func:`group_usage`). ``g_bu``/``g_bc``: the bucket's user and client-id tags (null when the
    bucket does not carry that name)."""
    bu, bc = bucket_tags(side)
    members = base.join(won, KEYS).select(*KEYS, "usage", bu.alias("bu"), bc.alias("bc"))
    return group_usage(members, means, total=f"{side}_group_usage", q=q, untimed=untimed)


def group_usage(members: Any, means: Any, *, total: str, q: float | None, untimed: Sequence[str],
                counts: bool = False) -> Any:
    """``(g_cluster, g_key, g_bu, g_bc, total)`` per group of ``members`` (``cluster, user,
    client_id, key, usage, bu, bc``; a group is ``cluster, key, bu, bc``): per window, each
    member's mean (``means``: ``cluster, user, client_id, key, w, mean``) summed over the group,
    then the statistic over the windows; in an ``untimed`` cluster the members' statistics summed
    (:func:`kqplan.fleet.impact.group_usage`). ``counts`` (members with ``samples``): also
    ``g_samples``, the members' samples summed, and ``g_windows``, the group's windows (null when
    untimed; :func:`kqplan.fleet.impact.group_windows`)."""
    from pyspark.sql import functions as F

    group = ["cluster", "key", "bu", "bc"]
    windows = [F.count("*").alias("g_windows")] if counts else []
    timed = (members.join(means, KEYS).groupBy(*group, "w").agg(F.sum("mean").alias("window"))
             .groupBy(*group).agg(_statistic("window", q).alias(total), *windows))
    summed = (members.where(F.col("cluster").isin(list(untimed)) & F.col("usage").isNotNull())
              .groupBy(*group).agg(F.sum("usage").alias(total),
                                   *([F.lit(None).cast("long").alias("g_windows")] if counts else [])))
    found = timed.unionByName(summed).select(*(F.col(c).alias(f"g_{c}") for c in group), total,
                                             *(["g_windows"] if counts else []))
    if not counts:
        return found
    n = members.groupBy(*group).agg(F.sum("samples").alias("g_samples"))
    n = n.select(*(F.col(c).alias(f"n_{c}") for c in group), "g_samples")
    joined = found.join(n, [F.col(f"g_{c}").eqNullSafe(F.col(f"n_{c}")) for c in group], "left")
    return joined.drop(*(f"n_{c}" for c in group))


Seen = Callable[[Collection[str]], None]
"""Told every cluster the usage names (an unknown one is an error or a warning: the caller's)."""


@contextmanager
def usage_aggregates(usage: Any, clusters: Sequence[str], q: float | None, window: float,
                     seen: Seen | None = None) -> Iterator[tuple[Any, Any, list[str]]]:
    """The two aggregates of the usage both fleet jobs read, kept while the block runs:
    :func:`usage_table` of ``clusters``, each principal-key's mean per window, and the clusters
    with a sample without ``ts`` (not windowed). Two reads of the usage in all: an unchecked usage
    frame (one with ``problem``) is checked by the first aggregation, every row of any cluster,
    and only when a row breaks a rule is the usage searched again, for the message. ``seen`` hears
    every cluster the usage names, from the same aggregation (the other clusters' rates left out
    of it), before anything else is computed."""
    from pyspark.sql import functions as F

    from kqplan.fleet.spark_usage import check, read_error

    mine = F.col("cluster").isin(list(clusters))
    unchecked = "problem" in usage.columns
    # the rows to check: any broken row (its cluster may be unnamed), and those of ``clusters``;
    # every row when the clusters named are wanted, the other clusters' rates left out
    wanted = (mine | F.col("cluster").isNull() | F.col("problem").isNotNull()) if unchecked else mine
    source = usage.where(wanted) if seen is None else usage.select(
        *(F.when(mine, F.col(c)).alias(c) if c in USAGE_KEYS else F.col(c) for c in usage.columns))
    table = usage_table(source, q).persist()
    means = None
    try:
        try:  # the first action: the usage is read now
            broken = unchecked and table.where(F.col("bad")).limit(1).count()
        except Exception as exc:
            raise read_error(usage.sparkSession, exc) from None
        if broken:
            check(usage)  # raises, naming the first broken row
        if seen is not None:
            seen([r[0] for r in table.select("cluster").distinct().collect()])
        base = table.where(mine).drop("bad")
        untimed = sorted(r[0] for r in base.where(F.col("untimed") > 0).select("cluster").distinct()
                         .collect())
        means = (usage.where(mine & ~F.col("cluster").isin(untimed))
                 .withColumn("w", F.floor(F.col("ts") / F.lit(window)))
                 .groupBy("cluster", "user", "client_id", "w").agg(*(F.avg(k).alias(k) for k in USAGE_KEYS))
                 .select("cluster", "user", "client_id", "w", _stacked("mean"))
                 .where(F.col("mean").isNotNull())).persist()
        yield base, means, untimed
    finally:
        table.unpersist()
        if means is not None:
            means.unpersist()


def same_group(cluster: str, key: str, bu: str, bc: str) -> list[Any]:
    """Join conditions of a row's group columns to :func:`group_usage`'s: a bucket's tags are its
    identity, compared null-safe (a user bucket has no client-id tag)."""
    from pyspark.sql import functions as F

    return [F.col(mine).eqNullSafe(F.col(theirs)) for mine, theirs in (
        (cluster, "g_cluster"), (key, "g_key"), (bu, "g_bu"), (bc, "g_bc"))]


@contextmanager
def impact_frame(spark: Any, states: Mapping[str, tuple[QuotaState, QuotaState]], usage: Any,
                 q: float | None, *, window: float = DEFAULT_WINDOW,
                 seen: Seen | None = None) -> Iterator[tuple[Any, list[str]]]:
    """The impact table as a DataFrame — every principal joined against the eight precedence levels
    (the quota side), the first that sets the key taken, each bucket's usage summed — and
    the clusters whose usage is not windowed. Columns: those of
    :class:`~kqplan.fleet.impact.ImpactRow`, with each bucket as its tags (``before_bu, before_bc``,
    ``after_bu, after_bc``) instead of its display form. The two aggregates of the usage it reads
    (per-principal statistics, window means) are computed once each and kept while it is used;
    ``seen`` hears the clusters the usage names (:func:`usage_aggregates`)."""
    from pyspark.sql import functions as F

    with usage_aggregates(usage, list(states), q, window, seen) as (base, means, untimed):
        table = base
        for side, label in ((0, "before"), (1, "after")):
            entries = quota_entries(spark, {cluster: pair[side] for cluster, pair in states.items()})
            won = winners(spark, base, entries, label)
            totals = _bucket_usage(base, won, means, side=label, q=q, untimed=untimed)
            bu, bc = bucket_tags(label)
            table = table.join(won, KEYS, "left").withColumn(f"{label}_bu", bu).withColumn(f"{label}_bc", bc)
            same = same_group("cluster", "key", f"{label}_bu", f"{label}_bc")
            table = table.join(totals, same, "left").drop("g_cluster", "g_key", "g_bu", "g_bc")
        after, group_usage = F.col("after.value"), F.col("after_group_usage")
        yield table.select(
            "cluster", "user", "client_id", "key", "usage",
            F.col("before.value").alias("before_value"), F.col("before.source").alias("before_source"),
            "before_bu", "before_bc", "before_group_usage",
            after.alias("after_value"), F.col("after.source").alias("after_source"), "after_bu", "after_bc",
            group_usage,
            F.when(group_usage.isNotNull() & after.isNotNull() & (after != 0), group_usage / after)
            .alias("utilization"),
            F.coalesce(group_usage > after, F.lit(False)).alias("would_throttle")), untimed


def impact_rows(spark: Any, states: Mapping[str, tuple[QuotaState, QuotaState]], usage: Any,
                q: float | None, *, window: float = DEFAULT_WINDOW, seen: Seen | None = None) -> Impact:
    """The rows of :func:`kqplan.fleet.impact.impact_rows` from a usage frame
    (:func:`kqplan.fleet.spark_usage.usage_frame`), :func:`impact_frame` collected."""
    with impact_frame(spark, states, usage, q, window=window, seen=seen) as (table, untimed):
        collected = collect_rows(table)
    rows = sorted(ImpactRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], shown_tags(r[7], r[8]), r[9], r[10],
                            r[11], shown_tags(r[12], r[13]), r[14], r[15], r[16]) for r in collected)
    # The entries nobody resolves to, from the rows already here (a second Spark job would
    # recompute the whole join): quota entries of the state after the plan minus those used.
    used = {(r.cluster, r.after_source, r.key) for r in rows if r.after_source is not None}
    unused = sorted(UnusedRow(cluster, shown, key) for cluster, (_, state) in states.items()
                    for entity, quotas in state.items() if entity.kind is EntityKind.CLIENT
                    for shown in (entity.display,) for key in quotas if (cluster, shown, key) not in used)
    return Impact(rows, unused, frozenset(untimed))


def shown_tags(user: str | None, client_id: str | None) -> str | None:
    """A bucket's display form from its tags (the core's entity: names escaped as everywhere)."""
    parts = [(t, n) for t, n in ((USER, user), (CLIENT_ID, client_id)) if n is not None]
    return Entity(tuple(parts)).display if parts else None
