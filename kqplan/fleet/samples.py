"""Observed usage as values: a sample (one rate of one row), what a set of usage rows observed,
and the statistic a principal's or a bucket's usage is (:mod:`kqplan.fleet.usage` reads them)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kqplan.core.errors import KqplanError
from kqplan.fleet.usage_schema import RATES

USAGE_KEYS: tuple[str, ...] = RATES
"""producer_byte_rate, consumer_byte_rate, request_percentage, controller_mutation_rate."""


@dataclass(frozen=True, slots=True)
class Sample:
    cluster: str
    user: str
    client_id: str
    key: str
    value: float
    ts: float | None = None
    """Seconds since the epoch; None: the row had no ``ts``."""
    bucket: str = ""
    """Empty: a principal's own usage; ``user``/``client-id``: a ``{user=U}``/``{client-id=C}``
    quota bucket's, all its members together (``user``/``client_id`` empty for the other)."""

    def sort_key(self) -> tuple[str, str, str, str, str, float, bool, float]:
        return (self.cluster, self.user, self.client_id, self.bucket, self.key, self.value,
                self.ts is not None, self.ts or 0.0)

    @property
    def unit(self) -> Unit:
        return (self.cluster, self.user, self.client_id, self.bucket)


Unit = tuple[str, str, str, str]
"""What one usage row measures: (cluster, user, client_id, bucket), bucket empty for a principal."""


@dataclass(frozen=True, slots=True)
class Usage:
    """What the usage files say: every sample, and every principal they name (a row without any
    rate names one too: it is observed, its usage unknown)."""

    samples: list[Sample] = field(default_factory=list)
    principals: frozenset[tuple[str, str, str]] = frozenset()
    """(cluster, user, client_id), the principals of :attr:`samples` included."""
    buckets: frozenset[Unit] = frozenset()
    """The quota buckets with rows of their own (bucket ``user`` or ``client-id``), theirs included."""

    @property
    def units(self) -> frozenset[Unit]:
        """Every principal and bucket observed, as :attr:`Sample.unit`."""
        return frozenset({(c, u, cl, "") for c, u, cl in self.principals} | self.buckets)

    @classmethod
    def of(cls, samples: Sequence[Sample], principals: Sequence[tuple[str, str, str]] = ()) -> Usage:
        own = {(s.cluster, s.user, s.client_id) for s in samples if not s.bucket}
        buckets = frozenset(s.unit for s in samples if s.bucket)
        return cls(list(samples), frozenset(own | set(principals)), buckets)


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
    return quantile_at(ordered.__getitem__, len(ordered), q)


def closest_ranks(n: int, q: float) -> tuple[float, int, int]:
    """Where the ``q`` quantile of ``n`` values falls: its position ``q * (n - 1)`` and the two
    ranks (from 0, ascending) it lies between."""
    position = q * (n - 1)
    low = math.floor(position)
    return position, low, min(low + 1, n - 1)


def quantile_at(at: Callable[[int], float], n: int, q: float) -> float:
    """The ``q`` quantile of ``n`` values given by ``at(rank)`` (from 0, ascending) — only the two
    closest ranks are asked for, so ``at`` may know only the values around them."""
    position, low, high = closest_ranks(n, q)
    return at(low) + (at(high) - at(low)) * (position - low)
