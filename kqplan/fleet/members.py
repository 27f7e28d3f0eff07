"""The observed units in each quota bucket, and each bucket judged: the part of
:func:`kqplan.fleet.impact.impact_rows` that grows with the principals, shared by the engines that
compute the aggregates over the samples elsewhere — the local one (:mod:`kqplan.fleet.columnar`,
DuckDB) and the Spark one (:mod:`kqplan.fleet.spark_assembled`). Pure: the core's resolution and
bucket rule, and the reference's verdicts; no I/O.

An engine gives two things: each unit's statistic per key over its samples, and per bucket of a
timed cluster its usage over windows (:data:`Totals`), by the bucket's number
(:func:`numbered`). :func:`memberships` says what that needs: a bucket of one unit wholly in it
and none split (most of them, where principals are many) takes that unit's own statistic over its
window means; the others sum their units' means per window first.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from kqplan.core.buckets import bucket_quota, shown
from kqplan.core.entity import Entity
from kqplan.core.resolve import QuotaIndex
from kqplan.core.state import QuotaState
from kqplan.fleet.impact import BucketRow, Side, group_usage, verdict
from kqplan.fleet.usage import USAGE_KEYS, Unit

SIDES = ("before", "after")
"""The sides of the plan, as :attr:`~kqplan.fleet.impact.BucketRow.side` names them."""

Group = tuple[str, str, Entity]
"""A bucket of one key on one side of the plan: (cluster, key, the bucket's entity)."""

Totals = Mapping[int, Sequence[float | None]]
"""Bucket number -> its usage over windows: known (the units wholly in it) and most (with the
split units partly in it; None without any), then what else an engine keeps (the local one: its
count of windows with a known sample, for ``fleet rightsize``)."""


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


def numbered(members: Sequence[Members]) -> dict[tuple[int, Group], int]:
    """(side, bucket) -> its number, for the buckets of each side."""
    numbers: dict[tuple[int, Group], int] = {}
    for side, found in enumerate(members):
        for g in (*found.whole, *found.part):
            numbers.setdefault((side, g), len(numbers))
    return numbers


@dataclass(frozen=True, slots=True)
class Memberships:
    """What the usage over windows of the buckets of timed clusters needs, the units numbered by
    their place in :attr:`units`."""

    units: list[Unit]
    single: dict[tuple[int, str], list[int]]
    """(unit, key) -> the numbers of the buckets it is alone in (wholly, none split): their usage is
    the unit's own statistic over its window means, and their windows its windows."""
    rows: list[tuple[int, int, int, bool, bool]]
    """The others' members: (unit, the key's place in USAGE_KEYS, the bucket's number, the unit
    wholly in it, the bucket has split units). Per window, a bucket's known usage is the sum of
    its whole units' means, its most the sum of all its units' (when it has split units)."""


def memberships(members: Sequence[Members], *, numbers: Mapping[tuple[int, Group], int],
                untimed: Collection[str], keys: Collection[str]) -> Memberships:
    """The :class:`Memberships` of the buckets of ``members`` in clusters not ``untimed``, for the
    keys with samples (``keys``)."""
    index = {key: i for i, key in enumerate(USAGE_KEYS)}
    uids: dict[Unit, int] = {}
    single: dict[tuple[int, str], list[int]] = {}
    rows: list[tuple[int, int, int, bool, bool]] = []
    for side, found in enumerate(members):
        for exact, groups in ((True, found.whole), (False, found.part)):
            for g, units in groups.items():
                if g[0] in untimed or g[1] not in keys:
                    continue
                number = numbers[side, g]
                if exact and len(units) == 1 and g not in found.part:
                    single.setdefault((uids.setdefault(units[0], len(uids)), g[1]), []).append(number)
                    continue
                rows += [(uids.setdefault(unit, len(uids)), index[g[1]], number, exact, g in found.part)
                         for unit in units]
    return Memberships(list(uids), single, rows)


def judged_buckets(states: Mapping[str, tuple[QuotaState, QuotaState]], side: int, members: Members, *,
                   untimed: Collection[str], totals: Totals, numbers: Mapping[tuple[int, Group], int],
                   stats: Mapping[Unit, Mapping[str, float]], q: float | None) -> dict[Group, BucketRow]:
    """The buckets of one side of the plan, as the reference judges them: the known usage (the
    units wholly in the bucket), the most (with the split units partly in it; None: none are),
    the quota and the verdict. A timed cluster's usage is the engine's (``totals`` by the bucket's
    number; none: no samples); an untimed one's the members' statistics summed."""
    indexes: dict[str, QuotaIndex] = {}  # only for a bucket no unit is wholly in: a few
    judged: dict[Group, BucketRow] = {}
    groups: dict[Entity, str] = {}  # each bucket's shown form and each source's display, once:
    sources: dict[Entity, str] = {}  # a bucket is judged once per key
    for g in (*members.whole, *members.part):
        if g in judged:
            continue
        cluster, key, group = g
        whole, part = members.whole.get(g, []), members.part.get(g, [])
        if cluster in untimed:
            known = group_usage(whole, key, q, timed=False, stats=stats, means={})
            most = group_usage([*whole, *part], key, q, timed=False, stats=stats, means={}) if part else None
        else:
            known, most = totals.get(numbers[side, g], (None, None))[:2]
            most = most if part else None
        hit = members.quota.get(g)
        if hit is None:
            if cluster not in indexes:
                indexes[cluster] = QuotaIndex.of(states[cluster][side])
            hit = bucket_quota(indexes[cluster], group, key)
        assert hit is not None  # a class of a unit falls in it: its quota is set
        value, origin = hit
        if group not in groups:
            groups[group] = shown(group)
        if origin not in sources:
            sources[origin] = origin.display
        judged[g] = BucketRow(cluster, key, SIDES[side], groups[group], value, sources[origin], known, most,
                              verdict(value, known, most), len(whole), len(part))
    return judged
