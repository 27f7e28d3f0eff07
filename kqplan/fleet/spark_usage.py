"""The Spark engine's usage: the files, URIs and catalog tables of ``--usage``/``--usage-table``
read by Spark itself under :mod:`kqplan.fleet.usage`'s rules, as one *usage frame* — a row per
sample, and a row with a null ``value`` for an observed principal without any rate. A quota
bucket's row (``bucket`` ``user`` or ``client-id``) is kept, its names checked as the local
reader checks them; the job that reads the frame says whether it takes such rows (``fleet
impact``) or refuses them (``fleet rightsize``), as ``read_usage(buckets=…)`` does (:func:`check`).

Local paths are listed here (kqplan reads CSV headers and Parquet footers, to read apart the files
Spark would misread together); URIs of any filesystem Spark's Hadoop layer reads (``file://``,
``s3a://``, ``gs://``, ``abfss://``, ``hdfs://``) and tables are listed and read by Spark alone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kqplan.core.errors import KqplanError, error_text
from kqplan.fleet.spark import WIDE, frame_of, samples_frame, samples_of  # noqa: F401 (the usage frames made here)
from kqplan.fleet.usage import (
    NAME_HINT,
    RATE_HINT,
    REPLACEMENT,
    TS_HINT,
    TS_RANGE,
    USAGE_KEYS,
    csv_header,
    is_uri,
    negative,
    read_parquet,
    read_usage,
    refusal,
    refuse_columns,
    usage_files,
)
from kqplan.fleet.usage_schema import (
    BUCKET_HINT,
    BUCKETS,
    CLIENT_BUCKET,
    COLUMNS_HINT,
    NAMES,
    NUMBER,
    TIME,
    USER_BUCKET,
    unknown_columns,
)

_CHECKS = ("problem string, file string, ts_text string, bad_row string, "
           + ", ".join(f"raw_{k} string, bad_{k} boolean" for k in USAGE_KEYS))
"""The columns an unchecked usage frame adds: what is wrong with the row (null: nothing), where it
comes from, and each cell as written, for :func:`check`'s message; ``bad_row``: what is wrong
with the row itself (``json``: a line that is no JSON object; ``column:…``: a line naming columns
the usage schema does not have; ``name``: a name that is no text; ``ts``: a ``ts`` of a type that
is no time). Besides, ``problem`` may be ``bucket``: ``bucket`` is none of the values, or the names
do not fit it."""
_UNKNOWN = "column:"
"""``problem`` of a JSON line naming columns the usage schema does not have: this, then the names
(separated by NUL)."""
JSON = "kq_json"
"""The one column a JSON lines file is read as: each line a VARIANT, its types kept (Spark's
inference would turn ``5`` and ``"5"`` into one string, and explode a line that is a list)."""


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
    return _text_seconds(text), text


def _text_seconds(text: Any) -> Any:
    """A ``ts`` written as text in one of :mod:`kqplan.fleet.usage`'s two forms, as seconds since
    the epoch; null when it is neither (or out of range)."""
    from pyspark.sql import functions as F

    # an ISO time without a zone is UTC: spelled out, so the session's time zone plays no part
    zoned = (F.when(F.length(text) == 10, F.concat(text, F.lit("T00:00:00Z")))
             .when(~text.rlike("(Z|[+-][0-9]{2}:[0-9]{2})$"), F.concat(text, F.lit("Z")))
             .otherwise(text))
    return (F.when(text.rlike(NUMBER), _in_range(text.try_cast("double")))
            .when(text.rlike(TIME), F.unix_micros(F.try_to_timestamp(zoned)) / F.lit(1e6)))


def _in_range(seconds: Any) -> Any:
    """``seconds`` when within :data:`~kqplan.fleet.usage.TS_RANGE` (NaN and infinity are not)."""
    from pyspark.sql import functions as F

    return F.when(seconds.between(F.lit(TS_RANGE[0]), F.lit(TS_RANGE[1])), seconds)


def _parquet_types(path: Path) -> tuple[str, ...]:
    """The types of a Parquet file's usage columns (its footer, read by pyarrow): Spark reads files
    of one schema together, and a ``ts`` written as a number in one file and as a timestamp in
    another would stop the read."""
    schema = read_parquet(path, schema_only=True)
    refuse_columns(path, schema.names)
    return tuple(f"{name}:{schema.field(name).type}" for name in NAMES if name in schema.names)


def usage_frame(spark: Any, usage: Sequence[Path | str], tables: Sequence[str] = (), *,
                checked: bool = True, buckets: bool = False) -> Any:
    """The usage read by Spark itself, never through this process's memory (the point of the
    engine at 10^7 samples), as a usage frame under the local reader's rules
    (:func:`kqplan.fleet.usage.read_usage`): cluster and user required, an empty or missing
    client_id is the empty string, a key's empty cell is no sample, any other value must be a
    number, and ``ts`` a time. ``usage``: local paths, or URIs (:func:`is_uri`); ``tables``:
    names in Spark's catalog. ``checked``: every row is checked now (one pass over the data);
    otherwise the frame carries ``problem`` (null, or what is wrong) for the aggregation that reads
    it to check (:func:`kqplan.fleet.spark_impact.usage_aggregates`), and :func:`check` to name.
    ``buckets`` (with ``checked``): quota buckets' rows are taken, else refused."""
    try:
        frame = _usage_frame(spark, usage, tables)
    except KqplanError:
        raise
    except Exception as exc:  # what Spark cannot read, named: a Connect server's paths above all
        raise read_error(spark, exc) from None
    if not checked:
        return frame
    check(frame, buckets=buckets)
    return frame.select("cluster", "user", "client_id", "bucket", "ts", *USAGE_KEYS)


def read_error(spark: Any, exc: Exception) -> Exception:
    """A KqplanError for what Spark could not read; ``exc`` itself when it is none of that. Reading
    is lazy: any action over a usage frame may meet it."""
    text = error_text(exc)
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    if (found := re.search(r"\[PATH_NOT_FOUND\][^:]*: (\S+)", text)) is not None:
        connect = type(spark).__module__.startswith("pyspark.sql.connect")
        return KqplanError(
            f"Spark found no file at {found[1].removesuffix('.')}: the Spark engine reads --usage itself"
            + (", on the Spark Connect server's filesystem" if connect else ""),
            hint="give a path or URI that the Spark executors (or the Connect server) see, e.g. on a "
            "shared filesystem or object store")
    if (found := re.search(r"\[TABLE_OR_VIEW_NOT_FOUND\][^`]*(`[^ ]*`)", text)) is not None:
        return KqplanError(f"--usage-table: no table {found[1]} in Spark's catalog",
                           hint="name a table the Spark session sees (catalog.schema.table)")
    if (found := re.search(r"\[FAILED_READ_FILE[^\]]*\][^\n]*?file (\S+?)\.?\s", text)) is not None:
        try:  # a local file: the local reader's words
            _judge(found[1], buckets=True)  # a file not read: its other rows' problems
        except KqplanError as judged:
            return judged
        header = "CSV header does not conform" in text
        return KqplanError(f"Spark cannot read {found[1]}" + (
            ": its CSV header differs from the other CSV files read with it" if header else ""),
            hint="give CSV files with other columns as their own --usage" if header else COLUMNS_HINT)
    if type(exc).__name__ == "AnalysisException" or "CANNOT_MERGE" in text or "merge" in first.lower():
        return KqplanError(f"Spark cannot read the usage: {first}", hint=COLUMNS_HINT)
    return exc


_FORMATS = (("parquet", "*.parquet"), ("csv", "*.csv"), ("json", "*.{json,jsonl}"))


def _read(spark: Any, fmt: str, files: str | Sequence[str], *, listed: bool = False) -> Any:
    """A reader of ``fmt`` (CSV cells as strings with the header checked, JSON primitives as
    strings) over ``files``; ``listed``: a URI that Spark lists itself, under ``fmt``'s suffixes."""
    reader = spark.read
    if listed:
        reader = reader.option("recursiveFileLookup", True).option("pathGlobFilter", dict(_FORMATS)[fmt])
    if fmt == "csv":  # every column a string; a file whose header differs is refused, not misread
        reader = reader.option("header", True).option("enforceSchema", False)
    elif fmt == "json":  # each line a VARIANT: its JSON types kept, a line that is no object seen
        reader = reader.option("singleVariantColumn", JSON)
    paths = [files] if isinstance(files, str) else list(files)
    return reader.parquet(*paths) if fmt == "parquet" else getattr(reader, fmt)(paths)


def _uri_frames(spark: Any, uri: str) -> list[tuple[Any, bool]]:
    """A URI's usage as (frame, nanos) per format: a file by its suffix, a directory by listing
    (Spark's, recursive) the files of each format. A URI without any usage file is an error."""
    suffix = uri.rsplit("/", 1)[-1].rpartition(".")[2].lower()
    single = {"parquet": "parquet", "csv": "csv", "json": "json", "jsonl": "json"}.get(suffix)
    if single is not None:
        return [_parquet_frame(spark, uri) if single == "parquet" else (_read(spark, single, uri), False)]
    frames = []
    for fmt, _ in _FORMATS:
        try:
            frame, nanos = (_parquet_frame(spark, uri, listed=True) if fmt == "parquet"
                            else (_read(spark, fmt, uri, listed=True), False))
            if fmt != "json" or frame.inputFiles():  # JSON read as VARIANTs infers nothing: listed
                frames.append((frame, nanos))
        except Exception as exc:
            if "UNABLE_TO_INFER_SCHEMA" not in error_text(exc):  # no file of that format there
                raise
    if not frames:
        raise KqplanError(f"--usage {uri}: no usage file there (.csv, .json, .jsonl, .parquet)",
                          hint=COLUMNS_HINT)
    return frames


def _parquet_frame(spark: Any, uri: str, *, listed: bool = False) -> tuple[Any, bool]:
    """Parquet files of a URI, their schemas merged; files whose ``ts`` is TIMESTAMP(NANOS) are
    read as nanosecond counts (all of them: a URI mixing both is refused by the merge)."""
    frame = _read(spark, "parquet", uri, listed=listed)
    try:
        frame.schema  # noqa: B018 - resolving the schema is what refuses TIMESTAMP(NANOS)
    except Exception as exc:
        if "TIMESTAMP(NANOS" not in error_text(exc):
            raise
        spark.conf.set("spark.sql.legacy.parquet.nanosAsLong", "true")
        return _read(spark, "parquet", uri, listed=listed), True
    return frame, False


def _path_frames(spark: Any, paths: Sequence[Path]) -> list[tuple[Any, bool]]:
    """Local paths, listed here: files read together only when Spark would read each the same way
    — CSV files by their header (Spark reads the others' columns by position), Parquet files by
    their types."""
    by_kind: dict[tuple[str, ...], list[str]] = {}
    for path in (p.absolute() for p in usage_files(paths)):  # relative paths are this process's
        kind = (("parquet", *_parquet_types(path)) if path.suffix == ".parquet"
                else ("csv", *csv_header(path)) if path.suffix == ".csv" else ("json",))
        by_kind.setdefault(kind, []).append(str(path))
    frames = []
    for kind, files in sorted(by_kind.items()):
        nanos = any(k.startswith("ts:timestamp[ns") for k in kind)
        if nanos:  # Spark reads TIMESTAMP(NANOS) only as a count (this session, from now on)
            spark.conf.set("spark.sql.legacy.parquet.nanosAsLong", "true")
        frames.append((_read(spark, kind[0], files), nanos))
    return frames


def _usage_frame(spark: Any, usage: Sequence[Path | str], tables: Sequence[str]) -> Any:
    from pyspark.sql import functions as F

    from kqplan.fleet.spark import check_filesystems, filesystem_errors

    check_filesystems(spark, [("--usage", str(u)) for u in usage if is_uri(u)])  # before any read
    paths = [Path(u) for u in usage if not is_uri(u)]  # their headers and footers checked as listed
    read = [(frame, nanos, F.input_file_name()) for frame, nanos in _path_frames(spark, paths)]
    for uri in (str(u) for u in usage if is_uri(u)):
        with filesystem_errors(spark, "--usage", uri):  # Spark lacks its filesystem, or cannot reach it
            read += [(_columns_kept(frame, uri), nanos, F.input_file_name())
                     for frame, nanos in _uri_frames(spark, uri)]
    read += [(_columns_kept(spark.table(name), f"--usage-table {name}"), False, F.lit(f"table {name}"))
             for name in tables]
    frames = [_checked_columns(frame, nanos, origin) for frame, nanos, origin in read]
    if not frames:
        return frame_of(spark, [], f"{WIDE}, {_CHECKS}")
    rows = frames[0]
    for frame in frames[1:]:
        rows = rows.unionByName(frame)
    kind, user, client_id = F.col("bucket"), F.col("user"), F.col("client_id")
    no_user = user.isNull() | (user == "")
    unnamed = F.col("cluster").isNull() | (F.col("cluster") == "") | (no_user & (kind != CLIENT_BUCKET))
    misnamed = (((kind == CLIENT_BUCKET) & (~no_user | (client_id == "")))  # the names a bucket's row has
                | ((kind == USER_BUCKET) & (client_id != "")))
    no_time = F.col("ts_text").isNotNull() & (F.col("ts_text") != "") & F.col("ts").isNull()
    bad = F.lit(False)
    for k in USAGE_KEYS:
        bad = bad | F.col(f"bad_{k}")
    problem = (F.when(F.col("bad_row").isNotNull(), F.col("bad_row")).when(~kind.isin("", *BUCKETS), "bucket")
               .when(unnamed, F.lit("name")).when(misnamed, F.lit("bucket")).when(no_time, F.lit("ts"))
               .when(bad, F.lit("value")))
    rows = rows.withColumn("problem", problem)  # a {client-id=C} bucket's user: empty, as read_usage's
    emptied = F.when((kind == CLIENT_BUCKET) & problem.isNull(), F.lit("")).otherwise(user)
    return rows.withColumn("user", emptied)


def _columns_kept(frame: Any, where: str) -> Any:
    """``frame`` (of a URI or a table), once its columns are the usage schema's: a missing cluster
    or user, or a column of another name, is refused naming ``where`` (a JSON lines frame's names
    are judged line by line, as it is read)."""
    if JSON not in frame.columns:
        refuse_columns(where, frame.columns)
    return frame


def _checked_columns(frame: Any, nanos: bool, origin: Any) -> Any:
    """One source's rows as a usage frame with the check columns but ``problem``, under the local
    reader's rules (:func:`kqplan.fleet.usage.checked`): names as text (a column of another type
    is no name, but for an integer client_id), ``ts`` in seconds, each key's value a finite number
    at least 0 — a number column as it is read, a text column spelled as
    :data:`~kqplan.fleet.usage.NUMBER` says, any other type (boolean, binary, a struct) none."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if JSON in frame.columns and isinstance(frame.schema[JSON].dataType, T.VariantType):
        return _json_columns(frame, origin)
    present = set(frame.columns)

    def kind(name: str) -> Any:
        return frame.schema[name].dataType if name in present else T.NullType()

    def text(name: str) -> Any:
        return F.col(f"`{name}`").cast("string") if name in present else F.lit(None).cast("string")

    def typed(name: str, *types: type) -> Any:  # true where a cell of another type is there
        if isinstance(kind(name), (T.NullType, *types)):
            return F.lit(False)
        return F.col(f"`{name}`").isNotNull()

    keys = []
    for k in USAGE_KEYS:
        numeric = isinstance(kind(k), T.NumericType)
        value, bad = _rate(f"CAST(`{k}` AS {'DOUBLE' if numeric else 'STRING'})" if k in present
                           else "CAST(NULL AS STRING)", numeric=numeric)
        bad = bad | typed(k, T.NumericType, T.StringType)
        keys += [F.when(~bad, value).alias(k), text(k).alias(f"raw_{k}"),
                 F.coalesce(bad, F.lit(False)).alias(f"bad_{k}")]
    seconds, ts_text = _timestamp(frame, nanos=nanos)
    bad_name = (typed("cluster", T.StringType) | typed("user", T.StringType)
                | typed("client_id", T.StringType, T.IntegralType)
                | _replaced(*(f"CAST(`{n}` AS STRING)" for n in ("cluster", "user", "client_id")
                              if n in present)))
    bad_ts = typed("ts", T.NumericType, T.StringType, T.TimestampType, T.TimestampNTZType, T.DateType)
    return frame.select(text("cluster").alias("cluster"), text("user").alias("user"),
                        F.coalesce(text("client_id"), F.lit("")).alias("client_id"),
                        F.coalesce(text("bucket"), F.lit("")).alias("bucket"), seconds.alias("ts"),
                        *keys, ts_text.alias("ts_text"), origin.alias("file"),
                        F.when(bad_name, F.lit("name")).when(bad_ts, F.lit("ts")).alias("bad_row"))


def _sql_text(text: str) -> str:
    """``text`` as a Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _rate(cell: str, *, numeric: bool) -> tuple[Any, Any]:
    """A rate cell (SQL: a double when ``numeric``, else text) as (its value, whether it breaks
    the rule): finite and at least 0, text spelled as :data:`~kqplan.fleet.usage.NUMBER` says; an
    empty text cell is no sample. SQL text: Spark Connect bounds how deep an expression nests, and
    a SQL string is one node however it reads."""
    from pyspark.sql import functions as F

    if numeric:  # NaN is above infinity; -0.0 is not below 0
        bad = f"coalesce(NOT (abs({cell}) < double('inf') AND {cell} >= 0), false)"
        return F.expr(f"CASE WHEN {bad} THEN NULL ELSE {cell} END"), F.expr(bad)
    value = f"try_cast({cell} AS DOUBLE)"  # try_cast, as Spark 4 is ANSI (a cast would throw)
    ok = f"({cell} RLIKE {_sql_text(NUMBER)} AND abs({value}) < double('inf') AND {value} >= 0)"
    bad = f"coalesce({cell} <> '' AND NOT {ok}, false)"
    return F.expr(f"CASE WHEN {cell} <> '' AND {ok} THEN {value} END"), F.expr(bad)


def _replaced(*names: str) -> Any:
    """True where a name (SQL) holds U+FFFD (what Spark leaves of a byte that is not UTF-8)."""
    from pyspark.sql import functions as F

    found = " OR ".join(f"coalesce(instr({n}, {_sql_text(REPLACEMENT)}) > 0, false)" for n in names)
    return F.expr(found) if found else F.lit(False)


def _json_kind(name: str) -> str:
    """SQL: the JSON type of a line's field ``name`` as ``text``, ``integer``, ``number``, ``none``
    (absent or null) or ``other`` (a boolean, an object, a list)."""
    field = f"variant_get({JSON}, '$.{name}', 'variant')"
    kind = f"schema_of_variant({field})"
    return (f"CASE WHEN {field} IS NULL OR {kind} = 'VOID' THEN 'none' WHEN {kind} = 'STRING' THEN 'text' "
            f"WHEN {kind} RLIKE '^((BIG|SMALL|TINY)?INT|DECIMAL[(][0-9]+,0[)])$' THEN 'integer' "
            f"WHEN {kind} RLIKE '^(DECIMAL|DOUBLE|FLOAT)' THEN 'number' ELSE 'other' END")


def _json_columns(frame: Any, origin: Any) -> Any:
    """A JSON lines file read as VARIANTs (:data:`JSON`) as :func:`_checked_columns` gives other
    files: each column judged by its JSON type as the local reader judges it, a line that is no
    object (a list, a number, a string, or not JSON) refused as a whole. Two selects, each field's
    type named in the first: expressions stay shallow (Spark Connect bounds their depth)."""
    from pyspark.sql import functions as F

    names = NAMES
    known = ", ".join(_sql_text(n) for n in names)
    typed = frame.select(
        F.col(JSON), origin.alias("file"), *(F.expr(_json_kind(n)).alias(f"kq_t_{n}") for n in names),
        F.expr(f"coalesce(schema_of_variant({JSON}) LIKE 'OBJECT%', false)").alias("kq_object"),
        F.expr(f"array_except(json_object_keys(to_json({JSON})), array({known}))").alias("kq_unknown"))

    def sql(name: str, to: str = "string") -> str:
        return f"try_variant_get({JSON}, '$.{name}', '{to}')"

    def cell(name: str, to: str = "string") -> Any:
        return F.expr(sql(name, to))

    def of(name: str, *kinds: str) -> Any:
        return F.col(f"kq_t_{name}").isin(*kinds)

    keys = []
    for k in USAGE_KEYS:
        numeric, textual = of(k, "integer", "number"), of(k, "text")
        number_value, number_bad = _rate(sql(k, "double"), numeric=True)
        text_value, text_bad = _rate(sql(k), numeric=False)
        bad = (numeric & number_bad) | (textual & text_bad) | of(k, "other")
        value = F.when(numeric, number_value).when(textual, text_value)
        keys += [F.when(~bad, value).alias(k),
                 F.expr(f"to_json(variant_get({JSON}, '$.{k}', 'variant'))").alias(f"raw_{k}"),
                 bad.alias(f"bad_{k}")]
    ts_seconds = F.when(of("ts", "integer", "number"), _in_range(cell("ts", "double"))).when(
        of("ts", "text"), _text_seconds(cell("ts")))
    bad_name = (of("cluster", "integer", "number", "other") | of("user", "integer", "number", "other")
                | of("client_id", "number", "other")
                | _replaced(sql("cluster"), sql("user"), sql("client_id")))
    return typed.select(
        F.when(of("cluster", "text"), cell("cluster")).alias("cluster"),
        F.when(of("user", "text"), cell("user")).alias("user"),
        F.coalesce(cell("client_id"), F.lit("")).alias("client_id"),
        F.when(of("bucket", "text"), cell("bucket")).when(of("bucket", "none"), F.lit(""))
        .otherwise(F.expr(f"to_json(variant_get({JSON}, '$.bucket', 'variant'))")).alias("bucket"),
        ts_seconds.alias("ts"), *keys,
        F.when(of("ts", "text"), cell("ts")).when(~of("ts", "none"),
                                                  F.expr(f"to_json(variant_get({JSON}, '$.ts', 'variant'))"))
        .alias("ts_text"), "file",
        F.when(~F.col("kq_object"), F.lit("json"))
        .when(F.size("kq_unknown") > 0, F.concat(F.lit(_UNKNOWN), F.array_join("kq_unknown", "\u0000")))
        .when(bad_name, F.lit("name"))
        .when(of("ts", "other"), F.lit("ts")).alias("bad_row"))


def refused(frame: Any, *, buckets: bool) -> Any:
    """True where a row of a usage frame is refused: it breaks a rule (an unchecked frame's
    ``problem``), or it is a quota bucket's and ``buckets`` is false (the job reads principals)."""
    from pyspark.sql import functions as F

    found = F.col("problem").isNotNull() if "problem" in frame.columns else F.lit(False)
    return found if buckets else found | (F.col("bucket") != F.lit(""))


def check(frame: Any, *, buckets: bool = False) -> None:
    """The first row of a usage frame that is :func:`refused`, as an error naming its file (one
    pass over the data; none when every row keeps the rules). Where the file is a local one, the
    local reader judges it, for its words to the letter: the row (or line) and the column."""
    from pyspark.sql import functions as F

    from kqplan.fleet.usage import checked as checked_row

    broken = frame.where(refused(frame, buckets=buckets))
    located = "file" in frame.columns  # a frame made in this process (samples_frame) has no file
    try:
        files = sorted({r[0] for r in (broken.select("file") if located else broken.select(F.lit("")))
                        .distinct().limit(10_000).collect()},
                       key=lambda f: (_local(f) is None, _local(f) or Path(), f))
    except Exception as exc:
        raise read_error(frame.sparkSession, exc) from None
    if not files:
        return
    for name in files:
        _judge(name, buckets=buckets)
    try:
        row = (broken.where(F.col("file") == files[0]) if located else broken).limit(1).collect()[0].asDict()
    except Exception as exc:
        raise read_error(frame.sparkSession, exc) from None
    where, problem = row["file"].removeprefix("file://") if located else "the usage", row.get("problem")
    if problem == "json":
        raise refusal(where, "a line", "not a JSON object (or not JSON)", hint="one JSON object per line; "
                      + COLUMNS_HINT)
    if problem is not None and problem.startswith(_UNKNOWN):
        raise refusal(where, "a line", str(unknown_columns(problem[len(_UNKNOWN):].split("\0"))),
                      hint=COLUMNS_HINT)
    if problem == "bucket" and (buckets or row["bucket"] not in BUCKETS):  # the local reader's words
        checked_row(where, "a row", {n: row[n] for n in ("cluster", "user", "client_id", "bucket")},
                    buckets=buckets)
    if row["bucket"] and not buckets:
        raise refusal(where, "a row", "a row of a quota bucket (bucket not empty), all its members' usage "
                      "together: fleet rightsize sizes each principal's quota from its own usage (rows with "
                      "an empty bucket), not a bucket's (fleet impact and plan --usage read bucket rows)",
                      hint=BUCKET_HINT)
    if problem == "name":
        raise refusal(where, "a row", "cluster and user are required, as text (client_id: text or an "
                      "integer)", hint=NAME_HINT)
    if problem == "ts":
        raise refusal(where, "a row", f"ts is not a time: {row['ts_text']!r}", hint=TS_HINT)
    key = next(k for k in USAGE_KEYS if row[f"bad_{k}"])
    raw = row[f"raw_{key}"]
    raise refusal(where, "a row", f"{key} {'is negative' if negative(raw) else 'is not a number'}: {raw!r}",
                  hint=RATE_HINT)


def _local(name: str) -> Path | None:
    """The local path of a file Spark names by a ``file:`` URI (None: another filesystem, a table)."""
    from urllib.parse import unquote, urlparse

    parsed = urlparse(name)
    local = parsed.scheme == "file" and parsed.netloc in ("", "localhost")
    return Path(unquote(parsed.path)) if local else None


def _judge(name: str, *, buckets: bool = False) -> None:
    """Raise the local reader's refusal of the file Spark names ``name``, when it is a local file
    this process reads too (a Spark Connect server's files may be elsewhere)."""
    path = _local(name)
    if path is not None and path.is_file():
        read_usage([path], buckets=buckets)
