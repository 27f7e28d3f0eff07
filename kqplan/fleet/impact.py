"""Who a plan would throttle: observed usage against the quotas before and after it, per bucket.

Kafka enforces a quota on a *bucket* of connections (:mod:`kqplan.core.buckets`): all of U's
clients share a ``{user=U}`` quota, all users of client-id C a ``{client-id=C}`` one. So a
principal is throttled when its bucket's usage passes the quota, whatever its own usage. Per
observed principal and key, before and after the plan:

- ``usage``: the principal's own statistic over its samples (``max``, or ``pNN`` with linear
  interpolation between closest ranks: numpy's default and Spark SQL's exact ``percentile``);
- the effective quota and its source, as ``kqplan resolve`` gives them (the core's resolution);
- the bucket (its metric tags in display form; null when unlimited) and the bucket's usage: the
  samples in windows of ``window`` seconds (``ts // window``), each member's mean rate per window,
  summed over the bucket's observed members, then the statistic over the bucket's windows. A
  cluster with a sample without ``ts`` cannot be windowed: each member's statistic is summed
  instead, an upper bound for ``max`` (:attr:`Impact.untimed` names such clusters).

``utilization`` is the bucket's usage after the plan over the quota after it, and
``would_throttle`` whether it passes it. This module is the local engine, the core's Python;
:mod:`kqplan.fleet.spark` computes the same rows with joins and must agree (tests/fleet).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kqplan.core.buckets import bucket, bucket_quota, classes, destinations, members, shown
from kqplan.core.entity import CLIENT_ID, USER, Entity, EntityKind
from kqplan.core.resolve import Effective, Level, QuotaIndex, effective, level_of
from kqplan.core.state import QuotaState
from kqplan.fleet.samples import USAGE_KEYS, Sample, Unit, Usage, statistic
from kqplan.fleet.usage_schema import CLIENT_BUCKET, USER_BUCKET

DEFAULT_WINDOW = 60.0
"""Seconds per window of a bucket's usage (``--window``)."""


class ImpactRow(NamedTuple):
    """One observed principal (or measured bucket) and key, before and after the plan.

    The three row types of the impact tables are named tuples, not frozen dataclasses: the local
    engine makes one per principal and key (240,000 for 60,000 principals), and a frozen
    dataclass's ``__init__`` (a ``object.__setattr__`` per field) took 8 times as long to make
    them, its ``order`` comparisons in Python as long again to sort them (benchmarks/README.md,
    issue 42). Immutable, typed, ordered field by field, as before."""

    cluster: str
    user: str
    client_id: str
    bucket: str
    """Empty: a principal's row; ``user``/``client-id``: a measured ``{user=U}``/``{client-id=C}``
    bucket's row (:attr:`kqplan.fleet.usage.Sample.bucket`)."""
    key: str
    usage: float | None
    before_value: float | None
    before_source: str | None
    before_group: str | None
    before_group_usage: float | None
    before_group_usage_max: float | None
    before_split: bool
    after_value: float | None
    after_source: str | None
    after_group: str | None
    after_group_usage: float | None
    after_group_usage_max: float | None
    after_split: bool
    utilization: float | None
    throttled_before: bool | None
    would_throttle: bool | None
    """True: the bucket's usage passes its quota; False: it does not (or no quota); None: split
    unknown (the bucket holds an unknown share of a split bucket's usage, and whether the quota is
    passed depends on it; or this row's members fall in several buckets not all judged alike)."""


IMPACT_COLUMNS = ImpactRow._fields


class UnusedRow(NamedTuple):
    """A quota entry after the plan that no observed row resolves to."""

    cluster: str
    entity: str
    key: str


# -- the local engine ------------------------------------------------------------------------------

class BucketRow(NamedTuple):
    """One bucket on one side of the plan, with every observed row that falls in it."""

    cluster: str
    key: str
    side: str
    """``before`` or ``after``."""
    bucket: str
    value: float
    source: str
    usage: float | None
    """Its members' usage that is known: the rows whose members all fall in it."""
    usage_max: float | None
    """With the whole usage of split rows some of whose members fall in it (None: none do)."""
    throttled: bool | None
    members: int
    """Rows wholly in it."""
    shares: int
    """Split rows partly in it."""


@dataclass(frozen=True, slots=True)
class Impact:
    rows: list[ImpactRow]
    unused: list[UnusedRow]
    untimed: frozenset[str] = frozenset()
    """Clusters with a sample without ``ts``: their buckets' usage is the sum of the members'
    statistics (for ``max`` an upper bound)."""
    buckets: list[BucketRow] = field(default_factory=list)
    """Every bucket some observed row falls in, before and after the plan (the unlimited none)."""


Principal = tuple[str, str, str]
"""(cluster, user, client_id)."""


def usage_stats(samples: Iterable[Sample], q: float | None, *,
                units: bool = False) -> dict[Any, dict[str, float]]:
    """(cluster, user, client_id) -> key -> statistic; ``units``: keyed by :attr:`Sample.unit`."""
    grouped: dict[tuple[Any, str], list[float]] = {}
    for s in samples:
        grouped.setdefault((s.unit if units else (s.cluster, s.user, s.client_id), s.key), []).append(s.value)
    stats: dict[Any, dict[str, float]] = {}
    for (of, key), values in grouped.items():
        stats.setdefault(of, {})[key] = statistic(values, q)
    return stats


def window_means(samples: Iterable[Sample], window: float, *,
                 units: bool = False) -> dict[tuple[Any, str], dict[int, float]]:
    """(principal, key) -> window -> the mean of the principal's samples in it; ``units``: keyed
    by :attr:`Sample.unit`."""
    sums: dict[tuple[Any, str], dict[int, list[float]]] = {}
    for s in samples:
        assert s.ts is not None
        slot = sums.setdefault((s.unit if units else (s.cluster, s.user, s.client_id), s.key), {})
        total = slot.setdefault(math.floor(s.ts / window), [0.0, 0.0])
        total[0] += s.value
        total[1] += 1
    return {member: {w: total / n for w, (total, n) in windows.items()} for member, windows in sums.items()}


def group_usage(members: Sequence[Any], key: str, q: float | None, *, timed: bool,
                stats: Mapping[Any, Mapping[str, float]],
                means: Mapping[tuple[Any, str], Mapping[int, float]]) -> float | None:
    """The usage of a bucket of ``members`` for ``key``: the statistic over its windows of the
    members' window means summed, or (``timed`` false) the members' statistics summed; None when
    no member has a sample of the key."""
    if not timed:
        own = [stats[m][key] for m in members if key in stats.get(m, {})]
        return sum(own) if own else None
    windows: dict[int, float] = {}
    for member in members:
        for w, mean in means.get((member, key), {}).items():
            windows[w] = windows.get(w, 0.0) + mean
    return statistic(list(windows.values()), q) if windows else None


def group_windows(members: Sequence[Any], key: str,
                  means: Mapping[tuple[Any, str], Mapping[int, float]]) -> int:
    """The windows in which a bucket of ``members`` has any sample of ``key``: the count of values
    its usage (the statistic over its windows) rests on."""
    return len({w for member in members for w in means.get((member, key), {})})


def verdict(value: float | None, usage: float | None, usage_max: float | None) -> bool | None:
    """Whether a bucket passes its quota ``value`` (None: unlimited, never) given its known usage
    and, with split rows' shares in it, the most it may be: True when the known usage passes it,
    False when the most does not, None (split unknown) between."""
    if value is None or (usage is None and usage_max is None):
        return False
    if usage is not None and usage > value:
        return True
    return None if usage_max is not None and usage_max > value else False


def judged(verdicts: Iterable[bool | None]) -> bool | None:
    """A split row's verdict from its buckets': True or False when all agree, else None."""
    found = set(verdicts)
    return found.pop() if len(found) == 1 else None


Side = dict[Unit, dict[str, tuple[frozenset[Entity | None], float | None, Entity | None]]]
_UNLIMITED: frozenset[Entity | None] = frozenset((None,))
"""unit -> key -> (the buckets its members fall in, and when one: its quota and source)."""


def placements(states: Mapping[str, tuple[QuotaState, QuotaState]], units: Sequence[Unit]
               ) -> tuple[Side, Side]:
    """Where each observed unit's members fall, per key, before and after the plan: a principal in
    its bucket; a measured bucket's members (:func:`kqplan.core.buckets.classes` of every name of
    the cluster's states and usage, those Kafka counted in it before the plan) in one bucket or
    several (split)."""
    indexes = {c: (QuotaIndex.of(b), QuotaIndex.of(a)) for c, (b, a) in states.items()}
    names = _names(states, units) if any(kind for *_, kind in units) else {}
    cache: dict[tuple[str, int, str, str], Effective] = {}

    def found(cluster: str, side: int, user: str, client_id: str) -> Effective:
        hit = cache.get((cluster, side, user, client_id))
        if hit is None:
            hit = cache[cluster, side, user, client_id] = effective(indexes[cluster][side], user, client_id)
        return hit

    def lookup(cluster: str, side: int, i: int) -> Callable[[str, str], Entity | None]:
        """The entity that supplies key ``i`` of a connection (user, client_id) on ``side``."""
        return lambda user, client_id: found(cluster, side, user, client_id)[i][1]

    sides: tuple[Side, Side] = ({}, {})
    levels: dict[Entity, Level | None] = {}
    moved = {c: before.moved(after) for c, (before, after) in indexes.items()}
    for unit in units:
        cluster, user, client_id, kind = unit
        if not kind:  # a principal: its one class is itself (the fast path of the loop below)
            was, now = indexes[cluster]
            keys = sides[0][unit] = _principal(effective(was, user, client_id), user, client_id, levels)
            # resolved again after the plan only where the plan moved an entry it looks up
            sides[1][unit] = (_principal(effective(now, user, client_id), user, client_id, levels)
                              if moved[cluster](user, client_id) else keys)
            continue
        measured = measured_bucket(user, client_id, kind)
        candidates = classes(measured, *names[cluster])
        for i, key in enumerate(USAGE_KEYS):
            inside = members(measured, candidates, lookup(cluster, 0, i))
            for side in (0, 1):
                where = destinations(measured, inside, lookup(cluster, side, i))
                value, origin = found(cluster, side, *inside[0])[i] if len(where) == 1 else (None, None)
                sides[side].setdefault(unit, {})[key] = (where, value, origin)
    return sides


def _names(states: Mapping[str, tuple[QuotaState, QuotaState]], units: Sequence[Unit]
           ) -> dict[str, tuple[set[str], set[str]]]:
    """Per cluster, every user and client-id its states and usage name (a measured bucket's
    members are found among them)."""
    names: dict[str, tuple[set[str], set[str]]] = {}
    for cluster, (before, after) in states.items():
        users, client_ids = names.setdefault(cluster, (set(), set()))
        for entity in (*before, *after):
            if (user := entity.get(USER)) is not None:
                users.add(user)
            if (client_id := entity.get(CLIENT_ID)) is not None:
                client_ids.add(client_id)
    for cluster, user, client_id, kind in units:
        if kind != CLIENT_BUCKET:
            names[cluster][0].add(user)
        if kind != USER_BUCKET:
            names[cluster][1].add(client_id)
    return names


def _principal(found: Effective, user: str, client_id: str, levels: dict[Entity, Level | None]
               ) -> dict[str, tuple[frozenset[Entity | None], float | None, Entity | None]]:
    """A principal's bucket per key (``levels``: each source's level, cached; keys whose sources
    share a level share its bucket, made once)."""
    keys: dict[str, tuple[frozenset[Entity | None], float | None, Entity | None]] = {}
    made: dict[Level, frozenset[Entity | None]] = {}
    for key, (value, origin) in zip(USAGE_KEYS, found, strict=True):
        if origin is None:
            keys[key] = (_UNLIMITED, None, None)
            continue
        level = levels[origin] if origin in levels else levels.setdefault(origin, level_of(origin))
        assert level is not None
        where = made.get(level)
        if where is None:
            where = made[level] = frozenset((bucket(level, user, client_id),))
        keys[key] = (where, value, origin)
    return keys


def measured_bucket(user: str, client_id: str, kind: str) -> Entity:
    """The bucket a usage row measured (``kind``: :attr:`~kqplan.fleet.samples.Sample.bucket`): a
    principal's is its pair's."""
    if kind == USER_BUCKET:
        return Entity.user(user)
    if kind == CLIENT_BUCKET:
        return Entity.client(client_id)
    return Entity.user_client(user, client_id)


def impact_rows(states: Mapping[str, tuple[QuotaState, QuotaState]], usage: Usage | Sequence[Sample],
                q: float | None, *, window: float = DEFAULT_WINDOW) -> Impact:
    """Per observed principal (or measured bucket) and key: usage, effective quota and bucket
    before/after with the bucket's usage, utilization and whether it would be throttled; every
    bucket so reached; plus the quota entries after the plan that nobody resolves to."""
    observed = usage if isinstance(usage, Usage) else Usage.of(usage)
    samples = [s for s in observed.samples if s.cluster in states]
    untimed = frozenset(s.cluster for s in samples if s.ts is None)
    stats = usage_stats(samples, q, units=True)
    means = window_means((s for s in samples if s.cluster not in untimed), window, units=True)
    units = sorted(u for u in observed.units if u[0] in states)
    sides = placements(states, units)
    indexes = ({c: QuotaIndex.of(b) for c, (b, _) in states.items()},
               {c: QuotaIndex.of(a) for c, (_, a) in states.items()})
    judged_buckets: list[dict[tuple[str, str, Entity], BucketRow]] = []
    for name, side in zip(("before", "after"), sides, strict=True):
        whole: dict[tuple[str, str, Entity], list[Unit]] = {}
        part: dict[tuple[str, str, Entity], list[Unit]] = {}
        quota: dict[tuple[str, str, Entity], tuple[float, Entity]] = {}
        for unit, keys in side.items():
            for key, (where, value, origin) in keys.items():
                for group in where:
                    if group is None:
                        continue
                    g = (unit[0], key, group)
                    (whole if len(where) == 1 else part).setdefault(g, []).append(unit)
                    if len(where) == 1 and value is not None and origin is not None:
                        quota[g] = (value, origin)
        rows: dict[tuple[str, str, Entity], BucketRow] = {}
        for g in sorted({*whole, *part}, key=lambda g: (g[0], g[1], g[2].sort_key())):
            cluster, key, group = g
            timed = cluster not in untimed
            known = group_usage(whole.get(g, []), key, q, timed=timed, stats=stats, means=means)
            most = (group_usage([*whole.get(g, []), *part[g]], key, q, timed=timed, stats=stats, means=means)
                    if g in part else None)
            hit = quota.get(g) or bucket_quota(indexes[name == "after"][cluster], group, key)
            assert hit is not None  # a class of a row falls in it: its quota is set
            value, origin = hit
            rows[g] = BucketRow(cluster, key, name, shown(group), value, origin.display, known, most,
                                verdict(value, known, most), len(whole.get(g, [])), len(part.get(g, [])))
        judged_buckets.append(rows)
    return Impact(_rows(units, sides, judged_buckets, stats), _unused(states, sides), untimed,
                  sorted(b for side in judged_buckets for b in side.values()))


def _rows(units: Sequence[Unit], sides: tuple[Side, Side],
          buckets: Sequence[Mapping[tuple[str, str, Entity], BucketRow]],
          stats: Mapping[Any, Mapping[str, float]]) -> list[ImpactRow]:
    rows: list[ImpactRow] = []
    displays: dict[Entity, str] = {}

    def _shown(entity: Entity | None) -> str | None:  # each entity's display once (cached)
        if entity is None:
            return None
        text = displays.get(entity)
        if text is None:
            text = displays[entity] = shown(entity)
        return text

    # made in their order (cluster, user, client_id, bucket, key): no sort of the rows after
    for unit in sorted(units):
        cluster, user, client_id, kind = unit
        for key in _SORTED_KEYS:
            shown_sides: list[tuple[Any, ...]] = []
            for side, judged_side in zip(sides, buckets, strict=True):
                where, value, origin = side[unit][key]
                if len(where) > 1:
                    judged_many = judged(judged_side[cluster, key, g].throttled if g is not None else False
                                         for g in where)
                    shown_sides.append((None, None, None, None, None, True, judged_many))
                    continue
                group = next(iter(where))
                hit = judged_side[cluster, key, group] if group is not None else None
                shown_sides.append((value, _shown(origin), _shown(group), hit and hit.usage,
                                    hit and hit.usage_max, False, hit.throttled if hit else False))
            (bv, bs, bg, bu, bm, bsplit, bt), (av, as_, ag, au, am, asplit, at) = shown_sides
            utilization = au / av if au is not None and av else None
            rows.append(ImpactRow(cluster, user, client_id, kind, key, stats.get(unit, {}).get(key),
                                  bv, bs, bg, bu, bm, bsplit, av, as_, ag, au, am, asplit,
                                  utilization, bt, at))
    return rows


_SORTED_KEYS = tuple(sorted(USAGE_KEYS))


def _unused(states: Mapping[str, tuple[QuotaState, QuotaState]], sides: tuple[Side, Side]) -> list[UnusedRow]:
    """The quota entries after the plan that no observed row's members resolve to."""
    used: dict[str, dict[Entity, set[str]]] = {c: {} for c in states}  # each entry's keys someone resolves to
    for unit, keys in sides[1].items():
        of = used[unit[0]]
        for key, (_, _, origin) in keys.items():
            if origin is not None:
                of.setdefault(origin, set()).add(key)
    none: set[str] = set()
    displays: dict[Entity, str] = {}  # clusters share entities: each one's display made once
    found = [UnusedRow(cluster, displays.get(entity) or displays.setdefault(entity, entity.display), key)
             for cluster, (_, after_state) in states.items()
             for entity, quotas in after_state.items()
             # every key used (the used ones are among its own): not an entity's to list
             if len(quotas) > len(taken := used[cluster].get(entity, none))
             and entity.kind is EntityKind.CLIENT
             for key in quotas if key not in taken]
    found.sort()  # a named tuple of (cluster, entity, key), all text: ordered field by field
    return found


def _shown(entity: Entity | None) -> str | None:
    return shown(entity) if entity is not None else None


def newly_throttled(rows: Iterable[ImpactRow]) -> list[ImpactRow]:
    """Principal-keys whose bucket after the plan is over its quota, and whose bucket before the plan
    was not (or was unlimited)."""
    return [r for r in rows if r.would_throttle is True and r.throttled_before is False]


def relieved(rows: Iterable[ImpactRow]) -> list[ImpactRow]:
    """Principal-keys whose bucket before the plan was over its quota, and whose bucket after the
    plan is not (or is unlimited): what the plan frees."""
    return [r for r in rows if r.throttled_before is True and r.would_throttle is False]


# -- the summary ------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, order=True)
class Throttled:
    """A bucket that newly throttles its members (listed once, whatever their number), or one
    whose members the plan relieves."""

    bucket: str
    key: str
    members: int
    """Newly throttled: the bucket's observed principals after the plan (all throttled together).
    Relieved: its observed principals before the plan that are throttled no more."""
    usage: float | None
    quota: float | None
    """The bucket's usage and quota: after the plan (newly throttled), before it (relieved)."""
    usage_max: float | None = None
    """Split unknown: the most its usage may be (:attr:`usage` the part known, None: none)."""


@dataclass(frozen=True, slots=True)
class ClusterImpact:
    """One cluster's summary line."""

    principals: int
    newly_throttled: tuple[Throttled, ...]
    unlimited: int
    """Observed principals with usage of a key that no quota limits after the plan."""
    unused_entries: int
    windowed: bool
    """False: some sample had no ts, so each bucket's usage is its members' statistics summed."""
    relieved: tuple[Throttled, ...] = ()
    """Buckets before the plan over their quota whose members (some or all) it relieves."""
    unknown: tuple[Throttled, ...] = ()
    """Buckets after the plan that hold an unknown share of a split bucket's usage, and that pass
    their quota or not depending on it ("split unknown"): never counted as throttled or not."""


def summarize(impact: Impact, clusters: Iterable[str]) -> dict[str, ClusterImpact]:
    """Per cluster: rows observed, buckets newly over their quota (each once, with its members'
    count), unlimited rows, unused entries, whether bucket usage is windowed, the buckets whose
    members the plan relieves (each once, with the count it relieves), and the buckets after the
    plan whose passing their quota is split unknown."""
    summary: dict[str, ClusterImpact] = {}
    wanted = sorted(clusters)
    rows: dict[str, list[ImpactRow]] = {c: [] for c in wanted}  # each table read once, not per cluster
    unused: dict[str, int] = dict.fromkeys(wanted, 0)
    unknown: dict[str, list[BucketRow]] = {c: [] for c in wanted}
    for r in impact.rows:
        if r.cluster in rows:
            rows[r.cluster].append(r)
    for u in impact.unused:
        if u.cluster in unused:
            unused[u.cluster] += 1
    for b in impact.buckets:
        if b.cluster in unknown and b.side == "after" and b.throttled is None:
            unknown[b.cluster].append(b)
    for cluster in wanted:
        mine = rows[cluster]
        members: dict[tuple[str, str], set[tuple[str, str, str]]] = {}
        for r in mine:
            if r.after_group is not None:
                members.setdefault((r.after_group, r.key), set()).add((r.user, r.client_id, r.bucket))
        hit = {(r.after_group, r.key): r for r in newly_throttled(mine) if r.after_group is not None}
        freed: dict[tuple[str, str], list[ImpactRow]] = {}
        for r in relieved(mine):
            if r.before_group is not None:
                freed.setdefault((r.before_group, r.key), []).append(r)
        summary[cluster] = ClusterImpact(
            len({(r.user, r.client_id, r.bucket) for r in mine}),
            tuple(Throttled(group, key, len(members[group, key]), r.after_group_usage, r.after_value)
                  for (group, key), r in sorted(hit.items())),
            len({(r.user, r.client_id, r.bucket) for r in mine
                 if r.usage is not None and r.after_value is None and not r.after_split}),
            unused[cluster],
            cluster not in impact.untimed,
            tuple(Throttled(group, key, len({(r.user, r.client_id, r.bucket) for r in those}),
                            those[0].before_group_usage, those[0].before_value)
                  for (group, key), those in sorted(freed.items())),
            tuple(Throttled(b.bucket, b.key, b.members + b.shares, b.usage, b.value, b.usage_max)
                  for b in unknown[cluster]))
    return summary
