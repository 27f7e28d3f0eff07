"""The local engine of ``kqplan fleet impact``, columnar: DuckDB for what grows with the samples,
the core's Python for what Kafka decides.

:func:`impact_of_files` gives the :class:`~kqplan.fleet.impact.Impact` that
:func:`kqplan.fleet.impact.impact_rows` gives over ``read_usage(paths)`` (the reference, whose
docstring defines every column), without holding a Python object per sample: 10^7 samples are
10^5 principals at most.

- DuckDB reads the usage files (:mod:`kqplan.fleet.columnar_read`: Parquet streamed by DuckDB,
  the rest through the Python reader) and computes every aggregate over the samples, in three
  scans: the principals (with each file's first refused row, which clusters have a sample
  without ``ts`` and each principal's count of samples per key); each principal's statistic per
  key; each member's mean per window of ``floor(ts / window)``, joined with the buckets, summed
  per bucket and window, and the statistic over a bucket's windows.
- Python resolves, once per distinct principal: which entity supplies each key before and after
  the plan (:func:`kqplan.core.resolve.effective` over a
  :class:`~kqplan.core.resolve.QuotaIndex`) and the bucket it is enforced in
  (:func:`kqplan.core.buckets.bucket_of`): the same code as the reference, not a re-statement of
  it in SQL. Each bucket gets a number, and the numbers go to DuckDB as an Arrow table that the
  window means are joined with. An untimed cluster's buckets (members' statistics summed) are
  summed in Python, by the reference's own :func:`~kqplan.fleet.impact.group_usage`.

A principal's statistic is the reference's to the bit: ``max``, or linear interpolation between
the closest ranks (:func:`kqplan.fleet.usage.statistic`) computed in SQL from the few values it
needs, each principal's top (or bottom) samples (``max(x, n)``: for p99 a handful per
principal, so every key takes one scan and little memory; :class:`Ranks`). Where that would keep
more than :data:`HELD` values (p50 of large principals) the key falls back to DuckDB's exact
``quantile_cont``, which holds every value and interpolates as ``fma(lo, 1 - d, hi * d)`` where
the reference computes ``lo + (hi - lo) * d``: the same number but for the last bits, as for a
bucket's statistic over its windows. Window means and bucket sums are added in DuckDB's order,
not the reference's: the last bits again (the Spark engine differs alike; tests/fleet compare
both so).

DuckDB runs on every core this process may use, within :data:`MEMORY_LIMIT`, spilling what it can
to a temporary directory (10^7 samples: ~0.55 GiB of RSS for the whole command).
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kqplan.core.buckets import bucket, bucket_of
from kqplan.core.entity import Entity
from kqplan.core.errors import KqplanError
from kqplan.core.resolve import Effective, Level, QuotaIndex, effective, level_of
from kqplan.core.state import QuotaState
from kqplan.fleet.columnar_read import VIEW, Sources, literal, quoted, refuse, register_usage
from kqplan.fleet.impact import DEFAULT_WINDOW, Impact, ImpactRow, Principal, UnusedRow, group_usage
from kqplan.fleet.usage import USAGE_KEYS

if TYPE_CHECKING:
    import duckdb

MEMORY_LIMIT = "512MB"
"""DuckDB's share of the process: with the interpreter, the quota states and the rows, 10^7
samples stay within 1 GiB of RSS (benchmarks/README.md, issue 28)."""

HELD = 4_000_000
"""The most values one statistics query keeps of its principals' top (or bottom) samples (~16
bytes each); a key that needs more gets DuckDB's ``quantile_cont``, which holds all of them."""

SIDES = (0, 1)
"""Before and after the plan."""

Buckets = dict[Principal, list[int | None]]
"""Per principal: its bucket's number per side and key (``side * 4 + key index``); None: unlimited."""


def impact_of_files(states: Mapping[str, tuple[QuotaState, QuotaState]], paths: Sequence[Path],
                    q: float | None, *, window: float = DEFAULT_WINDOW,
                    progress: Callable[[str], None] | None = None, held: int = HELD,
                    seen: Callable[[Collection[str]], None] | None = None) -> Impact:
    """:func:`kqplan.fleet.impact.impact_rows` of ``read_usage(paths)``, computed on DuckDB;
    ``progress`` hears what it is doing, ``held`` bounds a statistics query (:data:`HELD`), ``seen``
    every cluster the usage names, once the files have passed the checks."""
    try:
        import duckdb
    except ImportError:
        raise KqplanError("the local engine of fleet impact needs DuckDB", hint="pip install 'kqplan[spark]'"
                          ) from None
    report = progress or (lambda _: None)
    with _connected() as con:
        try:
            return _impact(con, states, paths, q, window=window, progress=report, held=held, seen=seen)
        except duckdb.OutOfMemoryException as exc:
            raise KqplanError(f"DuckDB needs more than {MEMORY_LIMIT} for this usage: {_first_line(exc)}",
                              hint="the exact statistic holds a principal's samples of a key in memory; "
                              "--engine spark computes it on a cluster") from None
        except duckdb.Error as exc:
            raise KqplanError(f"DuckDB cannot read the usage files: {_first_line(exc)}",
                              hint="usage files are CSV (.csv), JSON lines (.jsonl, .json) or Parquet "
                              "(.parquet)") from None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@contextmanager
def _connected() -> Iterator[duckdb.DuckDBPyConnection]:
    """An in-memory DuckDB on every core, within :data:`MEMORY_LIMIT`, spilling to a directory
    removed afterwards."""
    import duckdb

    with tempfile.TemporaryDirectory(prefix="kqplan-duckdb-") as spill:
        con = duckdb.connect(config={"threads": cores(), "memory_limit": MEMORY_LIMIT,
                                     "temp_directory": spill, "preserve_insertion_order": False})
        try:
            yield con
        finally:
            con.close()


def _impact(con: duckdb.DuckDBPyConnection, states: Mapping[str, tuple[QuotaState, QuotaState]],
            paths: Sequence[Path], q: float | None, *, window: float,
            progress: Callable[[str], None], held: int,
            seen: Callable[[Collection[str]], None] | None) -> Impact:
    progress("Reading the usage with DuckDB")
    principals, untimed, samples, counts = _observed(con, paths, states, window=window, seen=seen)
    progress(f"Resolving {samples} samples")
    keys = list(counts)
    clusters = "cluster IN (" + (", ".join(literal(c) for c in sorted(states)) or "NULL") + ")"
    stats = _stats(con, counts, q, clusters, held=held)
    indexes = {c: (QuotaIndex.of(b), QuotaIndex.of(a)) for c, (b, a) in states.items()}
    resolved = {p: (effective(indexes[p[0]][0], p[1], p[2]), effective(indexes[p[0]][1], p[1], p[2]))
                for p in principals}
    numbers: dict[tuple[int, str, str, Entity], int] = {}  # (side, cluster, key, bucket) -> its number
    buckets: Buckets = {}
    bucket_for = _buckets()
    for p, sides in resolved.items():
        buckets[p] = [numbers.setdefault((side, p[0], key, group), len(numbers))
                      if (group := bucket_for(source, p[1], p[2])) is not None else None
                      for side in SIDES for key, (_, source) in zip(USAGE_KEYS, sides[side], strict=True)]
    timed = [p for p in principals if p[0] not in untimed]
    totals: dict[int, float | None] = _timed_usage(con, keys, buckets, timed, q)
    members: dict[int, list[Principal]] = {}
    for p in principals:
        if p[0] in untimed:
            for number in buckets[p]:
                if number is not None:
                    members.setdefault(number, []).append(p)
    for (_, _, key, _), number in numbers.items():
        if number in members:
            totals[number] = group_usage(members[number], key, q, timed=False, stats=stats, means={})
    shown: dict[Entity, str] = {}  # display forms, each computed once (clusters share entities)
    labels = {number: _display(group, shown) for (_, _, _, group), number in numbers.items()}
    rows = _rows(principals, resolved=resolved, buckets=buckets, labels=labels, stats=stats, totals=totals,
                 shown=shown)
    used = {(p[0], source, key) for p, (_, after) in resolved.items()
            for key, (_, source) in zip(USAGE_KEYS, after, strict=True) if source is not None}
    unused = sorted((cluster, _display(entity, shown), key)  # the client entries of the state after
                    for cluster, (_, after) in indexes.items() for entity, quotas in after.clients.values()
                    for key in quotas if (cluster, entity, key) not in used)
    return Impact(rows, [UnusedRow(*u) for u in unused], untimed)


def _display(entity: Entity, shown: dict[Entity, str]) -> str:
    """``entity.display``, remembered in ``shown``."""
    found = shown.get(entity)
    if found is None:
        found = shown[entity] = entity.display
    return found


def _buckets() -> Callable[[Entity | None, str, str], Entity | None]:
    """:func:`kqplan.core.buckets.bucket_of`, with each source entity's level found once."""
    levels: dict[Entity, Level | None] = {}

    def bucket_for(source: Entity | None, user: str, client_id: str) -> Entity | None:
        if source is None:
            return None
        level = levels[source] if source in levels else levels.setdefault(source, level_of(source))
        return bucket(level, user, client_id) if level is not None else bucket_of(source, user, client_id)

    return bucket_for


def _observed(con: duckdb.DuckDBPyConnection, paths: Sequence[Path], states: Mapping[str, object], *,
              window: float, seen: Callable[[Collection[str]], None] | None = None
              ) -> tuple[list[Principal], frozenset[str], int, dict[str, list[int]]]:
    """The usage files as the view :data:`~kqplan.fleet.columnar_read.VIEW`, once they have passed
    the Python reader's checks; then the observed principals of ``states``' clusters (sorted), those
    clusters with a sample without ``ts``, the count of samples in the files, and per key with any
    sample each principal's count of samples of it (for :func:`_stats`). One scan gives all that,
    each file's first refused row, and the window means (:func:`_scan`); ``seen`` hears every
    cluster the files name."""
    import duckdb

    sources = register_usage(con, paths)
    try:
        scanned, refused = _scan(con, sources, window=window)
    except (duckdb.OutOfMemoryException, duckdb.InterruptException):
        raise
    except (duckdb.Error, LookupError):
        # a Parquet file DuckDB cannot read after all (or names otherwise): the Python reader's turn
        sources = register_usage(con, paths, parquet=False)
        scanned, refused = _scan(con, sources, window=window)
    refuse(sources, refused)
    if seen is not None:
        seen({r[0] for r in scanned})
    keys = [k for k in USAGE_KEYS if k in sources.keys]
    mine = [r for r in scanned if r[0] in states]
    return (sorted((c, u, i) for c, u, i, *_ in mine), frozenset(r[0] for r in mine if r[3]),
            sum(sum(r[4:]) for r in scanned), {k: [r[4 + n] for r in mine] for n, k in enumerate(keys)})


PRINCIPALS, FILES, WINDOWS = 3, 1, 2
"""The grouping sets of the table ``kq_scan`` (``kq_set``): per principal, per file, per principal
and window."""


def _scan(con: duckdb.DuckDBPyConnection, sources: Sources, *,
          window: float) -> tuple[list[tuple[Any, ...]], dict[str, int]]:
    """One scan of the usage into the table ``kq_scan``: per principal whether it has a sample
    without ``ts`` and its count of samples of each key with any; per file DuckDB reads its first
    refused row; per principal and window of ``floor(ts / window)`` the mean of each key
    (``kq_m0``… in :data:`USAGE_KEYS`' order). Return the first two (principals as ``(cluster,
    user, client_id, untimed, counts…)``, files by DuckDB's name); LookupError when DuckDB names a
    file otherwise."""
    rates = [quoted(k) for k in USAGE_KEYS if k in sources.keys]
    any_rate = " OR ".join(f"{r} IS NOT NULL" for r in rates) or "false"
    counted = "".join(f", count({r}) AS kq_n{i}" for i, r in enumerate(rates))
    means = "".join(f", avg({quoted(k)}) AS kq_m{i}" if k in sources.keys else f", NULL::DOUBLE AS kq_m{i}"
                    for i, k in enumerate(USAGE_KEYS))
    # a refused row has no window: its ts may be no number (refuse() raises before the means are read)
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE kq_scan AS SELECT grouping(kq_file, kq_w) AS kq_set, kq_file, "
        f'min(kq_row) FILTER (WHERE kq_refused) AS kq_first, cluster, "user", client_id, kq_w, '
        f"bool_or(ts IS NULL AND ({any_rate})) AS kq_untimed{counted}{means} "
        f"FROM (SELECT *, CASE WHEN kq_refused THEN NULL ELSE floor(ts / {_double(window)})::BIGINT END "
        f"AS kq_w FROM {VIEW}) "
        'GROUP BY GROUPING SETS ((cluster, "user", client_id), (kq_file), '
        '(cluster, "user", client_id, kq_w))')
    rows = con.execute(f'SELECT kq_set, kq_file, kq_first, cluster, "user", client_id, kq_untimed'
                       f"{''.join(f', kq_n{i}' for i in range(len(rates)))} FROM kq_scan "
                       f"WHERE kq_set <> {WINDOWS}").fetchall()
    refused = {r[1]: int(r[2]) for r in rows if r[0] == FILES and r[2] is not None}
    if set(refused) - set(sources.by_duckdb):
        raise LookupError(sorted(set(refused) - set(sources.by_duckdb)))
    return [r[3:] for r in rows if r[0] == PRINCIPALS], refused


def _double(x: float) -> str:
    """``x`` as a DuckDB DOUBLE literal (a plain decimal would be a DECIMAL)."""
    shown = repr(x)
    return shown if "e" in shown else shown + "e0"


def _statistic(column: str, q: float | None) -> str:
    """SQL of the statistic of ``column``: max, or DuckDB's exact ``q`` quantile."""
    return f"max({column})" if q is None else f"quantile_cont({column}, {_double(q)})"


@dataclass(frozen=True)
class Ranks:
    """What the ``q`` quantile of a key needs of each principal's samples: the ``size`` largest
    (``side`` max, descending) or smallest (min, ascending), ``held`` values in all."""

    key: str
    side: str
    size: int
    held: int

    @classmethod
    def of(cls, key: str, counts: Sequence[int], q: float) -> Ranks:
        """Linear interpolation between the closest ranks ``floor(q * (n - 1))`` and the next one
        (:func:`kqplan.fleet.usage.statistic`) needs, from the top, every value down to the lower
        rank; from the bottom, every value up to the higher one."""
        top = bottom = 1
        for n in counts:
            if n:
                low = math.floor(q * (n - 1))
                top, bottom = max(top, n - low), max(bottom, min(low + 1, n - 1) + 1)
        held = {side: sum(min(size, n) for n in counts) for side, size in (("max", top), ("min", bottom))}
        side = min(held, key=held.__getitem__)
        return cls(key, side, top if side == "max" else bottom, held[side])


def _stats(con: duckdb.DuckDBPyConnection, counts: Mapping[str, Sequence[int]], q: float | None,
           clusters: str, *, held: int) -> dict[Principal, dict[str, float]]:
    """Principal -> key -> the statistic over its samples, for the principals of ``clusters`` (a
    SQL condition). A quantile is :func:`kqplan.fleet.usage.statistic`'s, to the bit, from each
    principal's top (or bottom) values (:class:`Ranks`), every key in one query while they are few
    (p99: a handful per principal); a key that would keep more than ``held`` values has DuckDB's
    ``quantile_cont`` in a query of its own (the last bit may differ)."""
    def grouped(columns: str) -> str:
        return f'SELECT cluster, "user", client_id, {columns} FROM {VIEW} WHERE {clusters} GROUP BY ALL'

    queries: list[tuple[list[str], str]] = []
    if not counts:
        return {}
    if q is None:
        queries.append((list(counts), grouped(", ".join(f"max({quoted(k)})" for k in counts))))
    else:
        batch: list[Ranks] = []
        for ranks in sorted((Ranks.of(k, n, q) for k, n in counts.items()), key=lambda r: r.held):
            if ranks.held > held:
                queries.append(([ranks.key], grouped(_statistic(quoted(ranks.key), q))))
                continue
            if batch and sum(r.held for r in batch) + ranks.held > held:
                queries.append(([r.key for r in batch], _interpolated(batch, q, grouped)))
                batch = []
            batch.append(ranks)
        if batch:
            queries.append(([r.key for r in batch], _interpolated(batch, q, grouped)))
    stats: dict[Principal, dict[str, float]] = {}
    for keys, sql in queries:
        for cluster, user, client_id, *values in con.execute(sql).fetchall():
            for key, value in zip(keys, values, strict=True):
                if value is not None:
                    stats.setdefault((cluster, user, client_id), {})[key] = value
    return stats


def _interpolated(batch: Sequence[Ranks], q: float, grouped: Callable[[str], str]) -> str:
    """SQL of the ``q`` quantiles of ``batch``'s keys per principal: ``n`` samples, ``pos = q * (n -
    1)``, ``low = floor(pos)``, ``high = min(low + 1, n - 1)``, then ``lo + (hi - lo) * (pos -
    low)``: :func:`~kqplan.fleet.usage.statistic`'s arithmetic, step by step in doubles."""
    def at(i: int, ranks: Ranks, rank: str) -> str:  # the value of a rank (from 0) in the kept list
        return f"kq_t{i}[kq_n{i} - {rank}]" if ranks.side == "max" else f"kq_t{i}[{rank} + 1]"

    keys = list(enumerate(batch))
    kept = ", ".join(f"count({quoted(r.key)}) AS kq_n{i}, {r.side}({quoted(r.key)}, {r.size}) AS kq_t{i}"
                     for i, r in keys)
    pos = ", ".join(f"{_double(q)} * (kq_n{i} - 1) AS kq_pos{i}" for i, _ in keys)
    low = ", ".join(f"floor(kq_pos{i})::BIGINT AS kq_low{i}" for i, _ in keys)
    ends = ", ".join(f"{at(i, r, f'kq_low{i}')} AS kq_lo{i}, "
                     f"{at(i, r, f'least(kq_low{i} + 1, kq_n{i} - 1)')} AS kq_hi{i}" for i, r in keys)
    value = ", ".join(f"kq_lo{i} + (kq_hi{i} - kq_lo{i}) * (kq_pos{i} - kq_low{i})" for i, _ in keys)
    return (f'SELECT cluster, "user", client_id, {value} FROM (SELECT *, {ends} FROM (SELECT *, {low} FROM '
            f"(SELECT *, {pos} FROM ({grouped(kept)}))))")


def _timed_usage(con: duckdb.DuckDBPyConnection, keys: Sequence[str], buckets: Buckets,
                 timed: Sequence[Principal], q: float | None) -> dict[int, float | None]:
    """Bucket number -> its usage, for the buckets of ``timed`` principals: per window, each
    member's mean (``kq_scan``), summed over the bucket's members; then the statistic over the
    windows."""
    import pyarrow as pa

    if not timed or not keys:
        return {}
    slots = [f"b{side}_{i}" for side in SIDES for i in range(len(USAGE_KEYS))]
    con.register("kq_buckets", pa.table({
        "cluster": pa.array([p[0] for p in timed], pa.string()),
        "user": pa.array([p[1] for p in timed], pa.string()),
        "client_id": pa.array([p[2] for p in timed], pa.string()),
        **{slot: pa.array([buckets[p][n] for p in timed], pa.int64()) for n, slot in enumerate(slots)}}))
    sql = f"""
        WITH means AS (
            SELECT * FROM kq_scan WHERE kq_set = {WINDOWS} AND kq_w IS NOT NULL
            AND cluster IN ({", ".join(literal(c) for c in sorted({p[0] for p in timed}))})),
        members AS (
            SELECT kq_w AS w, unnest([{", ".join(slots)}]) AS bucket,
                   unnest([{", ".join(f"kq_m{i}" for _ in SIDES for i in range(len(USAGE_KEYS)))}]) AS mean
            FROM means JOIN kq_buckets USING (cluster, "user", client_id)),
        windows AS (
            SELECT bucket, w, sum(mean) AS total FROM members
            WHERE bucket IS NOT NULL AND mean IS NOT NULL GROUP BY bucket, w)
        SELECT bucket, {_statistic("total", q)} FROM windows GROUP BY bucket"""
    return {int(b): total for b, total in con.execute(sql).fetchall()}


def _rows(principals: Sequence[Principal], *, resolved: Mapping[Principal, tuple[Effective, Effective]],
          buckets: Buckets, labels: Mapping[int, str], stats: Mapping[Principal, Mapping[str, float]],
          totals: Mapping[int, float | None], shown: dict[Entity, str]) -> list[ImpactRow]:
    """The reference's rows (sorted) from the resolution, the buckets (``labels``: their display
    forms) and their usage."""
    n = len(USAGE_KEYS)
    order = sorted(enumerate(USAGE_KEYS), key=lambda k: k[1])
    rows: list[ImpactRow] = []
    for p in principals:  # sorted: the rows come sorted, the keys taken in their names' order
        cluster, user, client_id = p
        for i, key in order:
            (b_value, b_source), (a_value, a_source) = resolved[p][0][i], resolved[p][1][i]
            (b_group, b_usage), (a_group, a_usage) = (
                (labels[number], totals.get(number)) if number is not None else (None, None)
                for number in (buckets[p][i], buckets[p][n + i]))
            utilization = a_usage / a_value if a_usage is not None and a_value else None
            rows.append(ImpactRow(
                cluster, user, client_id, key, stats.get(p, {}).get(key),
                b_value, None if b_source is None else _display(b_source, shown), b_group, b_usage,
                a_value, None if a_source is None else _display(a_source, shown), a_group, a_usage,
                utilization, a_usage is not None and a_value is not None and a_usage > a_value))
    rows.sort(key=lambda r: (r.cluster, r.user, r.client_id, r.key))  # (already so: linear)
    return rows
