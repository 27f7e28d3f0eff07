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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kqplan.core.buckets import bucket_of
from kqplan.core.entity import Entity, EntityKind
from kqplan.core.resolve import QuotaIndex, effective
from kqplan.core.state import QuotaState
from kqplan.fleet.usage import USAGE_KEYS, Sample, Usage, statistic

DEFAULT_WINDOW = 60.0
"""Seconds per window of a bucket's usage (``--window``)."""


@dataclass(frozen=True, slots=True, order=True)
class ImpactRow:
    cluster: str
    user: str
    client_id: str
    key: str
    usage: float | None
    before_value: float | None
    before_source: str | None
    before_group: str | None
    before_group_usage: float | None
    after_value: float | None
    after_source: str | None
    after_group: str | None
    after_group_usage: float | None
    utilization: float | None
    would_throttle: bool

    @property
    def throttled_before(self) -> bool:
        return (self.before_group_usage is not None and self.before_value is not None
                and self.before_group_usage > self.before_value)


IMPACT_COLUMNS = tuple(ImpactRow.__slots__)


@dataclass(frozen=True, slots=True, order=True)
class UnusedRow:
    cluster: str
    entity: str
    key: str


# -- the local engine ------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Impact:
    rows: list[ImpactRow]
    unused: list[UnusedRow]
    untimed: frozenset[str] = frozenset()
    """Clusters with a sample without ``ts``: their buckets' usage is the sum of the members'
    statistics (for ``max`` an upper bound)."""


Principal = tuple[str, str, str]
"""(cluster, user, client_id)."""


def usage_stats(samples: Iterable[Sample], q: float | None) -> dict[Principal, dict[str, float]]:
    """(cluster, user, client_id) -> key -> statistic."""
    grouped: dict[tuple[str, str, str, str], list[float]] = {}
    for s in samples:
        grouped.setdefault((s.cluster, s.user, s.client_id, s.key), []).append(s.value)
    stats: dict[Principal, dict[str, float]] = {}
    for (cluster, user, client_id, key), values in grouped.items():
        stats.setdefault((cluster, user, client_id), {})[key] = statistic(values, q)
    return stats


def window_means(samples: Iterable[Sample], window: float) -> dict[tuple[Principal, str], dict[int, float]]:
    """(principal, key) -> window -> the mean of the principal's samples in it."""
    sums: dict[tuple[Principal, str], dict[int, list[float]]] = {}
    for s in samples:
        assert s.ts is not None
        slot = sums.setdefault(((s.cluster, s.user, s.client_id), s.key), {})
        total = slot.setdefault(math.floor(s.ts / window), [0.0, 0.0])
        total[0] += s.value
        total[1] += 1
    return {member: {w: total / n for w, (total, n) in windows.items()} for member, windows in sums.items()}


def group_usage(members: Sequence[Principal], key: str, q: float | None, *, timed: bool,
                stats: Mapping[Principal, Mapping[str, float]],
                means: Mapping[tuple[Principal, str], Mapping[int, float]]) -> float | None:
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


def group_windows(members: Sequence[Principal], key: str,
                  means: Mapping[tuple[Principal, str], Mapping[int, float]]) -> int:
    """The windows in which a bucket of ``members`` has any sample of ``key``: the count of values
    its usage (the statistic over its windows) rests on."""
    return len({w for member in members for w in means.get((member, key), {})})


def impact_rows(states: Mapping[str, tuple[QuotaState, QuotaState]], usage: Usage | Sequence[Sample],
                q: float | None, *, window: float = DEFAULT_WINDOW) -> Impact:
    """Per observed principal and key: usage, effective quota and bucket before/after with the
    bucket's usage, utilization and whether it would be throttled; plus the quota entries after
    the plan that nobody resolves to."""
    observed = usage if isinstance(usage, Usage) else Usage.of(usage)
    samples = [s for s in observed.samples if s.cluster in states]
    untimed = frozenset(s.cluster for s in samples if s.ts is None)
    stats = usage_stats(samples, q)
    means = window_means((s for s in samples if s.cluster not in untimed), window)
    principals = sorted(p for p in observed.principals if p[0] in states)
    indexes = {c: (QuotaIndex.of(b), QuotaIndex.of(a)) for c, (b, a) in states.items()}
    resolved: dict[Principal, tuple[Sequence[tuple[float | None, Entity | None]], ...]] = {
        p: (effective(indexes[p[0]][0], p[1], p[2]), effective(indexes[p[0]][1], p[1], p[2]))
        for p in principals}
    # each side's buckets: (cluster, key, bucket) -> members
    groups: tuple[dict[tuple[str, str, Entity], list[Principal]], ...] = ({}, {})
    buckets: dict[tuple[Principal, str, int], Entity | None] = {}
    for p, sides in resolved.items():
        for side, found in enumerate(sides):
            for key, (_, source) in zip(USAGE_KEYS, found, strict=True):
                group = bucket_of(source, p[1], p[2])
                buckets[p, key, side] = group
                if group is not None:
                    groups[side].setdefault((p[0], key, group), []).append(p)
    totals = [{g: group_usage(members, g[1], q, timed=g[0] not in untimed, stats=stats, means=means)
               for g, members in side.items()} for side in groups]
    rows: list[ImpactRow] = []
    used: dict[str, set[tuple[Entity, str]]] = {c: set() for c in states}
    for p in principals:
        cluster, user, client_id = p
        for i, key in enumerate(USAGE_KEYS):
            (b_value, b_source), (a_value, a_source) = resolved[p][0][i], resolved[p][1][i]
            if a_source is not None:
                used[cluster].add((a_source, key))
            b_group, a_group = buckets[p, key, 0], buckets[p, key, 1]
            b_usage = totals[0][cluster, key, b_group] if b_group is not None else None
            a_usage = totals[1][cluster, key, a_group] if a_group is not None else None
            utilization = a_usage / a_value if a_usage is not None and a_value else None
            rows.append(ImpactRow(
                cluster, user, client_id, key, stats.get(p, {}).get(key),
                b_value, _shown(b_source), _shown(b_group), b_usage,
                a_value, _shown(a_source), _shown(a_group), a_usage,
                utilization, a_usage is not None and a_value is not None and a_usage > a_value))
    unused = [UnusedRow(cluster, entity.display, key)
              for cluster, (_, after_state) in states.items()
              for entity, quotas in after_state.items() if entity.kind is EntityKind.CLIENT
              for key in quotas if (entity, key) not in used[cluster]]
    return Impact(sorted(rows), sorted(unused), untimed)


def _shown(entity: Entity | None) -> str | None:
    return entity.display if entity is not None else None


def newly_throttled(rows: Iterable[ImpactRow]) -> list[ImpactRow]:
    """Principal-keys whose bucket after the plan is over its quota, and whose bucket before the plan
    was not (or was unlimited)."""
    return [r for r in rows if r.would_throttle and not r.throttled_before]


def relieved(rows: Iterable[ImpactRow]) -> list[ImpactRow]:
    """Principal-keys whose bucket before the plan was over its quota, and whose bucket after the
    plan is not (or is unlimited): what the plan frees."""
    return [r for r in rows if r.throttled_before and not r.would_throttle]


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


def summarize(impact: Impact, clusters: Iterable[str]) -> dict[str, ClusterImpact]:
    """Per cluster: principals observed, buckets newly over their quota (each once, with its
    members' count), unlimited principals, unused entries, whether bucket usage is windowed, and the
    buckets whose members the plan relieves (each once, with the count it relieves)."""
    summary: dict[str, ClusterImpact] = {}
    for cluster in sorted(clusters):
        mine = [r for r in impact.rows if r.cluster == cluster]
        members: dict[tuple[str, str], set[tuple[str, str]]] = {}
        for r in mine:
            if r.after_group is not None:
                members.setdefault((r.after_group, r.key), set()).add((r.user, r.client_id))
        hit = {(r.after_group, r.key): r for r in newly_throttled(mine) if r.after_group is not None}
        freed: dict[tuple[str, str], list[ImpactRow]] = {}
        for r in relieved(mine):
            if r.before_group is not None:
                freed.setdefault((r.before_group, r.key), []).append(r)
        summary[cluster] = ClusterImpact(
            len({(r.user, r.client_id) for r in mine}),
            tuple(Throttled(group, key, len(members[group, key]), r.after_group_usage, r.after_value)
                  for (group, key), r in sorted(hit.items())),
            len({(r.user, r.client_id) for r in mine if r.usage is not None and r.after_value is None}),
            sum(u.cluster == cluster for u in impact.unused),
            cluster not in impact.untimed,
            tuple(Throttled(group, key, len({(r.user, r.client_id) for r in rows}),
                            rows[0].before_group_usage, rows[0].before_value)
                  for (group, key), rows in sorted(freed.items())))
    return summary
