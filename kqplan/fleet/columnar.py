"""The local engine of ``kqplan fleet impact``, columnar: DuckDB for what grows with the samples,
the core's Python for what Kafka decides.

:func:`impact_of_files` gives the :class:`~kqplan.fleet.impact.Impact` that
:func:`kqplan.fleet.impact.impact_rows` gives over ``read_usage(paths, buckets=True)`` (the
reference, whose docstring defines every column): its rows, unused entries, untimed clusters and
buckets, for principals' rows and quota buckets' rows alike, without holding a Python object per
sample: 10^7 samples are 10^5 observed rows at most.

- DuckDB reads the usage files (:mod:`kqplan.fleet.columnar_read`: Parquet streamed by DuckDB,
  the rest through the Python reader) and computes every aggregate over the samples, in three
  scans: the *units* (a principal, or a measured ``{user=U}``/``{client-id=C}`` bucket:
  :attr:`kqplan.fleet.usage.Sample.unit`), with each file's first refused row, which clusters
  have a sample without ``ts`` and each unit's count of samples per key; each unit's statistic
  per key; each unit's mean per window of ``floor(ts / window)``, joined with the buckets it
  falls in, summed per bucket and window — the *known* part over the units wholly in the bucket,
  the *most* over those and the split units partly in it — and the statistic over a bucket's
  windows.
- Python decides, once per distinct unit, with the reference's own functions: where each unit's
  members fall per key before and after the plan (:func:`kqplan.fleet.impact._sides`, the core's
  resolution and buckets), then each bucket's quota and verdict
  (:func:`~kqplan.fleet.impact.verdict`) and the rows (:func:`kqplan.fleet.impact._rows`, which
  judges a split unit by :func:`~kqplan.fleet.impact.judged`). Each bucket gets a number, and a
  table mapping each (unit, key) to its buckets' numbers with an ``exact`` flag (wholly in it, or a
  split share) goes to DuckDB as Arrow, which the window means are joined with. An untimed
  cluster's buckets (members' statistics summed) are summed in Python, by the reference's
  :func:`~kqplan.fleet.impact.group_usage`.

A unit's statistic is the reference's to the bit: ``max``, or linear interpolation between
the closest ranks (:func:`kqplan.fleet.usage.statistic`) computed in SQL from the few values it
needs, each unit's top (or bottom) samples (``max(x, n)``: for p99 a handful per unit, so every
key takes one scan and little memory; :class:`Ranks`). Where that would keep more than
:data:`HELD` values (p50 of large units) the key falls back to DuckDB's exact ``quantile_cont``,
which holds every value and interpolates as ``fma(lo, 1 - d, hi * d)`` where the reference
computes ``lo + (hi - lo) * d``: the same number but for the last bits, as for a bucket's statistic
over its windows. Window means and bucket sums are added in DuckDB's order, not the reference's:
the last bits again (the Spark engine differs alike; tests/fleet compare both so).

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

from kqplan.core.buckets import bucket_quota, shown
from kqplan.core.entity import Entity
from kqplan.core.errors import KqplanError
from kqplan.core.resolve import QuotaIndex
from kqplan.core.state import QuotaState
from kqplan.fleet.columnar_read import VIEW, Sources, literal, quoted, refuse, register_usage
from kqplan.fleet.impact import (
    DEFAULT_WINDOW,
    BucketRow,
    Impact,
    Side,
    _rows,
    _sides,
    _unused,
    group_usage,
    verdict,
)
from kqplan.fleet.usage import USAGE_KEYS, Unit

if TYPE_CHECKING:
    import duckdb

MEMORY_LIMIT = "512MB"
"""DuckDB's share of the process: with the interpreter, the quota states and the rows, 10^7
samples stay within 1 GiB of RSS (benchmarks/README.md, issue 28)."""

HELD = 4_000_000
"""The most values one statistics query keeps of its units' top (or bottom) samples (~16 bytes
each); a key that needs more gets DuckDB's ``quantile_cont``, which holds all of them."""

SIDES = ("before", "after")
"""The sides of the plan, as :attr:`~kqplan.fleet.impact.BucketRow.side` names them."""

UNIT = 'cluster, "user", client_id, bucket'
"""The columns of a unit (:data:`~kqplan.fleet.usage.Unit`) in :data:`~kqplan.fleet.columnar_read.VIEW`."""

Group = tuple[str, str, Entity]
"""A bucket of one key on one side of the plan: (cluster, key, the bucket's entity)."""


@dataclass(frozen=True, slots=True)
class Members:
    """The observed units in each bucket of one side of the plan, as the reference groups them."""

    whole: dict[Group, list[Unit]]
    """The units whose members all fall in it (in the order of the units)."""
    part: dict[Group, list[Unit]]
    """The split units some of whose members fall in it."""
    quota: dict[Group, tuple[float, Entity]]
    """Its quota and source, as a unit wholly in it resolves them."""

    @classmethod
    def of(cls, side: Side) -> Members:
        whole: dict[Group, list[Unit]] = {}
        part: dict[Group, list[Unit]] = {}
        quota: dict[Group, tuple[float, Entity]] = {}
        for unit, keys in side.items():
            for key, (where, value, origin) in keys.items():
                if len(where) > 1:
                    for group in where:
                        if group is not None:
                            part.setdefault((unit[0], key, group), []).append(unit)
                    continue
                [group] = where
                if group is not None:
                    g = (unit[0], key, group)
                    whole.setdefault(g, []).append(unit)
                    if value is not None and origin is not None:
                        quota[g] = (value, origin)
        return cls(whole, part, quota)


def impact_of_files(states: Mapping[str, tuple[QuotaState, QuotaState]], paths: Sequence[Path],
                    q: float | None, *, window: float = DEFAULT_WINDOW,
                    progress: Callable[[str], None] | None = None, held: int = HELD,
                    seen: Callable[[Collection[str]], None] | None = None) -> Impact:
    """:func:`kqplan.fleet.impact.impact_rows` of ``read_usage(paths, buckets=True)``, computed on DuckDB;
    ``progress`` hears what it is doing, ``held`` bounds a statistics query (:data:`HELD`), ``seen``
    every cluster the usage names, once the files have passed the checks."""
    import duckdb  # a missing one is named with its extra (kqplan[fleet]) by cli.boundary
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
    units, untimed, samples, counts = _observed(con, paths, states, window=window, seen=seen)
    progress(f"Resolving {samples} samples")
    clusters = "cluster IN (" + (", ".join(literal(c) for c in sorted(states)) or "NULL") + ")"
    stats = _stats(con, counts, q, clusters, held=held)
    sides = _sides(states, units)
    members = [Members.of(side) for side in sides]
    numbers: dict[tuple[int, Group], int] = {}  # (side, bucket) -> its number
    for side, found in enumerate(members):
        for g in (*found.whole, *found.part):
            numbers.setdefault((side, g), len(numbers))
    totals = _timed_usage(con, set(counts), members, numbers=numbers, untimed=untimed, q=q)
    buckets = [_judged(states, side, found, untimed=untimed, totals=totals, numbers=numbers, stats=stats, q=q)
               for side, found in enumerate(members)]
    return Impact(_rows(units, sides, buckets, stats), _unused(states, sides), untimed,
                  sorted(b for judged in buckets for b in judged.values()))


def _judged(states: Mapping[str, tuple[QuotaState, QuotaState]], side: int, members: Members, *,
            untimed: Collection[str], totals: Mapping[int, tuple[float | None, float | None]],
            numbers: Mapping[tuple[int, Group], int], stats: Mapping[Unit, Mapping[str, float]],
            q: float | None) -> dict[Group, BucketRow]:
    """The buckets of one side of the plan, as the reference judges them: the known usage (the
    units wholly in the bucket), the most (with the split units partly in it; None: none are),
    the quota and the verdict. A timed cluster's usage is DuckDB's (``totals`` by the bucket's
    number: known, most; none: no samples); an untimed one's the members' statistics summed."""
    indexes: dict[str, QuotaIndex] = {}  # only for a bucket no unit is wholly in: a few
    judged: dict[Group, BucketRow] = {}
    for g in (*members.whole, *members.part):
        if g in judged:
            continue
        cluster, key, group = g
        whole, part = members.whole.get(g, []), members.part.get(g, [])
        if cluster in untimed:
            known = group_usage(whole, key, q, timed=False, stats=stats, means={})
            most = group_usage([*whole, *part], key, q, timed=False, stats=stats, means={}) if part else None
        else:
            known, most = totals.get(numbers[side, g], (None, None))
            most = most if part else None
        hit = members.quota.get(g)
        if hit is None:
            if cluster not in indexes:
                indexes[cluster] = QuotaIndex.of(states[cluster][side])
            hit = bucket_quota(indexes[cluster], group, key)
        assert hit is not None  # a class of a unit falls in it: its quota is set
        value, origin = hit
        judged[g] = BucketRow(cluster, key, SIDES[side], shown(group), value, origin.display, known, most,
                              verdict(value, known, most), len(whole), len(part))
    return judged


def _observed(con: duckdb.DuckDBPyConnection, paths: Sequence[Path], states: Mapping[str, object], *,
              window: float, seen: Callable[[Collection[str]], None] | None = None
              ) -> tuple[list[Unit], frozenset[str], int, dict[str, list[int]]]:
    """The usage files as the view :data:`~kqplan.fleet.columnar_read.VIEW`, once they have passed
    the Python reader's checks (``read_usage(paths, buckets=True)``'s: quota buckets' rows are
    read); then the observed units of ``states``' clusters (sorted), those clusters with a sample
    without ``ts``, the count of samples in the files, and per key with any sample each unit's
    count of samples of it (for :func:`_stats`). One scan gives all that, each file's first refused
    row, and the window means (:func:`_scan`); ``seen`` hears every cluster the files name."""
    import duckdb

    sources = register_usage(con, paths, buckets=True)
    try:
        scanned, refused = _scan(con, sources, window=window)
    except (duckdb.OutOfMemoryException, duckdb.InterruptException):
        raise
    except (duckdb.Error, LookupError):
        # a Parquet file DuckDB cannot read after all (or names otherwise): the Python reader's turn
        sources = register_usage(con, paths, parquet=False, buckets=True)
        scanned, refused = _scan(con, sources, window=window)
    refuse(sources, refused)
    if seen is not None:
        seen({r[0] for r in scanned})
    keys = [k for k in USAGE_KEYS if k in sources.keys]
    mine = [r for r in scanned if r[0] in states]
    return (sorted((c, u, i, b) for c, u, i, b, *_ in mine), frozenset(r[0] for r in mine if r[4]),
            sum(sum(r[5:]) for r in scanned), {k: [r[5 + n] for r in mine] for n, k in enumerate(keys)})


UNITS, FILES, WINDOWS = 3, 1, 2
"""The grouping sets of the table ``kq_scan`` (``kq_set``): per unit, per file, per unit and window."""


def _scan(con: duckdb.DuckDBPyConnection, sources: Sources, *,
          window: float) -> tuple[list[tuple[Any, ...]], dict[str, int]]:
    """One scan of the usage into the table ``kq_scan``: per unit whether it has a sample without
    ``ts`` and its count of samples of each key with any; per file DuckDB reads its first refused
    row; per unit and window of ``floor(ts / window)`` the mean of each key (``kq_m0``… in
    :data:`USAGE_KEYS`' order). Return the first two (units as ``(cluster, user, client_id,
    bucket, untimed, counts…)``, files by DuckDB's name); LookupError when DuckDB names a file
    otherwise."""
    rates = [quoted(k) for k in USAGE_KEYS if k in sources.keys]
    any_rate = " OR ".join(f"{r} IS NOT NULL" for r in rates) or "false"
    counted = "".join(f", count({r}) AS kq_n{i}" for i, r in enumerate(rates))
    means = "".join(f", avg({quoted(k)}) AS kq_m{i}" if k in sources.keys else f", NULL::DOUBLE AS kq_m{i}"
                    for i, k in enumerate(USAGE_KEYS))
    # a refused row has no window: its ts may be no number (refuse() raises before the means are read)
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE kq_scan AS SELECT grouping(kq_file, kq_w) AS kq_set, kq_file, "
        f"min(kq_row) FILTER (WHERE kq_refused) AS kq_first, {UNIT}, kq_w, "
        f"bool_or(ts IS NULL AND ({any_rate})) AS kq_untimed{counted}{means} "
        f"FROM (SELECT *, CASE WHEN kq_refused THEN NULL ELSE floor(ts / {_double(window)})::BIGINT END "
        f"AS kq_w FROM {VIEW}) "
        f"GROUP BY GROUPING SETS (({UNIT}), (kq_file), ({UNIT}, kq_w))")
    rows = con.execute(f"SELECT kq_set, kq_file, kq_first, {UNIT}, kq_untimed"
                       f"{''.join(f', kq_n{i}' for i in range(len(rates)))} FROM kq_scan "
                       f"WHERE kq_set <> {WINDOWS}").fetchall()
    refused = {r[1]: int(r[2]) for r in rows if r[0] == FILES and r[2] is not None}
    if set(refused) - set(sources.by_duckdb):
        raise LookupError(sorted(set(refused) - set(sources.by_duckdb)))
    return [r[3:] for r in rows if r[0] == UNITS], refused


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
           clusters: str, *, held: int) -> dict[Unit, dict[str, float]]:
    """Unit -> key -> the statistic over its samples, for the units of ``clusters`` (a
    SQL condition). A quantile is :func:`kqplan.fleet.usage.statistic`'s, to the bit, from each
    unit's top (or bottom) values (:class:`Ranks`), every key in one query while they are few
    (p99: a handful per unit); a key that would keep more than ``held`` values has DuckDB's
    ``quantile_cont`` in a query of its own (the last bit may differ)."""
    def grouped(columns: str) -> str:
        return f"SELECT {UNIT}, {columns} FROM {VIEW} WHERE {clusters} GROUP BY ALL"

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
    stats: dict[Unit, dict[str, float]] = {}
    for keys, sql in queries:
        for cluster, user, client_id, bucket, *values in con.execute(sql).fetchall():
            for key, value in zip(keys, values, strict=True):
                if value is not None:
                    stats.setdefault((cluster, user, client_id, bucket), {})[key] = value
    return stats


def _interpolated(batch: Sequence[Ranks], q: float, grouped: Callable[[str], str]) -> str:
    """SQL of the ``q`` quantiles of ``batch``'s keys per unit: ``n`` samples, ``pos = q * (n -
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
    return (f"SELECT {UNIT}, {value} FROM (SELECT *, {ends} FROM (SELECT *, {low} FROM "
            f"(SELECT *, {pos} FROM ({grouped(kept)}))))")


def _timed_usage(con: duckdb.DuckDBPyConnection, keys: Collection[str], members: Sequence[Members], *,
                 numbers: Mapping[tuple[int, Group], int], untimed: Collection[str],
                 q: float | None) -> dict[int, tuple[float | None, float | None]]:
    """Bucket number -> its usage (known, most), for the buckets of timed clusters and keys with
    samples: per window, each unit's mean (``kq_scan``) summed over the units wholly in the bucket
    (known) and over those and the split units partly in it (most; only for a bucket with such
    units); then the statistic over the windows of each."""
    import pyarrow as pa

    placed: list[Unit] = []  # a row per unit and bucket: the unit, and the bucket's columns below
    numbered: dict[str, list[Any]] = {"k": [], "number": [], "exact": [], "split": []}
    index = {key: i for i, key in enumerate(USAGE_KEYS)}
    for side, found in enumerate(members):
        for exact, groups in ((True, found.whole), (False, found.part)):
            for g, units in groups.items():
                if g[0] in untimed or g[1] not in keys:
                    continue
                placed += units
                bucket = (index[g[1]], numbers[side, g], exact, g in found.part)
                for column, value in zip(numbered.values(), bucket, strict=True):
                    column.extend([value] * len(units))
    if not placed:
        return {}
    unit_columns = zip(("cluster", "user", "client_id", "bucket"), zip(*placed, strict=True), strict=True)
    columns = {**dict(unit_columns), **numbered}
    types = [pa.string()] * 4 + [pa.int8(), pa.int64(), pa.bool_(), pa.bool_()]
    con.register("kq_members", pa.table({c: pa.array(v, t) for (c, v), t in zip(columns.items(), types,
                                                                                 strict=True)}))
    clusters = ", ".join(literal(c) for c in sorted(set(columns["cluster"])))
    ranks = ", ".join(str(i) for i in range(len(USAGE_KEYS)))
    sql = f"""
        WITH means AS (
            SELECT {UNIT}, kq_w AS w, unnest([{ranks}]) AS k,
                   unnest([{", ".join(f"kq_m{i}" for i in range(len(USAGE_KEYS)))}]) AS mean
            FROM kq_scan WHERE kq_set = {WINDOWS} AND kq_w IS NOT NULL AND cluster IN ({clusters})),
        windows AS (
            SELECT number, w, sum(mean) FILTER (WHERE exact) AS known, sum(mean) FILTER (WHERE split) AS most
            FROM means JOIN kq_members USING ({UNIT}, k) WHERE mean IS NOT NULL GROUP BY number, w)
        SELECT number, {_statistic("known", q)}, {_statistic("most", q)} FROM windows GROUP BY number"""
    totals = {int(n): (known, most) for n, known, most in con.execute(sql).fetchall()}
    con.unregister("kq_members")
    return totals
