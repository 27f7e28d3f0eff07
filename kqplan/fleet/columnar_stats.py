"""The local engine's exact statistics in DuckDB (:mod:`kqplan.fleet.columnar`): ``max``, or linear
interpolation between the closest ranks (:func:`kqplan.fleet.usage.statistic`, to the bit) from
each group's top (or bottom) values; DuckDB's ``quantile_cont`` where those would be too many,
refused before the work when it cannot fit in the engine's memory."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kqplan.core.errors import KqplanError
from kqplan.fleet.columnar_read import quoted

if TYPE_CHECKING:
    import duckdb


def double(x: float) -> str:
    """``x`` as a DuckDB DOUBLE literal (a plain decimal would be a DECIMAL)."""
    shown = repr(x)
    return shown if "e" in shown else shown + "e0"


def statistic(column: str, q: float | None) -> str:
    """SQL of the statistic of ``column``: max, or DuckDB's exact ``q`` quantile."""
    return f"max({column})" if q is None else f"quantile_cont({column}, {double(q)})"


@dataclass(frozen=True)
class Ranks:
    """What the ``q`` quantile of a key needs of each principal's samples: the ``size`` largest
    (``side`` max, descending) or smallest (min, ascending), ``held`` values in all — counted as
    ``size`` for every principal with a sample: DuckDB's ``max(x, size)`` state is sized for
    ``size`` values whatever the group holds (one principal with half of 10^6 samples made
    20,000 states of 5,000 values each pass 4 GiB; issue 42's skewed shape)."""

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
        groups = sum(1 for n in counts if n)
        held = {side: size * groups for side, size in (("max", top), ("min", bottom))}
        side = min(held, key=held.__getitem__)
        return cls(key, side, top if side == "max" else bottom, held[side])


def statistics(con: duckdb.DuckDBPyConnection, counts: Mapping[str, Sequence[int]], q: float | None,
                grouped: Callable[[str], str], *, group: str, held: int, memory: int,
                what: str) -> dict[tuple[Any, ...], dict[str, float]]:
    """Group -> key -> the statistic over its values, where ``grouped(columns)`` is the SQL of the
    columns ``group`` (SQL, comma-separated) and ``columns`` per group, and ``counts`` each group's
    count of values per key (any order). A quantile is :func:`kqplan.fleet.usage.statistic`'s, to
    the bit, from each group's top (or bottom) values (:class:`Ranks`), every key in one query while
    they are few (p99: a handful per group); a key that would keep more than ``held`` values has DuckDB's
    ``quantile_cont`` in a query of its own (the last bit may differ), which holds every value of
    the key at once: refused before it starts when they would not fit in ``memory`` bytes."""
    queries: list[tuple[list[str], str]] = []
    if not counts:
        return {}
    held = min(held, memory // (4 * VALUE_BYTES))  # top values in a quarter of the memory at most
    if q is None:
        queries.append((list(counts), grouped(", ".join(f"max({quoted(k)})" for k in counts))))
    else:
        batch: list[Ranks] = []
        for ranks in sorted((Ranks.of(k, n, q) for k, n in counts.items()), key=lambda r: r.held):
            if ranks.held > held:
                _fits(sum(counts[ranks.key]), ranks.key, q, memory=memory, what=what)
                queries.append(([ranks.key], grouped(statistic(quoted(ranks.key), q))))
                continue
            if batch and sum(r.held for r in batch) + ranks.held > held:
                queries.append(([r.key for r in batch], _interpolated(batch, q, grouped, group)))
                batch = []
            batch.append(ranks)
        if batch:
            queries.append(([r.key for r in batch], _interpolated(batch, q, grouped, group)))
    stats: dict[tuple[Any, ...], dict[str, float]] = {}
    width = len(group.split(","))
    for keys, sql in queries:
        for row in con.execute(sql).fetchall():
            for key, value in zip(keys, row[width:], strict=True):
                if value is not None:
                    stats.setdefault(row[:width], {})[key] = value
    return stats


VALUE_BYTES = 24
"""What DuckDB's ``quantile_cont`` holds per value, with its list's share (measured: 10^7
doubles in one group took ~230 MB)."""


def _fits(values: int, key: str, q: float, *, memory: int, what: str) -> None:
    """Refuse, before the work, an exact quantile that would hold more than ``memory`` bytes."""
    need = values * VALUE_BYTES
    if need > memory:
        raise KqplanError(
            f"the exact p{_percent(q)} of {key} holds every one of its {values:,} {what} at once "
            f"(~{need / 2**20:,.0f} MiB): more than the local engine's memory ({memory / 2**20:,.0f} MiB)",
            hint="--stat max or a higher percentile (p90, p99) keep a few values per principal; or raise "
                 "[limits] engine-memory-mib in kqplan.toml, give fewer usage files (a shorter time "
                 "range), or use --engine spark")


def _percent(q: float) -> str:
    return f"{q * 100:g}"


def _interpolated(batch: Sequence[Ranks], q: float, grouped: Callable[[str], str], group: str) -> str:
    """SQL of the ``q`` quantiles of ``batch``'s keys per unit: ``n`` samples, ``pos = q * (n -
    1)``, ``low = floor(pos)``, ``high = min(low + 1, n - 1)``, then ``lo + (hi - lo) * (pos -
    low)``: :func:`~kqplan.fleet.usage.statistic`'s arithmetic, step by step in doubles."""
    def at(i: int, ranks: Ranks, rank: str) -> str:  # the value of a rank (from 0) in the kept list
        return f"kq_t{i}[kq_n{i} - {rank}]" if ranks.side == "max" else f"kq_t{i}[{rank} + 1]"

    keys = list(enumerate(batch))
    kept = ", ".join(f"count({quoted(r.key)}) AS kq_n{i}, {r.side}({quoted(r.key)}, {r.size}) AS kq_t{i}"
                     for i, r in keys)
    pos = ", ".join(f"{double(q)} * (kq_n{i} - 1) AS kq_pos{i}" for i, _ in keys)
    low = ", ".join(f"floor(kq_pos{i})::BIGINT AS kq_low{i}" for i, _ in keys)
    ends = ", ".join(f"{at(i, r, f'kq_low{i}')} AS kq_lo{i}, "
                     f"{at(i, r, f'least(kq_low{i} + 1, kq_n{i} - 1)')} AS kq_hi{i}" for i, r in keys)
    value = ", ".join(f"kq_lo{i} + (kq_hi{i} - kq_lo{i}) * (kq_pos{i} - kq_low{i})" for i, _ in keys)
    return (f"SELECT {group}, {value} FROM (SELECT *, {ends} FROM (SELECT *, {low} FROM "
            f"(SELECT *, {pos} FROM ({grouped(kept)}))))")
