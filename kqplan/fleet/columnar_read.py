"""The usage files as one DuckDB view, ``kq_usage``, under :func:`kqplan.fleet.usage.read_usage`'s rules.

Which reader reads what, and why:

- A Parquet file whose usage columns have ordinary types (text names; integer, float or boolean
  rates; a number, a timestamp or nothing as ``ts``) is read by DuckDB itself, streaming, never
  through Python objects: the 10^7-sample case. Its cells become in SQL exactly the values the
  Python reader gives (a Parquet timestamp: seconds since the epoch correctly rounded, as
  ``datetime.timestamp()`` gives them; nanoseconds rounded to the microsecond as pandas does),
  and each row carries ``kq_refused``: whether the Python reader would refuse it. The first scan
  of the data (:mod:`kqplan.fleet.columnar`'s principals) also finds each file's first refused
  row; :func:`refuse` reads that one row with pyarrow and judges it by the Python rules, so the
  refusal is the Python reader's message word for word (file, row, cell, hint). Should the row
  pass on its own (the SQL flags only what the Python reader refuses), the whole file is read by
  :func:`read_usage`.
- Every other file goes through :func:`read_usage` itself, one file at a time, its samples handed
  to DuckDB as an Arrow table: CSV, JSON lines, and Parquet files of other types (text rates or
  ``ts``, decimals, dates) or other columns than the usage schema's (which the Python reader
  refuses: a missing cluster or user, ``client-id`` for ``client_id``). Matching the Python
  reader on CSV and JSON in SQL is not worth it:
  its rules are Python's own parsers (``csv`` quoting, ``json`` numbers beyond a double, UTF-8
  errors by byte, ``datetime.fromisoformat``, the ``NUMBER`` spelling), which DuckDB's sniffing
  readers do not share, and refusing the same files with the same words would mean reading them
  in Python again anyway. Such a file costs Python objects while it is read (~0.5 GiB per
  million samples), one file at a time: export large usage as Parquet.

Files are judged in the Python reader's order: the first refusal in file order is the one raised,
whichever reader found it, and a missing path only after the files before it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kqplan.core.errors import KqplanError
from kqplan.fleet.locations import arrow_path
from kqplan.fleet.usage import (
    REPLACEMENT,
    TS_RANGE,
    USAGE_KEYS,
    Usage,
    checked,
    read_parquet,
    read_usage,
    usage_files,
)
from kqplan.fleet.usage_schema import BUCKETS, CLIENT_BUCKET, NAMES, USER_BUCKET, column_problem

if TYPE_CHECKING:
    import duckdb

VIEW = "kq_usage"
"""The view :func:`register_usage` creates."""
COLUMNS: tuple[str, ...] = NAMES
"""The usage columns (:mod:`kqplan.fleet.usage_schema`): :data:`VIEW`'s, in this order (``ts`` and the
keys as DOUBLE; ``user``, ``client_id`` and ``bucket`` never null: empty as the Python reader gives
them). ``bucket`` is empty in a principal's row; a bucket's row is read only where
:func:`register_usage` is told to (else refused)."""

TEXT, NUMBER, BOOLEAN, TIME, NANOS, NONE = "text", "number", "boolean", "time", "nanos", "none"
"""How DuckDB reads a usage column of a Parquet file (:func:`kinds`); NONE: absent or all null."""

_VIRTUAL = {"filename", "file_row_number", "file_index"}
"""DuckDB's own columns of a Parquet scan: a file with a column so named is read by Python."""
_GLOB = set("*?[]{}")
_EXACT = 2**53
"""Below this many microseconds (from the epoch, either way) a double holds them exactly."""
_US_RANGE = (int(TS_RANGE[0]) * 10**6, int(TS_RANGE[1]) * 10**6 + 999_999)
"""The microseconds ``datetime`` can hold (the years 1 to 9999); pyarrow refuses others."""


def quoted(name: str) -> str:
    """``name`` as a DuckDB identifier."""
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    """``text`` as a DuckDB string literal."""
    return "'" + text.replace("'", "''") + "'"


def kinds(path: Path) -> tuple[tuple[str, str], ...] | None:
    """Per usage column of the Parquet file ``path``: its kind and pyarrow type; None when the
    Python reader must read it (other types, a name DuckDB would read otherwise, no Parquet)."""
    if _GLOB & set(str(path)):  # DuckDB would take the name for a pattern
        return None
    try:
        schema = read_parquet(path, schema_only=True)
    except KqplanError:  # read_usage names the file in its own words
        return None
    names = list(schema.names)
    if column_problem(names) is not None:  # refused by the Python reader, in its words
        return None
    folded = [n.lower() for n in names]  # DuckDB binds names without regard to case
    if len(set(folded)) < len(folded) or _VIRTUAL & set(folded):
        return None
    found = []
    for column in COLUMNS:
        if column not in names:
            if column in folded:
                return None
            found.append((NONE, "absent"))
            continue
        kind = _kind(column, schema.field(column).type)
        if kind is None:
            return None
        found.append((kind, str(schema.field(column).type)))
    return tuple(found)


def _kind(column: str, arrow: Any) -> str | None:
    import pyarrow as pa

    t = arrow.value_type if pa.types.is_dictionary(arrow) else arrow
    if pa.types.is_null(t):
        return NONE
    if column in ("cluster", "user", "client_id", "bucket"):
        return TEXT if pa.types.is_string(t) or pa.types.is_large_string(t) else None
    if pa.types.is_integer(t) or pa.types.is_float32(t) or pa.types.is_float64(t):
        return NUMBER
    if column == "ts":
        return (NANOS if t.unit == "ns" else TIME) if pa.types.is_timestamp(t) else None
    return BOOLEAN if pa.types.is_boolean(t) else None


def _seconds(kind: str) -> str:
    """SQL for ``ts`` of ``kind`` as the Python reader's seconds since the epoch."""
    if kind == NUMBER:
        return "ts::DOUBLE"
    if kind == TIME:  # datetime.timestamp(): the microseconds over 10^6, correctly rounded
        return (f"CASE WHEN abs(epoch_us(ts)) < {_EXACT} THEN epoch_us(ts) / 1e6 "
                "ELSE (epoch_us(ts)::DECIMAL(18, 0) * 0.000001)::VARCHAR::DOUBLE END")
    if kind == NANOS:  # pandas' Timestamp.timestamp(): round(nanoseconds / 10^9, 6)
        return ("printf('%.6f', (epoch_ns(ts) // 1000000000)::DOUBLE "
                "+ (epoch_ns(ts) % 1000000000)::DOUBLE / 1e9)::DOUBLE")
    return "NULL::DOUBLE"


def _values(of: Mapping[str, str]) -> str:
    """:data:`VIEW`'s columns from a Parquet scan whose usage columns are of kinds ``of``."""
    def name(column: str) -> str:  # null only in a refused row (a {client-id=C} bucket's user: '')
        shown = f"{quoted(column)}::VARCHAR" if of[column] == TEXT else "NULL::VARCHAR"
        return shown if column == "cluster" else f"coalesce({shown}, '')"

    rates = [f"{quoted(k)}::DOUBLE" if of[k] == NUMBER else "NULL::DOUBLE" for k in USAGE_KEYS]
    return ", ".join([f"{name('cluster')} AS cluster", f"{name('user')} AS \"user\"",
                      f"{name('client_id')} AS client_id", f"{name('bucket')} AS bucket",
                      f"{_seconds(of['ts'])} AS ts",
                      *(f"{rate} AS {quoted(k)}" for rate, k in zip(rates, USAGE_KEYS, strict=True))])


def _refused(of: Mapping[str, str], *, buckets: bool) -> str:
    """SQL true for a row the Python reader refuses (``checked(..., buckets=buckets)``): exactly
    those, as :func:`judge` reads the first one flagged by the Python rules."""
    def text(column: str) -> str:
        return quoted(column) if of[column] == TEXT else "NULL::VARCHAR"

    def empty(column: str) -> str:
        return f"coalesce({text(column)}, '') = ''"

    def unreadable(column: str) -> str:
        return f"coalesce(contains({text(column)}, {literal(REPLACEMENT)}), false)"

    kind = f"coalesce({text('bucket')}, '')"  # kqplan.fleet.usage.bucket_kind: without buckets, none
    allowed = ", ".join(literal(k) for k in ("", *(BUCKETS if buckets else ())))
    checks = [f"{kind} NOT IN ({allowed})", empty("cluster"), unreadable("cluster"),
              f"(CASE WHEN {kind} = {literal(CLIENT_BUCKET)} THEN NOT {empty('user')} "
              f"ELSE {empty('user')} OR {unreadable('user')} END)",
              f"({kind} = {literal(USER_BUCKET)} AND NOT {empty('client_id')})",
              f"({kind} = {literal(CLIENT_BUCKET)} AND {empty('client_id')})", unreadable("client_id")]
    if of["ts"] == NUMBER:  # NaN first, as a function: a Parquet file's statistics leave NaN out
        checks.append(f"(NOT isfinite(ts::DOUBLE) OR ts::DOUBLE < {TS_RANGE[0]!r} "
                      f"OR ts::DOUBLE > {TS_RANGE[1]!r})")
    elif of["ts"] == TIME:
        checks.append(f"(ts IS NOT NULL AND NOT (epoch_us(ts) BETWEEN {_US_RANGE[0]} AND {_US_RANGE[1]}))")
    for key in USAGE_KEYS:
        if of[key] == BOOLEAN:
            checks.append(f"{quoted(key)} IS NOT NULL")
        elif of[key] == NUMBER:
            rate = f"{quoted(key)}::DOUBLE"
            checks.append(f"coalesce(NOT isfinite({rate}) OR {rate} < 0, false)")
    return " OR ".join(checks)


def _scan(files: Sequence[str]) -> str:
    listed = ", ".join(literal(f) for f in files)
    return f"read_parquet([{listed}], filename = true, file_row_number = true, union_by_name = true)"


@dataclass
class Sources:
    """The usage files as :func:`register_usage` found them, for :func:`refuse`."""

    files: list[Path]
    """Every usage file, in the Python reader's order."""
    by_duckdb: dict[str, Path]
    """The Parquet files DuckDB reads, by the name its ``kq_file`` column gives them."""
    buckets: bool = False
    """Whether quota buckets' rows are read (else refused, as :func:`read_usage` refuses them)."""
    keys: set[str] = field(default_factory=set)
    """The keys with any sample."""
    failure: tuple[Path, Exception] | None = None
    """The first file the Python reader refused, and its refusal (it read no file after it)."""
    missing: KqplanError | None = None
    """A path of ``--usage`` that is no file or directory (found after :attr:`files`)."""


def register_usage(con: duckdb.DuckDBPyConnection, paths: Sequence[Path], *, parquet: bool = True,
                   buckets: bool = False) -> Sources:
    """Create the view :data:`VIEW` of every usage file under ``paths``: a row per usage row, null
    rates where it has none (columns :data:`COLUMNS`), and where DuckDB reads the file itself
    ``kq_file``, ``kq_row`` (from 0) and ``kq_refused`` (a row :func:`read_usage` refuses). The
    view is of no use until :func:`refuse` has seen each file's first refused row. ``parquet``
    false: the Python reader reads every file; ``buckets``: quota buckets' rows are read, as
    ``read_usage(paths, buckets=True)`` reads them (else refused, as by ``read_usage(paths)``)."""
    found: list[Path] = []
    sources = Sources(found, {}, buckets)
    try:  # read_usage reads the files before a missing path: so does this
        found.extend(usage_files(paths))
    except KqplanError as exc:
        sources.missing = exc
    groups: dict[tuple[tuple[str, str], ...], list[Path]] = {}
    for path in found:
        shape = kinds(path) if parquet and path.suffix == ".parquet" else None
        if shape is not None:
            groups.setdefault(shape, []).append(path)
    groups = {shape: files for shape, files in groups.items() if _exact(con, shape, files)}
    sources.by_duckdb.update((str(f.absolute()), f) for files in groups.values() for f in files)
    tables = []
    for path in found:
        if str(path.absolute()) not in sources.by_duckdb:
            try:
                observed = read_usage([path], buckets=buckets)
            except Exception as exc:  # raised by refuse() unless DuckDB finds a refusal before it
                sources.failure = (path, exc)
                break
            sources.keys.update(s.key for s in observed.samples)
            tables.append(samples_table(observed))
    selects = []
    for shape, files in groups.items():
        of = {column: kind for column, (kind, _) in zip(COLUMNS, shape, strict=True)}
        sources.keys.update(k for k in USAGE_KEYS if of[k] == NUMBER)
        selects.append(f"SELECT {_values(of)}, filename AS kq_file, file_row_number AS kq_row, "
                       f"{_refused(of, buckets=buckets)} AS kq_refused "
                       f"FROM {_scan([str(f.absolute()) for f in files])}")
    _create_view(con, selects, tables)
    return sources


def _exact(con: duckdb.DuckDBPyConnection, shape: tuple[tuple[str, str], ...], files: Sequence[Path]) -> bool:
    """Whether DuckDB reads ``ts`` of ``files`` as finely as pyarrow: a nanosecond timestamp as
    TIMESTAMP_NS (DuckDB 1.3 reads those with a zone as microseconds; 1.1 truncates every one,
    hence ``duckdb>=1.2``)."""
    if shape[COLUMNS.index("ts")][0] != NANOS:
        return True
    try:
        found = con.execute(f"DESCRIBE SELECT ts FROM {_scan([str(f.absolute()) for f in files])}").fetchall()
    except Exception:  # a file DuckDB cannot read: the Python reader's, which says why
        return False
    return bool(found[0][1] == "TIMESTAMP_NS")


def refuse(sources: Sources, first_refused: Mapping[str, int]) -> None:
    """Raise what :func:`read_usage` raises for the files, given the first refused row of each file
    DuckDB reads (by its ``kq_file``): the first refusal in file order, then a missing path."""
    for path in sources.files:
        if sources.failure is not None and path == sources.failure[0]:
            raise sources.failure[1]
        name = str(path.absolute())
        if name in sources.by_duckdb and name in first_refused:
            judge(path, first_refused[name], buckets=sources.buckets)
    if sources.missing is not None:
        raise sources.missing


def judge(path: Path, row: int, *, buckets: bool = False) -> None:
    """Raise the Python reader's refusal of row ``row`` (from 0) of the Parquet file ``path``
    (``buckets``: as ``read_usage(paths, buckets=True)`` refuses it)."""
    check(path, row + 1, _record(path, row), buckets=buckets)
    read_usage([path], buckets=buckets)  # the row passes on its own: the file as the Python reader reads it
    raise AssertionError(f"{path}: row {row + 1}: DuckDB refused a row the Python reader reads")


def check(path: Path, i: int, record: Mapping[str, object], *, buckets: bool = False) -> None:
    """The checks :func:`read_usage` makes of row ``i`` (from 1) of ``path``, with its messages."""
    checked(path, f"row {i}", record, buckets=buckets)


def _record(path: Path, row: int) -> Mapping[str, object]:
    """Row ``row`` (from 0) of a Parquet file, as pyarrow gives it to the Python reader."""
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(arrow_path(path))
    try:
        columns = [c for c in COLUMNS if c in parquet.schema_arrow.names]
        start = 0
        for group in range(parquet.num_row_groups):
            size = parquet.metadata.row_group(group).num_rows
            if row < start + size:
                record: Mapping[str, object] = (
                    parquet.read_row_group(group, columns=columns).slice(row - start, 1).to_pylist()[0])
                return record
            start += size
    finally:
        parquet.close()
    raise AssertionError(f"{path} has no row {row + 1}")


def samples_table(observed: Usage) -> Any:
    """Samples as an Arrow table ``cluster, user, client_id, bucket, ts, key, value``: a row per
    sample, and a row with a null key per observed principal or bucket (:attr:`Usage.units`)."""
    import pyarrow as pa

    samples, units = observed.samples, sorted(observed.units)

    def column(values: Iterator[Any], filler: Any, arrow: Any) -> Any:
        return pa.array([*values, *([filler] * len(units))], arrow)

    return pa.table({
        "cluster": pa.array([s.cluster for s in samples] + [p[0] for p in units], pa.string()),
        "user": pa.array([s.user for s in samples] + [p[1] for p in units], pa.string()),
        "client_id": pa.array([s.client_id for s in samples] + [p[2] for p in units], pa.string()),
        "bucket": pa.array([s.bucket for s in samples] + [p[3] for p in units], pa.string()),
        "ts": column((s.ts for s in samples), None, pa.float64()),
        "key": column((s.key for s in samples), None, pa.string()),
        "value": column((s.value for s in samples), None, pa.float64()),
    })


def _create_view(con: duckdb.DuckDBPyConnection, selects: Sequence[str], tables: Sequence[Any]) -> None:
    sources = list(selects)
    if tables:
        import pyarrow as pa

        con.register("kq_python_usage", pa.concat_tables(tables))
        rates = ", ".join(f"CASE WHEN key = {literal(k)} THEN value END AS {quoted(k)}" for k in USAGE_KEYS)
        sources.append(f'SELECT cluster, "user", client_id, bucket, ts, {rates}, NULL::VARCHAR AS kq_file, '
                       "NULL::BIGINT AS kq_row, false AS kq_refused FROM kq_python_usage")
    if not sources:
        names = ("cluster", "user", "client_id", "bucket")
        nothing = ", ".join(f"NULL::{'VARCHAR' if c in names else 'DOUBLE'} AS {quoted(c)}" for c in COLUMNS)
        sources.append(f"SELECT {nothing}, NULL::VARCHAR AS kq_file, NULL::BIGINT AS kq_row, "
                       "false AS kq_refused WHERE false")
    con.execute(f"CREATE OR REPLACE TEMP VIEW {VIEW} AS " + " UNION ALL ".join(sources))
