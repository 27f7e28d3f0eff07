"""Observed usage: samples of the brokers' quota metrics, read from CSV, JSON lines or Parquet.

A usage row is ``cluster, user, client_id``, an optional ``ts`` and any of the four client keys
(observed rates). ``client_id`` empty or missing is a client that sends none. ``ts`` is when the
sample was taken: seconds since the epoch, or an ISO 8601 time (``2026-11-22T10:00:00Z``; UTC
when no offset is given), or a Parquet timestamp. A row with no rate at all still names an
observed principal. A rate is a finite number at least 0; anything else (NaN, infinity, a
negative rate, a boolean, bytes, an object) is refused naming the file, the row (``row N``; a
JSON lines file: ``line N``) and the column (:func:`checked`). The columns are those of
:mod:`kqplan.fleet.usage_schema` (``schemas/usage-v1.json``): a CSV header, a Parquet schema or a
JSON line naming another column is refused, with the closest name. The Spark engine reads the
same files with its own readers (:func:`kqplan.fleet.spark_usage.usage_frame`) under these rules,
which the schema's ``NUMBER`` and ``TIME`` spell for both.
"""

from __future__ import annotations

import codecs
import csv
import datetime as dt
import itertools
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from kqplan.core.errors import KqplanError
from kqplan.fleet.locations import arrow_path, is_uri, local_location
from kqplan.fleet.samples import USAGE_KEYS, Sample, Unit, Usage, parse_stat, statistic
from kqplan.fleet.usage_schema import (
    BUCKETS,
    CLIENT_BUCKET,
    COLUMNS_HINT,
    NAMES,
    NUMBER,
    TIME,
    USER_BUCKET,
    bucket_problem,
    column_problem,
    missing_column,
    unknown_columns,
)

_T = TypeVar("_T")

__all__ = ["USAGE_KEYS", "Sample", "Unit", "Usage", "is_uri", "parse_stat", "read_usage", "statistic"]
_NUMBER, _TIME = re.compile(NUMBER), re.compile(TIME)
_KNOWN = frozenset(NAMES)
TS_RANGE = (-62135596800.0, 253402300799.0)
"""Seconds since the epoch a ``ts`` may name: the years 1 to 9999, as ISO 8601 writes them (a
number beyond is milliseconds or nanoseconds, not seconds)."""


_USAGE_SUFFIXES = (".csv", ".jsonl", ".json", ".parquet")
TS_HINT = ("write ts as seconds since the epoch (not milliseconds) or an ISO 8601 time, e.g. "
           "2026-11-22T10:00:00Z")
RATE_HINT = ("a rate is a finite number >= 0 (bytes per second, percent, mutations per second); "
             "leave the cell empty where there is no sample")
NAME_HINT = "cluster and user are text, client_id text or an integer (empty: a client that sends none)"
REPLACEMENT = "\ufffd"
"""U+FFFD in a name: the mark a decoder leaves for bytes that were not UTF-8 (Spark reads such a
file so, where this reader refuses it): every engine refuses it."""
SKIPPED = (".", "_")
"""Names in a usage directory that start so are not read (``_SUCCESS``, ``.crc`` files)."""


def local_paths(usage: Sequence[str | Path], tables: Sequence[str] = ()) -> list[Path]:
    """``--usage`` for the local engine: paths, and ``file://`` URIs as paths; a URI of another
    filesystem or a ``--usage-table`` is an error saying the Spark engine reads those."""
    if tables:
        raise KqplanError(f"--usage-table {tables[0]}: the local engine reads files, not Spark's catalog",
                          hint="add --engine spark (with --spark-master or --spark-remote for your cluster)")
    paths = []
    for item in usage:
        path = local_location("--usage", item)
        if path is None:
            raise KqplanError(f"--usage {item}: the local engine reads local files, not "
                              f"{str(item).partition(':')[0]}:// URIs",
                              hint="add --engine spark: Spark reads any filesystem its Hadoop layer has")
        paths.append(path)
    return paths


def refusal(path: Path | str, where: str, problem: str, hint: str | None = None) -> KqplanError:
    """A usage file's refusal, located: ``FILE: WHERE: PROBLEM``; ``where`` is ``row N`` (of a
    CSV file's rows after its header, or of a Parquet file's), ``line N`` (of a JSON lines file),
    or empty for the file as a whole."""
    from kqplan.core.entity import visible

    shown = visible(str(path))
    return KqplanError(f"{shown}: {where}: {problem}" if where else f"{shown}: {problem}", hint=hint)


def usage_files(paths: Sequence[Path]) -> Iterator[Path]:
    """The usage files under ``paths``, in the order every engine reads them: a file as given, a
    directory's files (recursively, sorted, names starting with ``.`` or ``_`` left out) whose
    names end in ``.csv``, ``.jsonl``, ``.json`` or ``.parquet``. Each is a regular file
    (:func:`kqplan.files.checked_input`: a FIFO, a device such as ``/dev/zero``, a socket is a
    KqplanError naming it, and never read); a directory named like a usage file (``x.csv/``, as
    Spark writes its output) is read as a directory, and is an error when it holds none."""
    for path in paths:
        if path.is_dir():
            found = _listed(path)
            if not found and path.suffix in _USAGE_SUFFIXES:
                raise _empty_directory(path)
            yield from found
        elif path.exists() or path.is_symlink():
            yield _regular(path)
        else:
            raise KqplanError(f"--usage {path}: no such file or directory")


def _listed(directory: Path) -> list[Path]:
    """The usage files of ``directory``, sorted, each checked; an error for a directory among them
    named like a usage file that holds none."""
    entries = sorted(p for p in directory.rglob("*") if p.suffix in _USAGE_SUFFIXES
                     and not p.name.startswith(SKIPPED))
    files = [e for e in entries if not e.is_dir()]
    holders = {parent for f in files for parent in f.parents}
    for entry in entries:
        if entry.is_dir() and (entry.is_symlink() or entry not in holders):
            raise _empty_directory(entry)
    return [_regular(f) for f in files]


def _empty_directory(path: Path) -> KqplanError:
    return refusal(path, "", "a directory named like a usage file, holding no usage file "
                   "(.csv, .jsonl, .json, .parquet)", hint="give usage files, or directories of them")


def _regular(path: Path) -> Path:
    """``path``, once it is known to be a regular file kqplan may read (never a FIFO or device)."""
    from kqplan.files import checked_input

    checked_input(path, what="usage file")
    return path


def _records(path: Path) -> Iterator[tuple[str, Mapping[str, object]]]:
    """The records of a usage file, each with where it is (``row N``, ``line N``)."""
    if path.suffix == ".parquet":
        yield from _parquet_records(path)
    elif path.suffix == ".csv":
        reader = csv.DictReader(_lines(path))
        i = 0
        try:
            header_problem(path, reader.fieldnames)
            for i, record in enumerate(reader, start=1):
                yield f"row {i}", record
        except csv.Error as exc:
            raise refusal(path, f"row {i + 1}" if i or reader.fieldnames else "line 1",
                          f"not CSV: {exc}", hint=COLUMNS_HINT) from None
    else:
        for line_number, line in enumerate(_lines(path), start=1):
            if line.strip():
                yield f"line {line_number}", json_record(path, line_number, line)


LINE_LIMIT = 16 * 1024 * 1024
"""The longest line a usage text file may have (a file without newlines is not read whole)."""


def _lines(path: Path) -> Iterator[str]:
    """The lines of a text file, endings kept (as ``csv`` wants them), decoded one at a time: a
    byte that is not UTF-8 is refused naming its line (a BOM at the start is no part of it)."""
    with path.open("rb") as fh:
        for number in itertools.count(1):
            raw = fh.readline(LINE_LIMIT + 1)
            if not raw:
                return
            if len(raw) > LINE_LIMIT:
                raise refusal(path, f"line {number}", f"longer than {LINE_LIMIT // 1024 // 1024} MiB",
                              hint="usage files are CSV or JSON lines: one row per line")
            if number == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8):]
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise refusal(path, f"line {number}", f"not UTF-8 (byte 0x{raw[exc.start]:02x} at column "
                              f"{exc.start + 1})", hint="save the usage file as UTF-8") from None


class _Twice(ValueError):
    pass


def _unique(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """A JSON object, refused when it names a key twice (which value counts would be a guess;
    Spark refuses such a line too)."""
    record = dict(pairs)
    if len(record) < len(pairs):
        raise _Twice(next(k for i, (k, _) in enumerate(pairs) if any(k == o for o, _ in pairs[:i])))
    return record


def csv_header(path: Path) -> tuple[str, ...]:
    """A CSV usage file's column names (its first line), once :func:`header_problem` passes them."""
    try:
        names = next(csv.reader(itertools.islice(_lines(path), 1)), None)
    except csv.Error as exc:
        raise refusal(path, "line 1", f"not CSV: {exc}", hint=COLUMNS_HINT) from None
    header_problem(path, names)
    return tuple(names or ())


def json_record(path: Path, line_number: int, line: str) -> Mapping[str, object]:
    """Line ``line_number`` of a JSON lines file as its object; a refusal when it is none."""
    try:
        record = json.loads(line, object_pairs_hook=_unique)
    except _Twice as exc:
        raise refusal(path, f"line {line_number}", f"names {exc.args[0]} twice",
                      hint="one JSON object per line, each name once") from None
    except json.JSONDecodeError as exc:
        raise refusal(path, f"line {line_number}", f"not JSON: {exc.msg}",
                      hint="one JSON object per line; " + COLUMNS_HINT) from None
    except RecursionError:
        raise refusal(path, f"line {line_number}", "not JSON: nested too deeply") from None
    if not isinstance(record, dict):
        kind = {list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
            type(record), "a number")
        raise refusal(path, f"line {line_number}", f"not a JSON object ({kind})",
                      hint="one JSON object per line; " + COLUMNS_HINT)
    if not _KNOWN.issuperset(record):
        raise refusal(path, f"line {line_number}", str(unknown_columns(list(record))), hint=COLUMNS_HINT)
    return record


def header_problem(path: Path | str, names: Sequence[str] | None) -> None:
    """Refuse a CSV header (the first line) that does not name cluster and user, names a column
    twice or names one the usage schema does not have: a CSV file without a header would be read as
    no rows at all, and a misspelt column (``client-id``) as a column of nothing."""
    from kqplan.core.entity import visible

    hint = "the first line of a usage CSV file names its columns; " + COLUMNS_HINT
    if names is None:
        raise refusal(path, "line 1", "no header (the file is empty)", hint=hint)
    if not names or list(names) == [""]:
        raise refusal(path, "line 1", "no header (the first line is empty)", hint=hint)
    missing = missing_column(names)
    if missing is not None:
        shown = visible(",".join(names))
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        raise refusal(path, "line 1", f"the header has {missing}: {shown}", hint=hint)
    for column in NAMES:
        if list(names).count(column) > 1:
            raise refusal(path, "line 1", f"the header names {column} twice", hint=hint)
    unknown = unknown_columns(names)
    if unknown is not None:
        raise refusal(path, "line 1", unknown, hint=hint)


def refuse_columns(path: Path | str, names: Sequence[str]) -> None:
    """Refuse a Parquet file (a URI, a table) whose columns miss cluster or user or name a column the
    usage schema does not have."""
    problem = column_problem(names)
    if problem is not None:
        raise refusal(path, "", problem, hint=COLUMNS_HINT)


def _not_parquet(path: Path, exc: Exception) -> KqplanError:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return refusal(path, "", f"not a Parquet file ({first})",
                   hint="usage files are CSV (.csv), JSON lines (.jsonl, .json) or Parquet (.parquet)")


def read_parquet(path: Path, *, schema_only: bool = False) -> Any:
    """A Parquet file's table (or only its schema); KqplanError naming the file when it is none."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        if schema_only:
            with pq.ParquetFile(arrow_path(path)) as parquet:
                return parquet.schema_arrow
        return pq.read_table(arrow_path(path))
    except (pa.ArrowException, OSError) as exc:
        raise _not_parquet(path, exc) from None


def _parquet_records(path: Path) -> Iterator[tuple[str, Mapping[str, object]]]:
    """A Parquet file's rows, a batch at a time (a large file is never all in memory)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    i = 0
    try:
        parquet = pq.ParquetFile(arrow_path(path))
    except (pa.ArrowException, OSError) as exc:
        raise _not_parquet(path, exc) from None
    with parquet:
        refuse_columns(path, parquet.schema_arrow.names)
        wanted = [c for c in NAMES if c in parquet.schema_arrow.names]
        batches = parquet.iter_batches(batch_size=8192, columns=wanted)
        while True:
            try:
                batch = next(batches, None)
                records = batch.to_pylist() if batch is not None else []
            except (pa.ArrowException, OSError, ValueError) as exc:
                raise _not_parquet(path, exc) from None
            if batch is None:
                return
            for record in records:
                i += 1
                yield f"row {i}", record


def number(raw: object) -> float:
    """A rate cell as a finite number (text spelled as :data:`NUMBER` says); ValueError otherwise,
    as the Spark engine judges it (a boolean, ``1_000``, ``5d``, NaN and infinity are none)."""
    if isinstance(raw, bool):
        raise ValueError(raw)
    try:
        if isinstance(raw, int | float):
            value = float(raw)
        elif _NUMBER.match(text := str(raw)):
            value = float(text)
        else:
            raise ValueError(raw)
    except OverflowError:
        raise ValueError(raw) from None
    if not math.isfinite(value):
        raise ValueError(raw)
    return value


def timestamp(raw: object) -> float | None:
    """A ``ts`` cell as seconds since the epoch; None when empty; ValueError when it is no time
    (or seconds outside :data:`TS_RANGE`)."""
    if raw is None or raw == "":
        return None
    if isinstance(raw, dt.datetime):  # a Parquet timestamp (naive: UTC, as Spark reads it)
        return (raw if raw.tzinfo is not None else raw.replace(tzinfo=dt.UTC)).timestamp()
    text = str(raw)
    if isinstance(raw, int | float) or _NUMBER.match(text):
        seconds = number(raw)
        if not TS_RANGE[0] <= seconds <= TS_RANGE[1]:
            raise ValueError(raw)
        return seconds
    if _TIME.match(text):
        when = dt.datetime.fromisoformat(text)
        return (when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)).timestamp()
    raise ValueError(raw)


def rate(raw: object) -> float:
    """A rate cell as a :func:`number` that is at least 0; ValueError otherwise."""
    value = number(raw)
    if value < 0:
        raise ValueError(raw)
    return value


Row = tuple[str, str, str, "float | None", list[tuple[str, float]], str]
"""A usage row, checked: cluster, user, client_id, ts, its samples (key, value) and its bucket."""


def checked(path: Path | str, where: str, record: Mapping[str, object], *, buckets: bool = False) -> Row:
    """Record ``where`` of ``path`` under the rules every engine applies, or its refusal naming the
    file, the row (or line) and the column: cluster non-empty text, user non-empty text (empty in a
    ``{client-id=C}`` bucket's row), client_id text or an integer (missing or empty: a client that
    sends none; a bucket row: none for ``{user=U}``, one for ``{client-id=C}``), ``ts`` a time,
    each rate a finite number at least 0 (an empty cell or null: no sample), no name holding
    U+FFFD. ``buckets`` false: a bucket's row is refused (the reader reads principals only)."""
    kind = bucket_kind(path, where, record, buckets=buckets)
    names = []
    for column in ("cluster", "user"):
        raw = record.get(column)
        if column == "user" and kind == CLIENT_BUCKET:
            if raw is not None and raw != "":
                raise refusal(path, where, f"a {{client-id=C}} bucket's row (bucket {kind}) names no user: "
                              f"user is {raw!r}", hint=COLUMNS_HINT)
            names.append("")
            continue
        if raw is None or raw == "":
            raise refusal(path, where, f"cluster and user are required: {column} is "
                          f"{'empty' if raw == '' else 'missing'}", hint=COLUMNS_HINT)
        if not isinstance(raw, str):
            raise refusal(path, where, f"{column} is not text: {raw!r}", hint=NAME_HINT)
        names.append(raw)
    client = record.get("client_id")
    if isinstance(client, bool) or not isinstance(client, str | int | None):
        raise refusal(path, where, f"client_id is not text: {client!r}", hint=NAME_HINT)
    client_id = "" if client is None else str(client)
    if kind == USER_BUCKET and client_id:
        raise refusal(path, where, f"a {{user=U}} bucket's row (bucket {kind}) names no client_id: "
                      f"client_id is {client!r}", hint=COLUMNS_HINT)
    if kind == CLIENT_BUCKET and not client_id:
        raise refusal(path, where, f"a {{client-id=C}} bucket's row (bucket {kind}) names its client-id: "
                      "client_id is empty", hint=COLUMNS_HINT)
    for column, name in (("cluster", names[0]), ("user", names[1]), ("client_id", client_id)):
        if REPLACEMENT in name:
            raise refusal(path, where, f"{column} holds U+FFFD, the mark of bytes that were not UTF-8: "
                          f"{name!r}", hint="save the usage file as UTF-8")
    try:
        ts = timestamp(record.get("ts"))
    except ValueError:
        raise refusal(path, where, f"ts is not a time: {record.get('ts')!r}", hint=TS_HINT) from None
    samples = []
    for key in USAGE_KEYS:
        raw = record.get(key)
        if raw is None or raw == "":
            continue
        try:
            samples.append((key, rate(raw)))
        except ValueError:
            problem = "is negative" if negative(raw) else "is not a number"
            raise refusal(path, where, f"{key} {problem}: {raw!r}", hint=RATE_HINT) from None
    return names[0], names[1], client_id, ts, samples, kind


def bucket_kind(path: Path | str, where: str, record: Mapping[str, object], *, buckets: bool) -> str:
    """A row's ``bucket``: empty for a principal's row, ``user`` or ``client-id``; refused when it
    is none of them, or (``buckets`` false) a bucket's
    (:func:`~kqplan.fleet.usage_schema.bucket_problem`)."""
    raw = record.get("bucket")
    if raw is None or raw == "":
        return ""
    if buckets and raw in BUCKETS:
        return str(raw)
    problem = bucket_problem(record)
    assert problem is not None
    raise refusal(path, where, *problem)


def negative(raw: object) -> bool:
    """Whether ``raw`` is a number below 0 (a rate refused for that)."""
    try:
        return number(raw) < 0
    except ValueError:
        return False


def read_usage(paths: Sequence[Path], *, buckets: bool = False) -> Usage:
    """Samples and observed principals from CSV, JSON lines or Parquet files (or directories);
    ``buckets``: and quota buckets' rows (refused otherwise)."""
    samples: list[Sample] = []
    principals: set[tuple[str, str, str]] = set()
    units: set[Unit] = set()
    for path in usage_files(paths):
        for where, record in _records(path):
            cluster, user, client_id, ts, values, kind = checked(path, where, record, buckets=buckets)
            if kind:
                units.add((cluster, user, client_id, kind))
            else:
                principals.add((cluster, user, client_id))
            samples.extend(Sample(cluster, user, client_id, key, value, ts, kind) for key, value in values)
    return Usage(samples, frozenset(principals), frozenset(units))
