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
  per key; each unit's mean per window of ``floor(ts / window)`` (the units numbered: a plain
  GROUP BY of two numbers, which DuckDB spills), summed per bucket and window — the *known* part
  over the units wholly in the bucket, the *most* over those and the split units partly in it —
  and the statistic over a bucket's windows (a bucket of one unit, none split: that unit's means,
  no join).
- Python decides, once per distinct unit, with the reference's own functions: where each unit's
  members fall per key before and after the plan (:func:`kqplan.fleet.impact.placements`, the core's
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
key takes one scan and little memory; :mod:`kqplan.fleet.columnar_stats`). Where that would keep
more than :data:`HELD` values (p50 of large units) the key falls back to DuckDB's exact ``quantile_cont``,
which holds every value and interpolates as ``fma(lo, 1 - d, hi * d)`` where the reference
computes ``lo + (hi - lo) * d``: the same number but for the last bits, as for a bucket's statistic
over its windows. Window means and bucket sums are added in DuckDB's order, not the reference's:
the last bits again (the Spark engine differs alike; tests/fleet compare both so).

DuckDB runs on every core this process may use within :class:`Resources`, spilling to a directory
of its own (10^7 samples of any shape: under 1 GiB for the whole command; benchmarks/README.md).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from kqplan.core.errors import KqplanError
from kqplan.core.state import QuotaState
from kqplan.fleet.columnar_read import VIEW, Sources, literal, quoted, refuse, register_usage
from kqplan.fleet.columnar_stats import double, statistic, statistics
from kqplan.fleet.impact import (
    DEFAULT_WINDOW,
    Impact,
    _rows,
    _unused,
    placements,
)
from kqplan.fleet.members import Group, Members, judged_buckets, memberships, numbered
from kqplan.fleet.resources import Resources
from kqplan.fleet.usage import USAGE_KEYS, Unit

if TYPE_CHECKING:
    import duckdb

_T = TypeVar("_T")

HELD = 4_000_000
"""The most values one statistics query keeps of its units' top (or bottom) samples (~16 bytes
each); a key that needs more gets DuckDB's ``quantile_cont``, which holds all of them."""


UNIT = 'cluster, "user", client_id, bucket'
"""The columns of a unit (:data:`~kqplan.fleet.usage.Unit`) in :data:`~kqplan.fleet.columnar_read.VIEW`."""

def impact_of_files(states: Mapping[str, tuple[QuotaState, QuotaState]], paths: Sequence[Path],
                    q: float | None, *, window: float = DEFAULT_WINDOW,
                    progress: Callable[[str], None] | None = None, held: int = HELD,
                    seen: Callable[[Collection[str]], None] | None = None,
                    resources: Resources | None = None) -> Impact:
    """:func:`kqplan.fleet.impact.impact_rows` of ``read_usage(paths, buckets=True)``, computed on DuckDB;
    ``progress`` hears what it is doing, ``held`` bounds a statistics query (:data:`HELD`), ``seen``
    every cluster the usage names, once the files have passed the checks; DuckDB within
    ``resources`` (default: :meth:`Resources.of`)."""
    report = progress or (lambda _: None)
    limits = resources or Resources.of()
    with local_engine(limits) as con:
        return _impact(con, states, paths, q, window=window, progress=report, held=held, seen=seen,
                       limits=limits)


@contextmanager
def local_engine(limits: Resources) -> Iterator[duckdb.DuckDBPyConnection]:
    """A DuckDB connection within ``limits`` (:func:`_connected`) for the block, whose DuckDB errors
    become the local engine's: out of memory (with the ways out), or files DuckDB cannot read."""
    import duckdb  # a missing one is named with its extra (kqplan[fleet]) by cli.boundary

    with _connected(limits) as con:
        try:
            yield con
        except duckdb.OutOfMemoryException as exc:
            where = ("and spilling" if limits.spill is not None
                     else "with spilling off ([limits] engine-spill)")
            scans = f" ({limits.spilled / 2**20:,.0f} MiB of it for the scans that spill)" \
                if limits.spilled < limits.memory else ""
            raise KqplanError(f"the local engine ran out of its {limits.memory / 2**20:,.0f} MiB of memory"
                              f"{scans} {where}: {_first_line(exc)}",
                              hint="raise [limits] engine-memory-mib in kqplan.toml, give fewer usage files "
                              "(a shorter time range), or use --engine spark") from None
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
def _connected(limits: Resources) -> Iterator[duckdb.DuckDBPyConnection]:
    """An in-memory DuckDB on every core, within ``limits``: spilling to a directory of its own
    under ``limits.spill``, removed afterwards."""
    import duckdb

    with contextlib.ExitStack() as stack:
        # freed memory back to the system between queries (245 -> 78 MiB after a scan of 10M samples)
        config: dict[str, Any] = {"threads": cores(), "memory_limit": f"{limits.memory // 2**20}MiB",
                                  "preserve_insertion_order": False, "allocator_background_threads": True}
        if limits.spill is not None:
            try:
                config["temp_directory"] = stack.enter_context(
                    tempfile.TemporaryDirectory(prefix="kqplan-duckdb-", dir=limits.spill))
            except OSError as exc:
                raise KqplanError(f"the local engine cannot spill to {limits.spill}: {exc.strerror or exc}",
                                  hint="set [limits] engine-spill in kqplan.toml to a writable directory, "
                                       'or to "" to keep the work in memory') from None
        else:
            config["temp_directory"] = ""
        con = duckdb.connect(config=config)
        try:
            yield con
        finally:
            con.close()


def _impact(con: duckdb.DuckDBPyConnection, states: Mapping[str, tuple[QuotaState, QuotaState]],
            paths: Sequence[Path], q: float | None, *, window: float,
            progress: Callable[[str], None], held: int,
            seen: Callable[[Collection[str]], None] | None, limits: Resources) -> Impact:
    progress("Reading the usage with DuckDB")
    memory = limits.memory
    units, untimed, samples, counts = observed(con, paths, states, seen=seen, limits=limits)
    progress(f"Resolving {samples} samples")
    clusters = "cluster IN (" + (", ".join(literal(c) for c in sorted(states)) or "NULL") + ")"
    # DuckDB's statistics while Python resolves the units, its bucket sums while Python finds the
    # unused entries: each pair overlaps on two cores (DuckDB lets go of the GIL while it works)
    with _beside(con, lambda: unit_stats(con, counts, q, clusters, held=held, memory=memory)) as stats_done:
        sides = placements(states, units)
        members = [Members.of(side) for side in sides]
        numbers = numbered(members)
        stats = stats_done.result()
    with _beside(con, lambda: timed_usage(con, set(counts), members, numbers=numbers, untimed=untimed, q=q,
                                           window=window, held=held, limits=limits)) as totals_done:
        unused = _unused(states, sides)
        totals = totals_done.result()
    buckets = [judged_buckets(states, side, found, untimed=untimed, totals=totals, numbers=numbers,
                              stats=stats, q=q) for side, found in enumerate(members)]
    return Impact(_rows(units, sides, buckets, stats), unused, untimed,
                  sorted(b for judged in buckets for b in judged.values()))


@contextmanager
def _within(con: duckdb.DuckDBPyConnection, memory: int, otherwise: int) -> Iterator[None]:
    """DuckDB's memory limit ``memory`` while the block runs, ``otherwise`` after it."""
    if memory == otherwise:
        yield
        return
    con.execute(f"SET memory_limit = '{memory // 2**20}MiB'")
    try:
        yield
    finally:
        con.execute(f"SET memory_limit = '{otherwise // 2**20}MiB'")


@contextmanager
def _beside(con: duckdb.DuckDBPyConnection, work: Callable[[], _T]) -> Iterator[Future[_T]]:
    """``work`` — queries on ``con``, which nothing else uses meanwhile — in a thread of its own
    while the block runs Python. Leaving the block by an error or Ctrl-C interrupts ``work``'s
    queries until it ends (an interrupt reaches only a query running at that moment: ``work`` may
    be between two), so the connection is never closed under it; ``work``'s own error is raised by
    the future's ``result()``."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kqplan-duckdb")
    try:
        future = pool.submit(work)
        try:
            yield future
        except BaseException:
            while not future.done():
                con.interrupt()
                wait([future], timeout=0.05)
            raise
    finally:
        pool.shutdown(wait=True)


def observed(con: duckdb.DuckDBPyConnection, paths: Sequence[Path], states: Mapping[str, object], *,
             seen: Callable[[Collection[str]], None] | None = None, limits: Resources, buckets: bool = True
             ) -> tuple[list[Unit], frozenset[str], int, dict[str, list[int]]]:
    """The usage files as the view :data:`~kqplan.fleet.columnar_read.VIEW`, once they have passed
    the Python reader's checks (``read_usage(paths, buckets=buckets)``'s: quota buckets' rows are
    read, or refused); then the observed units of ``states``' clusters (sorted), those clusters
    with a sample without ``ts``, the count of samples in the files, and per key with any sample
    each unit's count of samples of it, in the order of the units (for :func:`unit_stats`). One
    scan gives all that and each file's first refused row (:func:`_scan`); ``seen`` hears every
    cluster the files name."""
    import duckdb

    sources = register_usage(con, paths, buckets=buckets)
    try:
        scanned, refused = _scan(con, sources, limits)
    except (duckdb.OutOfMemoryException, duckdb.InterruptException):
        raise
    except (duckdb.Error, LookupError):
        # a Parquet file DuckDB cannot read after all (or names otherwise): the Python reader's turn
        sources = register_usage(con, paths, parquet=False, buckets=buckets)
        scanned, refused = _scan(con, sources, limits)
    refuse(sources, refused)
    if seen is not None:
        seen({r[0] for r in scanned})
    keys = [k for k in USAGE_KEYS if k in sources.keys]
    mine = sorted((r for r in scanned if r[0] in states), key=lambda r: tuple(r[:4]))
    return ([(c, u, i, b) for c, u, i, b, *_ in mine], frozenset(r[0] for r in mine if r[4]),
            sum(sum(r[5:]) for r in scanned), {k: [r[5 + n] for r in mine] for n, k in enumerate(keys)})


def _scan(con: duckdb.DuckDBPyConnection, sources: Sources, limits: Resources
          ) -> tuple[list[tuple[Any, ...]], dict[str, int]]:
    """One scan of the usage: per unit whether it has a sample without ``ts`` and its count of
    samples of each key with any; per file DuckDB reads its first refused row. Return the units
    as ``(cluster, user, client_id, bucket, untimed, counts…)`` and the files by DuckDB's name;
    LookupError when DuckDB names a file otherwise. Few groups (a unit, a file): the window means,
    a group per unit and window, are :func:`timed_usage`'s once the units have numbers."""
    rates = [quoted(k) for k in USAGE_KEYS if k in sources.keys]
    any_rate = " OR ".join(f"{r} IS NOT NULL" for r in rates) or "false"
    counted = "".join(f", count({r})" for r in rates)
    with _within(con, limits.spilled, limits.memory):  # a GROUP BY, which DuckDB spills
        rows = con.execute(
            f"SELECT grouping(kq_file) AS kq_set, kq_file, min(kq_row) FILTER (WHERE kq_refused), {UNIT}, "
            f"bool_or(ts IS NULL AND ({any_rate})){counted} FROM {VIEW} "
            f"GROUP BY GROUPING SETS (({UNIT}), (kq_file))").fetchall()
    refused = {r[1]: int(r[2]) for r in rows if r[0] == 0 and r[2] is not None}
    if set(refused) - set(sources.by_duckdb):
        raise LookupError(sorted(set(refused) - set(sources.by_duckdb)))
    return [r[3:] for r in rows if r[0] == 1], refused


def unit_stats(con: duckdb.DuckDBPyConnection, counts: Mapping[str, Sequence[int]], q: float | None,
               clusters: str, *, held: int, memory: int) -> dict[Unit, dict[str, float]]:
    """Unit -> key -> the statistic over its samples, for the units of ``clusters`` (a
    SQL condition): :func:`~kqplan.fleet.columnar_stats.statistics` over the usage, grouped by unit."""
    def grouped(columns: str) -> str:
        return f"SELECT {UNIT}, {columns} FROM {VIEW} WHERE {clusters} GROUP BY ALL"

    found = statistics(con, counts, q, grouped, group=UNIT, held=held, memory=memory, what="samples")
    return {(c, u, i, b): values for (c, u, i, b), values in found.items()}


def _window_means(con: duckdb.DuckDBPyConnection, placed: Sequence[Unit], keys: Sequence[str], *,
                  window: float, limits: Resources) -> None:
    """``kq_means``: each unit of ``placed`` (numbered by its place) as ``uid``, its windows ``w``
    and its mean of each of ``keys`` in each; a plain GROUP BY, which DuckDB spills, within
    :attr:`Resources.spilled`."""
    import pyarrow as pa

    con.register("kq_placed", pa.table({
        "uid": pa.array(range(len(placed)), pa.int32()),
        **{c: pa.array([u[i] for u in placed], pa.string())
           for i, c in enumerate(("cluster", "user", "client_id", "bucket"))}}))
    means = ", ".join(f"avg({quoted(k)}) AS {quoted(k)}" for k in keys)
    with _within(con, limits.spilled, limits.memory):
        con.execute(f"CREATE OR REPLACE TEMP TABLE kq_means AS SELECT uid, "
                    f"floor(ts / {double(window)})::BIGINT AS w, {means} FROM {VIEW} "
                    f"JOIN kq_placed USING ({UNIT}) WHERE NOT kq_refused GROUP BY ALL")
    con.unregister("kq_placed")


def timed_usage(con: duckdb.DuckDBPyConnection, keys: Collection[str], members: Sequence[Members], *,
                numbers: Mapping[tuple[int, Group], int], untimed: Collection[str],
                q: float | None, window: float, held: int, limits: Resources
                ) -> dict[int, tuple[float | None, float | None, int]]:
    """Bucket number -> its usage (known, most) and its windows with a sample of the units wholly
    in it, for the buckets of timed clusters and keys with samples: per window, each unit's mean
    summed over the units wholly in the bucket (known) and over those and the split units partly
    in it (most; only for a bucket with such units); then the statistic over the windows of each.

    The units placed in such buckets get numbers (``kq_units``), and each unit's mean per window
    is one group of two numbers (``kq_means``: plain GROUP BY, which DuckDB spills). A bucket with
    one unit wholly in it and none split (most of them, where principals are many) has that unit's
    window means for its sums: the statistic over them is
    :func:`~kqplan.fleet.columnar_stats.statistics`' per unit, without a join, once for both sides
    of the plan. The other buckets join the means of their units."""
    import pyarrow as pa

    index = {key: i for i, key in enumerate(USAGE_KEYS)}
    placed = memberships(members, numbers=numbers, untimed=untimed, keys=keys)
    single = placed.single
    if not placed.units:
        return {}
    present = [k for k in USAGE_KEYS if k in keys]
    _window_means(con, placed.units, present, window=window, limits=limits)
    totals: dict[int, tuple[float | None, float | None, int]] = {}
    if single:
        wanted = sorted({k for _, k in single}, key=index.__getitem__)
        counted = con.execute("SELECT uid, " + ", ".join(f"count({quoted(k)})" for k in wanted)
                              + " FROM kq_means GROUP BY uid").fetchall()
        counts = {k: [r[1 + n] for r in counted] for n, k in enumerate(wanted)}

        def grouped(columns: str) -> str:
            return f"SELECT uid, {columns} FROM kq_means GROUP BY uid"

        stats = statistics(con, counts, q, grouped, group="uid", held=held, memory=limits.memory,
                            what="window means")
        windows = {k: dict(zip((r[0] for r in counted), n, strict=True)) for k, n in counts.items()}
        for (uid, key), bucket_numbers in single.items():
            found_value = stats.get((uid,), {}).get(key)
            if found_value is not None:
                totals.update((n, (found_value, None, windows[key][uid])) for n in bucket_numbers)
    if placed.rows:
        types = [pa.int32(), pa.int8(), pa.int64(), pa.bool_(), pa.bool_()]
        names = ("uid", "k", "number", "exact", "split")
        con.register("kq_members", pa.table({c: pa.array(v, t) for c, v, t in zip(
            names, zip(*placed.rows, strict=True), types, strict=True)}))
        ranks = ", ".join(str(index[k]) for k in present)
        sql = f"""
            WITH means AS (
                SELECT uid, w, unnest([{ranks}]) AS k,
                       unnest([{", ".join(quoted(k) for k in present)}]) AS mean
                FROM kq_means WHERE uid IN (SELECT uid FROM kq_members)),
            windows AS (
                SELECT number, w, sum(mean) FILTER (WHERE exact) AS known,
                       sum(mean) FILTER (WHERE split) AS most
                FROM means JOIN kq_members USING (uid, k) WHERE mean IS NOT NULL GROUP BY number, w)
            SELECT number, {statistic("known", q)}, {statistic("most", q)}, count(known)
            FROM windows GROUP BY number"""
        totals.update((int(n), (known, most, w)) for n, known, most, w in con.execute(sql).fetchall())
        con.unregister("kq_members")
    con.execute("DROP TABLE kq_means")
    return totals
