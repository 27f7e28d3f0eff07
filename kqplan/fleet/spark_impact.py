"""The Spark engine's usage aggregates, and its impact as DataFrames: the rows, buckets and unused
entries of :func:`kqplan.fleet.impact.impact_rows`, which the tests hold it to, from a usage
frame. ``fleet impact --out URI`` writes those frames where the URI says
(:mod:`kqplan.fleet.spark_tables`); a local ``--out`` takes the impact assembled in this process
from the same aggregates (:mod:`kqplan.fleet.spark_assembled`).

What is computed where:

- Spark: the usage read, checked and aggregated per *unit* — a principal's row, or a measured
  quota bucket's (``bucket`` ``user``/``client-id``) — and key: the statistic over its samples,
  its mean per window. Per bucket, side and key, the usage known (the units wholly in it) and
  the most it may be (with the whole usage of split units partly in it): the members' means
  summed per window, then the statistic over the windows (an untimed cluster: the members'
  statistics summed); the bucket's verdict; each row's.
- This process (:mod:`kqplan.fleet.spark_placed`, the core's rule): where each principal falls
  before and after the plan — its quota, the entry that sets it, its bucket — shipped back as one
  frame of a row per principal; and the measured buckets' units only, one per bucket Kafka
  measured (a few), collected with the names their classes need (the distinct client-ids of a
  cluster with a ``{user=U}`` bucket's row, the distinct users of one with a ``{client-id=C}``
  bucket's row) and resolved as the reference resolves them (:func:`kqplan.core.buckets.classes`,
  ``members``, ``destinations``, ``bucket_quota``); shipped back as two small frames: where each
  unit falls per key and side (a bucket, or split), and the buckets it falls in, wholly or in part.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from kqplan.core.buckets import bucket
from kqplan.core.entity import CLIENT_ID, USER
from kqplan.core.errors import KqplanError, error_text
from kqplan.core.resolve import CLIENT_LEVELS, Match, level_of
from kqplan.core.state import QuotaState
from kqplan.fleet.impact import DEFAULT_WINDOW
from kqplan.fleet.spark import collect_rows, frame_of
from kqplan.fleet.spark_heavy import among, heavy_table, heavy_units
from kqplan.fleet.spark_placed import MEMBER, PLACED, PRINCIPALS, SIDES, measured_rows, principal_rows
from kqplan.fleet.usage import USAGE_KEYS
from kqplan.fleet.usage_schema import CLIENT_BUCKET, USER_BUCKET


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
"""A principal-key (the joins against the levels)."""
UNIT = ["cluster", "user", "client_id", "bucket"]
"""A unit: a principal (``bucket`` empty) or a measured bucket (:attr:`kqplan.fleet.usage.Sample.unit`)."""
UNIT_KEYS = [*UNIT, "key"]
GROUP = ["cluster", "key", "side", "bu", "bc"]
"""A bucket on one side of the plan, by its tags (null: the bucket does not carry that name)."""


def usage_table(usage: Any, q: float | None, window: float, *,
                buckets: bool = False, windows: bool = True) -> tuple[Any, Any, list[Any]]:
    """Every observed unit × the four keys, with ``usage``: the statistic (max, or the ``q``
    quantile) over its samples, null for a key without samples; ``samples``, their count;
    ``own``, the statistic over its means per window of ``window`` seconds (its samples with a
    ``ts``); ``untimed``, its usage rows with a sample and without a ``ts``; and ``bad``, whether a
    row of it is refused (:func:`kqplan.fleet.spark_usage.refused`: an unchecked usage frame
    carries ``problem``; ``buckets`` false, a bucket's row). Beside it, each unit-key's mean per
    window (``w``, ``mean``; ``windows`` false: a heavy unit's only, :func:`unit_means` gives the
    others'). One pass over the usage rows, sorted per unit in the executors'
    Python (:mod:`kqplan.fleet.spark_sorted`); a quantile's units with millions of samples found
    first and aggregated apart on Spark, in bounded memory (:mod:`kqplan.fleet.spark_heavy`)."""
    from pyspark.sql import functions as F

    from kqplan.fleet.spark_sorted import sorted_units
    from kqplan.fleet.spark_usage import refused

    sampled = F.lit(False)
    for k in USAGE_KEYS:
        sampled = sampled | F.col(k).isNotNull()
    untimed, bad = sampled & F.col("ts").isNull(), F.coalesce(refused(usage, buckets=buckets), F.lit(False))
    heavy = [] if q is None else heavy_units(usage, UNIT)
    light = among(usage, UNIT, heavy, "left_anti") if heavy else usage
    # computed now, and its plan cut short: a Spark Connect plan's depth is bounded (the decoder's),
    # and the fleet jobs build theirs on top of this one
    found = sorted_units(light, q, window, untimed=untimed, bad=bad, windows=windows).localCheckpoint()
    kept: list[Any] = []
    wide, means = found.where(~F.col("window")), found.where(F.col("window"))
    if heavy and q is not None:  # millions of samples: their quantile in bounded memory
        others = {"untimed": F.count(F.when(untimed, 1)), "bad": F.max(bad)}
        windowed = _window_means(usage, heavy, window).persist()
        kept.append(windowed)
        own = windowed.groupBy(*UNIT).agg(*(_statistic(k, q).alias(f"o_{k}") for k in USAGE_KEYS))
        mine = heavy_table(usage, UNIT, heavy, q, others).join(own, UNIT, "left")
        wide = wide.select(*mine.columns).unionByName(mine)
        means = means.select(*UNIT, "w", *USAGE_KEYS).unionByName(windowed)
    quads = ", ".join(f"'{k}', `{k}`, `n_{k}`, `o_{k}`" for k in USAGE_KEYS)
    stacked = F.expr(f"stack({len(USAGE_KEYS)}, {quads}) as (key, usage, samples, own)")
    return wide.select(*UNIT, "untimed", "bad", stacked), means.select(*UNIT, "w", _stacked("mean")), kept


def unit_means(usage: Any, units: Sequence[tuple[Any, ...]], window: float) -> Any:
    """Each unit-key's mean per window (``cluster, user, client_id, bucket, w, key, mean``; a key
    without samples in a window has no row) of ``units`` only, read from a usage frame's rows again:
    the means :func:`usage_table` gives beside its table, where it was asked for none."""
    from pyspark.sql import functions as F

    if "bucket" not in usage.columns:  # as usage_aggregates reads such a frame
        usage = usage.withColumn("bucket", F.lit(""))
    means = _window_means(usage, units, window).select(*UNIT, "w", _stacked("mean"))
    return means.where(F.col("mean").isNotNull())


def _window_means(usage: Any, units: Sequence[tuple[Any, ...]], window: float) -> Any:
    """The means per window of ``window`` seconds of ``units``' samples with a ``ts``: a row per
    unit and window (``w``), a column per key (null: no sample of it in the window), Spark's
    average (a mean may differ in the last bit from the reference's: rows are summed in any order)."""
    from pyspark.sql import functions as F

    theirs = among(usage, UNIT, units, "left_semi").withColumn("w", F.floor(F.col("ts") / F.lit(window)))
    return (theirs.where(F.col("w").isNotNull()).groupBy(*UNIT, "w")
            .agg(*(F.avg(k).alias(k) for k in USAGE_KEYS)))


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
                     seen: Seen | None = None, *, buckets: bool = False,
                     windows: bool = True) -> Iterator[tuple[Any, Any, list[str], Any]]:
    """The two aggregates of the usage both fleet jobs read, kept while the block runs:
    :func:`usage_table` of ``clusters`` (with ``own``, below, beside each row), each unit-key's
    mean per window, the clusters with a sample without ``ts`` (not windowed), and each unit-key's
    statistic over its window means (``cluster, user, client_id, bucket, key, usage``). One pass
    over the usage computes them all (:func:`usage_table`; a heavy unit's rows are read again): an
    unchecked usage frame (one with ``problem``) is checked by it, every row of any cluster, and
    only when a row is refused is the usage searched again, for the message;
    ``buckets`` false, a quota bucket's row is refused (``fleet rightsize``), as ``read_usage``
    refuses it. ``seen`` hears every cluster the usage names, from the same aggregation (the other
    clusters' rates left out of it), before anything else is computed. ``windows`` false: no means
    per window (None in their place; :func:`unit_means` gives a few units' from the usage rows)."""
    from pyspark.sql import functions as F

    from kqplan.fleet.spark_usage import check, read_error, refused

    if "bucket" not in usage.columns:  # a frame of principals only, made without the column
        usage = usage.withColumn("bucket", F.lit(""))
    mine = F.col("cluster").isin(list(clusters))
    checking = "problem" in usage.columns or not buckets
    # the rows to check: any refused row (its cluster may be unnamed), and those of ``clusters``;
    # every row when the clusters named are wanted, the other clusters' rates left out
    wanted = (mine | F.col("cluster").isNull() | refused(usage, buckets=buckets)) if checking else mine
    source = usage.where(wanted) if seen is None else usage.select(
        *(F.when(mine, F.col(c)).alias(c) if c in USAGE_KEYS else F.col(c) for c in usage.columns))
    kept: list[Any] = []
    try:
        try:  # the first actions: the usage is read, and every unit aggregated, now
            table, means, kept = usage_table(source, q, window, buckets=buckets, windows=windows)
            # per cluster named: whether a row is refused, whether a sample has no ts (one job)
            named = table.groupBy("cluster").agg(F.max("bad"), F.max(F.col("untimed") > 0)).collect()
            if checking and any(bad for _, bad, _ in named):
                check(usage, buckets=buckets)  # raises, naming the first refused row
            if seen is not None:
                seen([cluster for cluster, _, _ in named])
            base = table.where(mine).drop("bad")
            wanted_clusters = set(clusters)
            untimed = sorted(c for c, _, some in named if some and c in wanted_clusters)
        except KqplanError:
            raise
        except Exception as exc:
            raise worker_error(exc) or read_error(usage.sparkSession, exc) from None
        timed = mine & ~F.col("cluster").isin(untimed)
        own = table.where(timed & F.col("own").isNotNull()).select(*UNIT, "key", F.col("own").alias("usage"))
        # ``own`` also beside each row of ``base`` (null in an untimed cluster): one collect of both
        yield (base.withColumn("own", F.when(timed, F.col("own"))),
               means.where(timed & F.col("mean").isNotNull()) if windows else None, untimed, own)
    finally:
        for frame in kept:
            frame.unpersist()


def worker_error(exc: Exception) -> KqplanError | None:
    """What the executors' Python lacks to run :mod:`kqplan.fleet.spark_sorted`, said as such."""
    found = re.search(r"No module named '(numpy|pyarrow)", error_text(exc))
    if found is None:
        return None
    return KqplanError(f"the Spark executors' Python has no {found[1]}: the Spark engine aggregates each "
                       "unit's samples there, with numpy and pyarrow",
                       hint="install numpy and pyarrow in the Python the executors run (PYSPARK_PYTHON, "
                            "spark.pyspark.python), or use --engine local")


# -- what this process resolves: the principals, the measured buckets' units ---------------------

def _measured(spark: Any, states: Mapping[str, tuple[QuotaState, QuotaState]], base: Any) -> tuple[Any, Any]:
    """:func:`measured_rows` as frames: the measured buckets' units of ``base`` and the names their
    classes need, collected (two small jobs); None, None when no bucket's row is there."""
    from pyspark.sql import functions as F

    units = sorted(tuple(r) for r in base.where(F.col("bucket") != "").select(*UNIT).distinct().collect())
    if not units:
        return None, None
    by_users = sorted({u[0] for u in units if u[3] == CLIENT_BUCKET})  # {client-id=C}: (U, C) per user
    by_clients = sorted({u[0] for u in units if u[3] == USER_BUCKET})
    cluster, kind = F.col("cluster"), F.col("bucket")
    wanted = (base.where(cluster.isin(by_users) & (kind != CLIENT_BUCKET))
              .select("cluster", F.lit(0).alias("kind"), F.col("user").alias("name"))
              .unionByName(base.where(cluster.isin(by_clients) & (kind != USER_BUCKET))
                           .select("cluster", F.lit(1).alias("kind"), F.col("client_id").alias("name"))))
    names: dict[str, tuple[set[str], set[str]]] = {}
    for name_cluster, name_kind, name in wanted.distinct().collect():
        names.setdefault(name_cluster, (set(), set()))[name_kind].add(name)
    placed, found = measured_rows(states, units, names)
    return frame_of(spark, placed, PLACED), frame_of(spark, found, MEMBER)


# -- the buckets and the rows, on Spark -------------------------------------------------------------

def _principals(spark: Any, states: Mapping[str, tuple[QuotaState, QuotaState]], base: Any) -> Any:
    """:data:`PLACED` of every principal-key of ``base``, per side: its quota, the entry that sets it
    and its bucket, resolved in this process by the core (:mod:`kqplan.fleet.spark_placed`: one
    small job collects the principals, one frame ships them back, a row per principal)."""
    from pyspark.sql import functions as F

    principals = collect_rows(base.where((F.col("bucket") == "") & (F.col("key") == USAGE_KEYS[0]))
                              .select("cluster", "user", "client_id"))  # a unit's keys are rows of it
    wide = frame_of(spark, principal_rows(states, principals), PRINCIPALS)
    parts = ", ".join(f"'{side}', '{key}', `{side}_{i}_value`, `{side}_{i}_source`, `{side}_{i}_tags`"
                      for side in SIDES for i, key in enumerate(USAGE_KEYS))
    placed = wide.select("cluster", "user", "client_id", F.expr(
        f"stack({len(SIDES) * len(USAGE_KEYS)}, {parts}) as (side, key, value, source, tags)"))
    tags = F.col("tags")
    return placed.select("cluster", "user", "client_id", F.lit("").alias("bucket"), "key", "side", "value",
                         "source", F.when(tags.bitwiseAND(1) == 1, F.col("user")).alias("bu"),
                         F.when(tags.bitwiseAND(2) == 2, F.col("client_id")).alias("bc"),
                         F.lit(False).alias("split"), F.lit(False).alias("unlimited"))


def _joined(left: Any, right: Any, on: Sequence[str], how: str = "left") -> Any:
    """``left`` joined to ``right`` on the columns ``on`` compared null-safe (a bucket's tags)."""
    from pyspark.sql import functions as F

    right = right.select(*(F.col(c).alias(f"kq_{c}") if c in on else F.col(c) for c in right.columns))
    joined = left.join(right, [F.col(c).eqNullSafe(F.col(f"kq_{c}")) for c in on], how)
    return joined.drop(*(f"kq_{c}" for c in on))


def _buckets(inside: Any, base: Any, windowed: tuple[Any, Any], q: float | None,
             untimed: Sequence[str]) -> Any:
    """Per bucket (:data:`GROUP`) of the units ``inside`` it (:data:`MEMBER`): ``value, source``,
    ``usage`` (the units wholly in it: their means summed per window, the statistic over the
    windows; a bucket of one unit: that unit's own statistic of its means; untimed, their
    statistics summed), ``usage_max`` (with the split units' whole usage; null without any),
    ``throttled`` (:func:`kqplan.fleet.impact.verdict`), ``members``, ``shares``. ``windowed``: the
    window means and the units' own statistics of them (:func:`usage_aggregates`)."""
    from pyspark.sql import functions as F

    means, own = windowed
    whole = F.col("whole")
    info = inside.groupBy(*GROUP).agg(
        F.count(F.when(whole, 1)).alias("members"), F.count(F.when(~whole, 1)).alias("shares"),
        # the quota of its last unit wholly in it (the reference's), else of its bucket
        F.max(F.when(whole, F.struct("user", "client_id", "bucket", "value", "source"))).alias("wq"),
        F.min(F.when(~whole, F.struct("value", "source"))).alias("pq"))
    # A bucket of one unit, wholly in it (most buckets): its usage is that unit's own statistic over
    # its window means, computed once for both sides of the plan; only the others' members are
    # joined to their window means and summed per window (issue 42: 24 s of 70 on the windows shape).
    alone = (F.col("members") == 1) & (F.col("shares") == 0)
    unit = (F.col(f"wq.{c}").alias(c) for c in ("user", "client_id", "bucket"))
    singles = (info.where(alone).select(*GROUP, *unit)
               .join(own, UNIT_KEYS).select(*GROUP, "usage", F.lit(None).cast("double").alias("usage_max")))
    several = _joined(inside, info.where(~alone).select(*GROUP), GROUP, "left_semi")
    timed = (several.join(means, UNIT_KEYS).groupBy(*GROUP, "w")
             .agg(F.sum(F.when(whole, F.col("mean"))).alias("known"), F.sum("mean").alias("most"))
             .groupBy(*GROUP).agg(_statistic("known", q).alias("usage"),
                                  _statistic("most", q).alias("usage_max")))
    summed = (inside.where(F.col("cluster").isin(list(untimed)))
              .join(base.select(*UNIT_KEYS, "usage"), UNIT_KEYS).groupBy(*GROUP)
              .agg(F.sum(F.when(whole, F.col("usage"))).alias("usage"), F.sum("usage").alias("usage_max")))
    table = _joined(info, timed.unionByName(singles).unionByName(summed), GROUP)
    value = F.when(F.col("wq").isNotNull(), F.col("wq.value")).otherwise(F.col("pq.value"))
    source = F.when(F.col("wq").isNotNull(), F.col("wq.source")).otherwise(F.col("pq.source"))
    usage, most = F.col("usage"), F.when(F.col("shares") > 0, F.col("usage_max"))
    throttled = (F.when(usage.isNull() & most.isNull(), F.lit(False)).when(usage > value, F.lit(True))
                 .when(most > value, F.lit(None).cast("boolean")).otherwise(F.lit(False)))
    return table.select(*GROUP, value.alias("value"), source.alias("source"), "usage",
                        most.alias("usage_max"), throttled.alias("throttled"), "members", "shares")


def _judged(placed: Any, found: Any, groups: Any) -> Any:
    """The measured units' placements (:data:`PLACED`) with ``judged``, a split unit's verdict from
    its buckets' (:func:`kqplan.fleet.impact.judged`: one verdict when all agree, an unlimited
    member's false, else null)."""
    from pyspark.sql import functions as F

    verdicts = (_joined(found.where(~F.col("whole")), groups.select(*GROUP, "throttled"), GROUP)
                .groupBy(*UNIT_KEYS, "side").agg(*(F.max(F.col("throttled").eqNullSafe(F.lit(v))).alias(n)
                                                   for n, v in (("t", True), ("f", False), ("n", None)))))
    t, n = F.col("t"), F.col("n")
    f = F.col("f") | F.col("unlimited")
    judged = F.when(t & ~f & ~n, F.lit(True)).when(f & ~t & ~n, F.lit(False))
    placed = placed.join(verdicts, [*UNIT_KEYS, "side"], "left")
    return placed.withColumn("judged", judged).drop("t", "f", "n")


@contextmanager
def impact_frame(spark: Any, states: Mapping[str, tuple[QuotaState, QuotaState]], usage: Any,
                 q: float | None, *, window: float = DEFAULT_WINDOW,
                 seen: Seen | None = None) -> Iterator[tuple[Any, Any, list[str]]]:
    """The impact table and the buckets table as DataFrames, and the clusters whose usage is not
    windowed. The table's columns: those of :class:`~kqplan.fleet.impact.ImpactRow`, with each
    side's bucket as its tags (``before_bu, before_bc``, ``after_bu, after_bc``) instead of its
    display form, and the sources as the entries' display forms. The buckets': those of
    :class:`~kqplan.fleet.impact.BucketRow`, the bucket as its tags (``bu, bc``). The usage's two
    aggregates, the placements and the buckets are computed once each and kept while they are
    used; ``seen`` hears the clusters the usage names (:func:`usage_aggregates`)."""
    from pyspark.sql import functions as F

    with usage_aggregates(usage, list(states), q, window, seen, buckets=True) as (both, means, untimed, own):
        base = both.drop("own")
        measured, found = _measured(spark, states, base)
        principals = _principals(spark, states, base).persist()
        groups = None
        try:
            inside = (principals.where(F.col("bu").isNotNull() | F.col("bc").isNotNull())
                      .select(*UNIT_KEYS, "side", "bu", "bc", F.lit(True).alias("whole"), "value", "source"))
            inside = inside if found is None else inside.unionByName(found)
            groups = _buckets(inside, base, (means, own), q, untimed).persist()
            placed = principals.withColumn("judged", F.lit(None).cast("boolean"))
            placed = placed if found is None else placed.unionByName(_judged(measured, found, groups))
            totals = groups.select(*GROUP, F.col("usage").alias("group_usage"),
                                   F.col("usage_max").alias("group_usage_max"), "throttled")
            placed = _joined(placed, totals, GROUP).drop("unlimited")
            table = base.select(*UNIT_KEYS, "usage")
            for side in SIDES:  # each side's columns beside the other's
                mine = placed.where(F.col("side") == side).drop("side")
                named = (F.col(c).alias(f"{side}_{c}") for c in mine.columns if c not in UNIT_KEYS)
                table = table.join(mine.select(*UNIT_KEYS, *named), UNIT_KEYS, "left")
            yield table.select(*UNIT_KEYS, "usage", *_side("before"), *_side("after"), _utilization(),
                               _throttled("before").alias("throttled_before"),
                               _throttled("after").alias("would_throttle")), groups, untimed
        finally:
            principals.unpersist()
            if groups is not None:
                groups.unpersist()


def _side(side: str) -> list[str]:
    return [f"{side}_{c}" for c in ("value", "source", "bu", "bc", "group_usage", "group_usage_max", "split")]


def _utilization() -> Any:
    from pyspark.sql import functions as F

    usage, value = F.col("after_group_usage"), F.col("after_value")
    return F.when(usage.isNotNull() & value.isNotNull() & (value != 0), usage / value).alias("utilization")


def _throttled(side: str) -> Any:
    """A row's verdict on one side: a split row's judged, an unlimited one's false, else its bucket's."""
    from pyspark.sql import functions as F

    unlimited = F.col(f"{side}_bu").isNull() & F.col(f"{side}_bc").isNull()
    return (F.when(F.col(f"{side}_split"), F.col(f"{side}_judged")).when(unlimited, F.lit(False))
            .otherwise(F.col(f"{side}_throttled")))
