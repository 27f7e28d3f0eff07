"""The Spark engine's impact: the usage read by Spark, every observed principal joined against the
eight precedence levels before and after the plan (the quota side broadcast), its bucket, and the
bucket's usage, as DataFrame operations. The rows of :func:`kqplan.fleet.impact.impact_rows`, which
the tests hold it to; the levels and the bucket rule are the core's, taken as data.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kqplan.core.buckets import bucket
from kqplan.core.entity import CLIENT_ID, USER, Entity, EntityKind
from kqplan.core.errors import KqplanError
from kqplan.core.resolve import CLIENT_LEVELS, Match, level_of
from kqplan.core.state import QuotaState
from kqplan.fleet.impact import DEFAULT_WINDOW, Impact, ImpactRow, UnusedRow
from kqplan.fleet.spark import collect_rows, frame_of
from kqplan.fleet.usage import (
    COLUMNS_HINT,
    NUMBER,
    TIME,
    TS_HINT,
    TS_RANGE,
    USAGE_KEYS,
    Usage,
    not_utf8,
    read_parquet,
    usage_files,
)

_USAGE = "cluster string, user string, client_id string, key string, value double, ts double"
"""A usage frame: a row per sample, and a row with a null ``value`` for an observed principal
(a usage row without any rate)."""


def samples_frame(spark: Any, usage: Usage | Sequence[Any]) -> Any:
    """Usage already in this process as a usage frame (tests, small inputs)."""
    observed = usage if isinstance(usage, Usage) else Usage.of(usage)
    rows: list[tuple[Any, ...]] = [(s.cluster, s.user, s.client_id, s.key, s.value, s.ts)
                                   for s in observed.samples]
    rows += [(c, u, i, None, None, None) for c, u, i in sorted(observed.principals)]
    return frame_of(spark, rows, _USAGE)


def _timestamp(frame: Any, *, nanos: bool = False) -> tuple[Any, Any]:
    """The ``ts`` column of a usage file as (seconds since the epoch, the raw text for messages),
    by its type: a timestamp (naive ones are UTC, as the local reader takes them; ``nanos``: read as
    nanoseconds since the epoch), a number, or text in one of :mod:`kqplan.fleet.usage`'s two
    forms. Anything else, and seconds outside :data:`kqplan.fleet.usage.TS_RANGE`: null."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if "ts" not in frame.columns:
        return F.lit(None).cast("double"), F.lit(None).cast("string")
    kind = frame.schema["ts"].dataType
    column = F.col("ts")
    if nanos:  # a Parquet TIMESTAMP(NANOS), read as its count of nanoseconds
        return _in_range(column.cast("double") / F.lit(1e9)), column.cast("string")
    if isinstance(kind, T.TimestampNTZType):  # wall time: read it as UTC
        kind, column = T.StringType(), F.concat(column.cast("string"), F.lit("Z"))
    if isinstance(kind, T.TimestampType):
        return F.unix_micros(column) / F.lit(1e6), column.cast("string")
    if isinstance(kind, T.NumericType):
        return _in_range(column.cast("double")), column.cast("string")
    text = column.cast("string")
    # an ISO time without a zone is UTC: spelled out, so the session's time zone plays no part
    zoned = (F.when(F.length(text) == 10, F.concat(text, F.lit("T00:00:00Z")))
             .when(~text.rlike("(Z|[+-][0-9]{2}:[0-9]{2})$"), F.concat(text, F.lit("Z")))
             .otherwise(text))
    seconds = (F.when(text.rlike(NUMBER), _in_range(text.try_cast("double")))
               .when(text.rlike(TIME), F.unix_micros(F.try_to_timestamp(zoned)) / F.lit(1e6)))
    return seconds, text


def _in_range(seconds: Any) -> Any:
    """``seconds`` when within :data:`~kqplan.fleet.usage.TS_RANGE` (NaN and infinity are not)."""
    from pyspark.sql import functions as F

    return F.when(seconds.between(F.lit(TS_RANGE[0]), F.lit(TS_RANGE[1])), seconds)


def _csv_header(path: Path) -> tuple[str, ...]:
    """A CSV file's column names (its first line)."""
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            return tuple(next(csv.reader(fh), []))
    except UnicodeDecodeError as exc:
        raise not_utf8(path, exc) from None
    except OSError as exc:
        raise KqplanError(f"cannot read {path}: {exc.strerror}") from None


def _parquet_types(path: Path) -> tuple[str, ...]:
    """The types of a Parquet file's usage columns (its footer, read by pyarrow): Spark reads files
    of one schema together, and a ``ts`` written as a number in one file and as a timestamp in
    another would stop the read."""
    schema = read_parquet(path, schema_only=True)
    wanted = ("cluster", "user", "client_id", "ts", *USAGE_KEYS)
    return tuple(f"{name}:{schema.field(name).type}" for name in wanted if name in schema.names)


def usage_frame(spark: Any, paths: Sequence[Path]) -> Any:
    """The usage files read by Spark itself, never through this process's memory (the point of
    the engine at 10^7 samples), as a usage frame under the local reader's rules
    (:func:`kqplan.fleet.usage.read_usage`): cluster and user required, an empty or missing
    client_id is the empty string, a key's empty cell is no sample, any other value must be a
    number, and ``ts`` a time."""
    try:
        return _usage_frame(spark, paths)
    except Exception as exc:  # what Spark cannot read, named: a Connect server's paths above all
        if type(exc).__name__ != "AnalysisException":
            raise
        found = re.search(r"\[PATH_NOT_FOUND\][^:]*: (\S+)", str(exc))
        if found is None:
            raise KqplanError(f"Spark cannot read the usage files: {str(exc).strip().splitlines()[0]}",
                              hint=COLUMNS_HINT) from None
        connect = type(spark).__module__.startswith("pyspark.sql.connect")
        raise KqplanError(
            f"Spark found no file at {found[1].removesuffix('.')}: the Spark engine reads --usage itself"
            + (", on the Spark Connect server's filesystem" if connect else ""),
            hint="give a path that this machine and the Spark executors (or the Connect server) both "
            "see, on a shared filesystem") from None


def _usage_frame(spark: Any, paths: Sequence[Path]) -> Any:
    from pyspark.sql import functions as F

    # Files are read together only when Spark would read each the same way: CSV files by their
    # header (Spark reads the others' columns by position), Parquet files by their types
    by_kind: dict[tuple[str, ...], list[str]] = {}
    for path in (p.absolute() for p in usage_files(paths)):  # relative paths are this process's
        kind = (("parquet", *_parquet_types(path)) if path.suffix == ".parquet"
                else ("csv", *_csv_header(path)) if path.suffix == ".csv" else ("json",))
        by_kind.setdefault(kind, []).append(str(path))
    frames = []
    for kind, files in sorted(by_kind.items()):
        nanos = any(k.startswith("ts:timestamp[ns") for k in kind)
        if kind[0] == "csv":
            frame = spark.read.option("header", True).csv(files)  # every column a string
        elif kind[0] == "json":
            frame = spark.read.option("primitivesAsString", True).json(files)
        else:
            if nanos:  # Spark reads TIMESTAMP(NANOS) only as a count (this session, from now on)
                spark.conf.set("spark.sql.legacy.parquet.nanosAsLong", "true")
            frame = spark.read.parquet(*files)
        present = set(frame.columns)

        def column(name: str, present: set[str] = present) -> Any:
            return F.col(f"`{name}`").cast("string") if name in present else F.lit(None).cast("string")

        seconds, ts_text = _timestamp(frame, nanos=nanos)
        frames.append(frame.select(
            column("cluster").alias("cluster"), column("user").alias("user"),
            F.coalesce(column("client_id"), F.lit("")).alias("client_id"),
            *(column(k).alias(k) for k in USAGE_KEYS), seconds.alias("ts"), ts_text.alias("ts_text"),
            F.input_file_name().alias("file")))
    if not frames:
        return frame_of(spark, [], _USAGE)
    rows = frames[0]
    for frame in frames[1:]:
        rows = rows.unionByName(frame)
    stacked = rows.select(
        "cluster", "user", "client_id", "file", "ts", "ts_text",
        F.expr(f"stack({len(USAGE_KEYS)}, " + ", ".join(f"'{k}', `{k}`" for k in USAGE_KEYS) +
               ") as (key, raw)"))
    has_value = F.col("raw").isNotNull() & (F.col("raw") != "")
    unnamed = (F.col("cluster").isNull() | (F.col("cluster") == "") | F.col("user").isNull()
               | (F.col("user") == ""))
    # the local reader's rule (kqplan.fleet.usage.number): NUMBER's spelling, a finite value;
    # try_cast, as Spark 4 is ANSI (a cast would throw); NaN is above infinity in Spark's order
    not_number = has_value & (~F.col("raw").rlike(NUMBER)
                              | ~(F.abs(F.col("raw").try_cast("double")) < F.lit(float("inf"))))
    no_time = F.col("ts_text").isNotNull() & (F.col("ts_text") != "") & F.col("ts").isNull()
    # one pass over the data finds the first problem of any kind
    problem = stacked.where(unnamed | not_number | no_time).select(
        "file", F.when(unnamed, F.lit("name")).when(no_time, F.lit("ts")).otherwise(F.lit("value"))
        .alias("what"), "key", "raw", "ts_text").limit(1).collect()
    if problem:
        found = problem[0]
        where = found["file"].removeprefix("file://")
        if found["what"] == "name":
            raise KqplanError(f"{where}: a row has no cluster or user (both are required)",
                              hint=COLUMNS_HINT)
        if found["what"] == "ts":
            raise KqplanError(f"{where}: ts is not a time: {found['ts_text']!r}", hint=TS_HINT)
        raise KqplanError(f"{where}: {found['key']} is not a number: {found['raw']!r}")
    value = F.when(has_value, F.col("raw").try_cast("double")).alias("value")
    return stacked.select("cluster", "user", "client_id", "key", value, "ts")


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


def usage_table(spark: Any, usage: Any, clusters: Sequence[str], q: float | None) -> Any:
    """Every observed principal of ``clusters`` × the four keys, with ``usage``: the statistic
    (max, or Spark SQL's exact ``percentile``) over its samples, null for a key without samples;
    and ``untimed``, its samples without a ``ts``."""
    from pyspark.sql import functions as F

    samples = usage.where(F.col("value").isNotNull())
    stats = samples.groupBy(*KEYS).agg(_statistic("value", q).alias("usage"),
                                       F.count(F.when(F.col("ts").isNull(), 1)).alias("untimed"))
    principals = (usage.select("cluster", "user", "client_id").distinct()
                  .where(F.col("cluster").isin(list(clusters)))
                  .crossJoin(frame_of(spark, [(k,) for k in USAGE_KEYS], "key string")))
    return principals.join(stats, KEYS, "left")


def _statistic(column: str, q: float | None) -> Any:
    from pyspark.sql import functions as F

    return F.max(column) if q is None else F.expr(f"percentile(`{column}`, {q!r})")


def winners(spark: Any, table: Any, entries: Any, label: str) -> Any:
    """``(cluster, user, client_id, key, label)`` for the principal-keys of ``table``, ``label`` a
    struct ``(rank, value, source, tag_user, tag_client)`` of the entry of ``entries``
    (:func:`quota_entries`) that supplies the key — the first of the eight precedence levels that
    sets it (the entries broadcast); no row where none does (unlimited). ``tag_user`` and
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
    hits = probes.join(F.broadcast(entries), ["cluster", "u", "c", "key"])
    return (hits.groupBy(*KEYS)  # lowest rank wins
            .agg(F.min(F.struct("rank", "value", "source", "tag_user", "tag_client")).alias(label)))


def with_effective(spark: Any, table: Any, entries: Any, label: str) -> Any:
    """``table`` (``cluster, user, client_id, key``, …) with the struct column ``label`` of
    :func:`winners`, null where no entry supplies the key (unlimited)."""
    return table.join(winners(spark, table, entries, label), KEYS, "left")


def _bucket_tags(side: str) -> tuple[Any, Any]:
    """The bucket's user and client-id tags of a principal-key on one side (:func:`winners`'s
    struct ``side``): the connection's names the bucket carries, null for the others."""
    from pyspark.sql import functions as F

    return (F.when(F.col(f"{side}.tag_user"), F.col("user")),
            F.when(F.col(f"{side}.tag_client"), F.col("client_id")))


def _bucket_usage(base: Any, won: Any, means: Any, *, side: str, q: float | None,
                  untimed: Sequence[str]) -> Any:
    """``(g_cluster, g_key, g_bu, g_bc, {side}_group_usage)`` per bucket of one side: per window,
    each member's mean summed over the bucket, then the statistic over the windows; in an
    ``untimed`` cluster the members' statistics summed. ``g_bu``/``g_bc``: the bucket's user and
    client-id tags (null when the bucket does not carry that name)."""
    from pyspark.sql import functions as F

    bu, bc = _bucket_tags(side)
    members = base.join(won, KEYS).select(*KEYS, "usage", bu.alias("bu"), bc.alias("bc"))
    group = ["cluster", "key", "bu", "bc"]
    total = f"{side}_group_usage"
    timed = (members.join(means, KEYS).groupBy(*group, "w").agg(F.sum("mean").alias("window"))
             .groupBy(*group).agg(_statistic("window", q).alias(total)))
    summed = (members.where(F.col("cluster").isin(list(untimed)) & F.col("usage").isNotNull())
              .groupBy(*group).agg(F.sum("usage").alias(total)))
    return timed.unionByName(summed).select(*(F.col(c).alias(f"g_{c}") for c in group), total)


def impact_rows(spark: Any, states: Mapping[str, tuple[QuotaState, QuotaState]], usage: Any,
                q: float | None, *, window: float = DEFAULT_WINDOW) -> Impact:
    """The rows of :func:`kqplan.fleet.impact.impact_rows` from a usage frame (:func:`usage_frame`,
    :func:`samples_frame`), by joining every principal against the eight precedence levels (the
    quota side broadcast), taking the first that sets the key, and summing each bucket's usage.
    Two aggregates of the usage are computed once each and kept (the per-principal statistics, the
    window means); the joins of both sides read only those."""
    from pyspark.sql import functions as F

    usage = usage.where(F.col("cluster").isin(list(states)))
    base = usage_table(spark, usage, list(states), q).persist()
    untimed = sorted(r[0] for r in base.where(F.col("untimed") > 0).select("cluster").distinct().collect())
    means = (usage.where(F.col("value").isNotNull() & ~F.col("cluster").isin(untimed))
             .withColumn("w", F.floor(F.col("ts") / F.lit(window)))
             .groupBy(*KEYS, "w").agg(F.avg("value").alias("mean"))).persist()
    try:
        table = base
        for side, label in ((0, "before"), (1, "after")):
            entries = quota_entries(spark, {cluster: pair[side] for cluster, pair in states.items()})
            won = winners(spark, base, entries, label)
            totals = _bucket_usage(base, won, means, side=label, q=q, untimed=untimed)
            bu, bc = _bucket_tags(label)
            table = table.join(won, KEYS, "left").withColumn(f"{label}_bu", bu).withColumn(f"{label}_bc", bc)
            # a bucket's tags are its identity, compared null-safe (a user bucket has no client-id tag)
            same = [F.col(mine).eqNullSafe(F.col(theirs)) for mine, theirs in (
                ("cluster", "g_cluster"), ("key", "g_key"), (f"{label}_bu", "g_bu"), (f"{label}_bc", "g_bc"))]
            table = table.join(totals, same, "left").drop("g_cluster", "g_key", "g_bu", "g_bc")
        after, group_usage = F.col("after.value"), F.col("after_group_usage")
        table = table.select(
            "cluster", "user", "client_id", "key", "usage",
            F.col("before.value"), F.col("before.source"), "before_bu", "before_bc", "before_group_usage",
            after, F.col("after.source"), "after_bu", "after_bc", group_usage,
            F.when(group_usage.isNotNull() & after.isNotNull() & (after != 0), group_usage / after),
            F.coalesce(group_usage > after, F.lit(False)))
        collected = collect_rows(table)
    finally:
        base.unpersist()
        means.unpersist()
    rows = sorted(ImpactRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], _shown(r[7], r[8]), r[9], r[10], r[11],
                            _shown(r[12], r[13]), r[14], r[15], r[16]) for r in collected)
    # The entries nobody resolves to, from the rows already here (a second Spark job would
    # recompute the whole join): quota entries of the state after the plan minus those used.
    used = {(r.cluster, r.after_source, r.key) for r in rows if r.after_source is not None}
    unused = sorted(UnusedRow(cluster, shown, key) for cluster, (_, state) in states.items()
                    for entity, quotas in state.items() if entity.kind is EntityKind.CLIENT
                    for shown in (entity.display,) for key in quotas if (cluster, shown, key) not in used)
    return Impact(rows, unused, frozenset(untimed))


def _shown(user: str | None, client_id: str | None) -> str | None:
    """A bucket's display form from its tags (the core's entity: names escaped as everywhere)."""
    parts = [(t, n) for t, n in ((USER, user), (CLIENT_ID, client_id)) if n is not None]
    return Entity(tuple(parts)).display if parts else None
