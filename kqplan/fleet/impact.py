"""Who a plan would throttle: observed usage against the effective quota before and after.

Usage rows are ``cluster, user, client_id`` and any of the four client keys (observed rates, many
samples per principal, from the brokers' quota metrics). Per principal and key, ``usage`` is a
statistic over its samples — ``max``, or ``pNN`` with linear interpolation between closest ranks
(numpy's default and Spark SQL's exact ``percentile``). Resolution is the core's
(:mod:`kqplan.core.resolve`): the eight levels, and an empty client-id sees only ``{user=U}`` and
``{user=<default>}``. This module is the local engine; :mod:`kqplan.fleet.spark` joins the same
levels and must give the same rows.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kqplan.core.entity import Entity, EntityKind
from kqplan.core.errors import KqplanError
from kqplan.core.quotas import CLIENT_KEYS
from kqplan.core.resolve import QuotaIndex, effective
from kqplan.core.state import QuotaState

USAGE_KEYS: tuple[str, ...] = CLIENT_KEYS
"""producer_byte_rate, consumer_byte_rate, request_percentage, controller_mutation_rate."""


@dataclass(frozen=True, slots=True, order=True)
class Sample:
    cluster: str
    user: str
    client_id: str
    key: str
    value: float


@dataclass(frozen=True, slots=True, order=True)
class ImpactRow:
    cluster: str
    user: str
    client_id: str
    key: str
    usage: float | None
    before_value: float | None
    before_source: str | None
    after_value: float | None
    after_source: str | None
    utilization: float | None
    would_throttle: bool


IMPACT_COLUMNS = tuple(ImpactRow.__slots__)


@dataclass(frozen=True, slots=True, order=True)
class UnusedRow:
    cluster: str
    entity: str
    key: str


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


# -- reading usage ---------------------------------------------------------------------------------

_USAGE_SUFFIXES = (".csv", ".jsonl", ".json", ".parquet")
COLUMNS_HINT = f"columns: cluster, user, client_id and any of {', '.join(USAGE_KEYS)}"


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
        import pyarrow.parquet as pq

        yield from pq.read_table(path).to_pylist()
    elif path.suffix == ".csv":
        with path.open(newline="", encoding="utf-8") as fh:
            yield from csv.DictReader(fh)
    else:
        with path.open(encoding="utf-8") as fh:
            for number, line in enumerate(fh, start=1):
                if line.strip():
                    try:
                        yield json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise KqplanError(f"{path}:{number}: not JSON: {exc.msg}") from None


def read_usage(paths: Sequence[Path]) -> list[Sample]:
    """Samples from CSV, JSON lines or Parquet files (or directories of them)."""
    samples: list[Sample] = []
    for path in usage_files(paths):
        for i, record in enumerate(_records(path), start=1):
            cluster, user = record.get("cluster"), record.get("user")
            if not isinstance(cluster, str) or not cluster or not isinstance(user, str) or not user:
                raise KqplanError(f"{path}: row {i}: cluster and user are required", hint=COLUMNS_HINT)
            client = record.get("client_id")
            client_id = "" if client is None else str(client)  # empty = a client that sends none
            for key in USAGE_KEYS:
                raw = record.get(key)
                if raw is None or raw == "":
                    continue
                try:
                    value = float(raw)  # type: ignore[arg-type]
                except (TypeError, ValueError):
                    raise KqplanError(f"{path}: row {i}: {key} is not a number: {raw!r}") from None
                samples.append(Sample(cluster, user, client_id, key, value))
    return samples


# -- the local engine ------------------------------------------------------------------------------

def usage_stats(samples: Iterable[Sample], q: float | None) -> dict[tuple[str, str, str], dict[str, float]]:
    """(cluster, user, client_id) -> key -> statistic."""
    grouped: dict[tuple[str, str, str, str], list[float]] = {}
    for s in samples:
        grouped.setdefault((s.cluster, s.user, s.client_id, s.key), []).append(s.value)
    stats: dict[tuple[str, str, str], dict[str, float]] = {}
    for (cluster, user, client_id, key), values in grouped.items():
        stats.setdefault((cluster, user, client_id), {})[key] = statistic(values, q)
    return stats


def impact_rows(states: Mapping[str, tuple[QuotaState, QuotaState]], samples: Sequence[Sample],
                q: float | None) -> tuple[list[ImpactRow], list[UnusedRow]]:
    """Per observed principal and key: usage, effective quota before/after, utilization and
    whether it would be throttled; plus the quota entries after the plan that nobody resolves to."""
    stats = usage_stats(samples, q)
    rows: list[ImpactRow] = []
    used: dict[str, set[tuple[Entity, str]]] = {c: set() for c in states}
    indexes = {c: (QuotaIndex.of(b), QuotaIndex.of(a)) for c, (b, a) in states.items()}
    for (cluster, user, client_id), usage in sorted(stats.items()):
        if cluster not in indexes:
            continue  # usage of a cluster that is not planned
        before_index, after_index = indexes[cluster]
        before = effective(before_index, user, client_id)
        after = effective(after_index, user, client_id)
        for key, (b_value, b_source), (a_value, a_source) in zip(USAGE_KEYS, before, after, strict=True):
            if a_source is not None:
                used[cluster].add((a_source, key))
            u = usage.get(key)
            utilization = u / a_value if u is not None and a_value else None
            rows.append(ImpactRow(cluster, user, client_id, key, u, b_value,
                                  b_source.display if b_source else None, a_value,
                                  a_source.display if a_source else None, utilization,
                                  u is not None and a_value is not None and u > a_value))
    unused = [UnusedRow(cluster, entity.display, key)
              for cluster, (_, after_state) in states.items()
              for entity, quotas in after_state.items() if entity.kind is EntityKind.CLIENT
              for key in quotas if (entity, key) not in used[cluster]]
    return sorted(rows), sorted(unused)


def newly_throttled(rows: Iterable[ImpactRow]) -> list[ImpactRow]:
    """Principal-keys that go from not throttled to throttled."""
    return [r for r in rows if r.would_throttle and not (
        r.usage is not None and r.before_value is not None and r.usage > r.before_value)]
