"""The local engine of ``kqplan fleet rightsize``, columnar: the rows
:func:`kqplan.fleet.rightsize.proposal_rows` gives over ``read_usage(paths)`` (the reference), with
DuckDB for what grows with the samples and the reference's own functions for what is decided.

- DuckDB computes the aggregates the reference computes over every sample in Python, with the
  local impact engine's queries (:mod:`kqplan.fleet.columnar`): the principals and their counts of
  samples per key, and which clusters have a sample without ``ts`` (one scan, which also finds
  each file's first refused row: a quota bucket's row is refused as the reference refuses it);
  each principal's statistic per key; each bucket's usage — its members' means per window summed,
  then the statistic over the windows — and its windows (a bucket of one principal: that
  principal's window means, without a join).
- Python groups the principals into buckets by the core's resolution
  (:func:`~kqplan.fleet.rightsize.grouped`), sums an untimed cluster's buckets
  (:func:`~kqplan.fleet.impact.group_usage`), and decides and pins as the reference does
  (:func:`~kqplan.fleet.rightsize.decided`, :func:`~kqplan.fleet.rightsize.drafted_rows`).

No Python object per sample: 10^7 samples are at most the observed principal-keys in Python.
A statistic equals the reference's as the impact engine's do (:mod:`kqplan.fleet.columnar`: to
the bit, but for DuckDB's order of adding window means and its ``quantile_cont`` fallback, in
the last bits).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kqplan.core.state import QuotaState
from kqplan.fleet.columnar import HELD, local_engine, observed, timed_usage, unit_stats
from kqplan.fleet.columnar_read import literal
from kqplan.fleet.impact import DEFAULT_WINDOW, group_usage
from kqplan.fleet.members import Members
from kqplan.fleet.resources import Resources
from kqplan.fleet.rightsize import (
    Draft,
    Group,
    Principal,
    ProposalRow,
    Rules,
    decided,
    drafted_rows,
    grouped,
)
from kqplan.fleet.samples import Unit

if TYPE_CHECKING:
    import duckdb


def proposals_of_files(states: Mapping[str, QuotaState], paths: Sequence[Path], rules: Rules, *,
                       window: float = DEFAULT_WINDOW, progress: Callable[[str], None] | None = None,
                       seen: Callable[[Collection[str]], None] | None = None,
                       resources: Resources | None = None, held: int = HELD) -> list[ProposalRow]:
    """:func:`kqplan.fleet.rightsize.proposal_rows` of ``read_usage(paths)``, computed on DuckDB;
    ``progress`` hears what it is doing, ``seen`` every cluster the usage names once the files
    have passed the checks, ``held`` bounds a statistics query (:data:`~kqplan.fleet.columnar.HELD`);
    DuckDB within ``resources`` (default: :meth:`Resources.of`)."""
    report = progress or (lambda _: None)
    limits = resources or Resources.of()
    with local_engine(limits) as con:
        drafts = _drafts(con, states, paths, rules, window=window, progress=report, seen=seen,
                         limits=limits, held=held)
    return drafted_rows(states, drafts)


def _drafts(con: duckdb.DuckDBPyConnection, states: Mapping[str, QuotaState], paths: Sequence[Path],
            rules: Rules, *, window: float, progress: Callable[[str], None],
            seen: Callable[[Collection[str]], None] | None, limits: Resources, held: int) -> list[Draft]:
    """The reference's drafts (:func:`kqplan.fleet.rightsize._drafts`) from DuckDB's aggregates."""
    progress("Reading the usage with DuckDB")
    units, untimed, samples, counts = observed(con, paths, states, seen=seen, limits=limits, buckets=False)
    progress(f"Proposing from {samples} samples")
    clusters = "cluster IN (" + (", ".join(literal(c) for c in sorted(states)) or "NULL") + ")"
    stats: dict[Principal, dict[str, float]] = {
        (c, u, i): values
        for (c, u, i, _), values in unit_stats(con, counts, rules.q, clusters, held=held,
                                               memory=limits.memory).items()}
    found, members = grouped(states, stats)
    numbers = {(0, g): n for n, g in enumerate(members)}
    whole: dict[Group, list[Unit]] = {g: [(c, u, i, "") for c, u, i in m] for g, m in members.items()}
    timed = timed_usage(con, set(counts), [Members(whole, {}, {})], numbers=numbers, untimed=untimed,
                        q=rules.q, window=window, held=held, limits=limits)
    samples_of = {((c, u, i), key): n[at] for key, n in counts.items()
                  for at, (c, u, i, _) in enumerate(units)}
    totals: dict[Group, tuple[float, int, int | None]] = {}
    for g, m in members.items():
        evidence = sum(samples_of[p, g[1]] for p in m)
        if g[0] in untimed:
            total = group_usage(m, g[1], rules.q, timed=False, stats=stats, means={})
            windows = None
        else:
            total, _, windows = timed[numbers[0, g]]
        assert total is not None  # its members have samples of the key
        totals[g] = (total, evidence, windows)
    return decided(found, totals, rules)
