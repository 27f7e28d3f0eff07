"""Observed usage: samples of the brokers' quota metrics, read from CSV, JSON lines or Parquet.

A usage row is ``cluster, user, client_id``, an optional ``ts`` and any of the four client keys
(observed rates). ``client_id`` empty or missing is a client that sends none. ``ts`` is when the
sample was taken: seconds since the epoch, or an ISO 8601 time (``2026-11-22T10:00:00Z``; UTC
when no offset is given), or a Parquet timestamp. A row with no rate at all still names an
observed principal. The Spark engine reads the same files with its own readers
(:func:`kqplan.fleet.spark.usage_frame`) under these rules, which :data:`NUMBER` and :data:`TIME`
spell for both.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kqplan.core.errors import KqplanError
from kqplan.core.quotas import CLIENT_KEYS

_T = TypeVar("_T")

USAGE_KEYS: tuple[str, ...] = CLIENT_KEYS
"""producer_byte_rate, consumer_byte_rate, request_percentage, controller_mutation_rate."""

NUMBER = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$"
"""A ``ts`` written as seconds since the epoch (one regex, used by both engines)."""
TIME = (r"^[0-9]{4}-[0-9]{2}-[0-9]{2}"
        r"([T ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})?)?$")
"""A ``ts`` written as an ISO 8601 date or time: a date, or a date and a time to the second (with
up to 6 decimals), then ``Z``, an offset ``+HH:MM``, or nothing (UTC)."""
_NUMBER, _TIME = re.compile(NUMBER), re.compile(TIME)
TS_RANGE = (-62135596800.0, 253402300799.0)
"""Seconds since the epoch a ``ts`` may name: the years 1 to 9999, as ISO 8601 writes them (a
number beyond is milliseconds or nanoseconds, not seconds)."""


@dataclass(frozen=True, slots=True)
class Sample:
    cluster: str
    user: str
    client_id: str
    key: str
    value: float
    ts: float | None = None
    """Seconds since the epoch; None: the row had no ``ts``."""

    def sort_key(self) -> tuple[str, str, str, str, float, bool, float]:
        return (self.cluster, self.user, self.client_id, self.key, self.value, self.ts is not None,
                self.ts or 0.0)


@dataclass(frozen=True, slots=True)
class Usage:
    """What the usage files say: every sample, and every principal they name (a row without any
    rate names one too: it is observed, its usage unknown)."""

    samples: list[Sample] = field(default_factory=list)
    principals: frozenset[tuple[str, str, str]] = frozenset()
    """(cluster, user, client_id), the principals of :attr:`samples` included."""

    @classmethod
    def of(cls, samples: Sequence[Sample], principals: Sequence[tuple[str, str, str]] = ()) -> Usage:
        return cls(list(samples), frozenset({(s.cluster, s.user, s.client_id) for s in samples}
                                            | set(principals)))


def parse_stat(text: str) -> float | None:
    """``max`` -> None (the maximum), ``p99`` -> 0.99, ``p50`` -> 0.5."""
    if text == "max":
        return None
    found = re.fullmatch(r"p(\d{1,2}(?:\.\d+)?)", text)
    if found is None or not 0 < float(found[1]) < 100:
        raise KqplanError(f"--stat {text!r} is not a statistic", hint="use max or pNN, e.g. p99 or p99.9")
    return float(found[1]) / 100


def statistic(values: Sequence[float], q: float | None) -> float:
    """The maximum, or the ``q`` quantile interpolated linearly between closest ranks."""
    if q is None:
        return max(values)
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


_USAGE_SUFFIXES = (".csv", ".jsonl", ".json", ".parquet")
COLUMNS_HINT = f"columns: cluster, user, client_id, ts and any of {', '.join(USAGE_KEYS)}"
TS_HINT = ("write ts as seconds since the epoch (not milliseconds) or an ISO 8601 time, e.g. "
           "2026-11-22T10:00:00Z")


URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
"""A ``--usage`` value naming a URI (``file://``, ``s3a://``, ``gs://``, ``abfss://``, ``hdfs://`` …)."""


def is_uri(text: str | Path) -> bool:
    return isinstance(text, str) and URI.match(text) is not None


def local_paths(usage: Sequence[str | Path], tables: Sequence[str] = ()) -> list[Path]:
    """``--usage`` for the local engine: paths, and ``file://`` URIs as paths; a URI of another
    filesystem or a ``--usage-table`` is an error saying the Spark engine reads those."""
    from urllib.parse import unquote, urlparse

    if tables:
        raise KqplanError(f"--usage-table {tables[0]}: the local engine reads files, not Spark's catalog",
                          hint="add --engine spark (with --spark-master or --spark-remote for your cluster)")
    paths = []
    for item in usage:
        if not is_uri(item):
            paths.append(Path(item))
            continue
        parsed = urlparse(str(item))
        if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
            raise KqplanError(f"--usage {item}: the local engine reads local files, not "
                              f"{parsed.scheme}:// URIs",
                              hint="add --engine spark: Spark reads any filesystem its Hadoop layer has")
        paths.append(Path(unquote(parsed.path)))
    return paths


def usage_files(paths: Sequence[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.suffix in _USAGE_SUFFIXES
                              and not p.name.startswith((".", "_")))
        elif path.is_file():
            yield path
        else:
            raise KqplanError(f"--usage {path}: no such file or directory")


def _records(path: Path) -> Iterator[Mapping[str, object]]:
    if path.suffix == ".parquet":
        yield from read_parquet(path).to_pylist()
    elif path.suffix == ".csv":
        with path.open(newline="", encoding="utf-8") as fh:
            yield from _utf8(path, csv.DictReader(fh))
    else:
        with path.open(encoding="utf-8") as fh:
            for line_number, line in enumerate(_utf8(path, fh), start=1):
                if line.strip():
                    try:
                        record = json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise KqplanError(f"{path}:{line_number}: not JSON: {exc.msg}") from None
                    if not isinstance(record, dict):
                        raise KqplanError(f"{path}:{line_number}: not a JSON object", hint=COLUMNS_HINT)
                    yield record


def _utf8(path: Path, rows: Iterable[_T]) -> Iterator[_T]:
    """``rows`` of a text file, a KqplanError naming the file where it is not UTF-8."""
    try:
        yield from rows
    except UnicodeDecodeError as exc:
        raise not_utf8(path, exc) from None


def not_utf8(path: Path, exc: UnicodeDecodeError) -> KqplanError:
    return KqplanError(f"{path}: not UTF-8 (byte {exc.start})", hint="save the usage file as UTF-8")


def read_parquet(path: Path, *, schema_only: bool = False) -> Any:
    """A Parquet file's table (or only its schema); KqplanError naming the file when it is none."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.read_schema(path) if schema_only else pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        raise KqplanError(f"{path}: not a Parquet file ({str(exc).splitlines()[0]})",
                          hint="usage files are CSV (.csv), JSON lines (.jsonl, .json) or Parquet (.parquet)"
                          ) from None


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


def read_usage(paths: Sequence[Path]) -> Usage:
    """Samples and observed principals from CSV, JSON lines or Parquet files (or directories)."""
    samples: list[Sample] = []
    principals: set[tuple[str, str, str]] = set()
    for path in usage_files(paths):
        for i, record in enumerate(_records(path), start=1):
            cluster, user = record.get("cluster"), record.get("user")
            if not isinstance(cluster, str) or not cluster or not isinstance(user, str) or not user:
                raise KqplanError(f"{path}: row {i}: cluster and user are required", hint=COLUMNS_HINT)
            client = record.get("client_id")
            client_id = "" if client is None else str(client)  # empty = a client that sends none
            principals.add((cluster, user, client_id))
            try:
                ts = timestamp(record.get("ts"))
            except ValueError:
                raise KqplanError(f"{path}: row {i}: ts is not a time: {record.get('ts')!r}",
                                  hint=TS_HINT) from None
            for key in USAGE_KEYS:
                raw = record.get(key)
                if raw is None or raw == "":
                    continue
                try:
                    value = number(raw)
                except ValueError:
                    raise KqplanError(f"{path}: row {i}: {key} is not a number: {raw!r}") from None
                samples.append(Sample(cluster, user, client_id, key, value, ts))
    return Usage(samples, frozenset(principals))
