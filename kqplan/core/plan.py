"""The plan: what apply would change, as data. ``diff`` computes it; renderers live elsewhere,
and the saved-plan file form is :mod:`kqplan.planfile.codec`.

A saved plan (``--out``) records what it was computed against — cluster id and a
fingerprint of the state it saw — and each change's ``before``, so that ``apply --plan``
can refuse a stale plan (terraform's "Saved plan is stale").
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from kqplan.core.cluster import Op
from kqplan.core.diagnostics import Diagnostic
from kqplan.core.entity import Entity
from kqplan.core.metadata import Metadata
from kqplan.core.ownership import Ownership
from kqplan.core.state import Quotas, QuotaState


class Action(StrEnum):
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"

    @property
    def marker(self) -> str:
        return {"create": "+", "update": "~", "delete": "-"}[self.value]


@dataclass(frozen=True, slots=True)
class Change:
    """create: ``before`` is None · delete: ``after`` is None · update: both set and different.

    ``ops`` is the one AlterClientQuotas entry that turns ``before`` into ``after``: sets for
    new or different keys, removals for keys ``after`` lacks, in key order.
    """

    entity: Entity
    action: Action
    before: Quotas | None
    after: Quotas | None
    ops: tuple[Op, ...]
    origin: str | None = None
    """Display only: the manifest (and layer) the desired entry came from; None for deletes."""
    metadata: Metadata | None = None
    """Display only: the entry's ``metadata`` (labels, description); never part of the diff."""
    expires: datetime | None = None
    """Display only: when the first entry behind ``after`` expires (``expires:``)."""
    expired: tuple[str, ...] = ()
    """Display only: why an expiry changes this entity, e.g. ``override expired
    2026-12-01T00:00Z (overlays/prod/q.yaml:5:5)``."""
    expired_at: datetime | None = None
    """When the last of the expiries in ``expired`` happened: a saved plan is applied only by a
    clock that has reached it (:func:`kqplan.commands.apply.check_clock`)."""
    per_cluster: Mapping[str, float] | None = None
    """Display only: the keys of ``after`` written as cluster-wide budgets, their per-cluster values
    (``after`` holds them divided by the cluster's broker count)."""
    display: str = field(init=False, repr=False, compare=False)
    """``entity.display``, made once: a plan sorts by it, and every renderer and the plan file
    show it (20k changes: three calls each were ~0.1 s)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "display", self.entity.display)


@dataclass(frozen=True, slots=True)
class ClusterRef:
    id: str | None
    address: str
    version: str | None = None
    """Display only: the Kafka version (range) detected over the wire, when known."""
    mode: str | None = None
    """Display only: ``kraft`` or ``zookeeper``, when known."""
    brokers: int | None = None
    """The broker count budgets were divided by (the cluster's Metadata, or the inventory's
    ``brokers``), when known."""
    name: str | None = None
    """The inventory name (``[clusters.NAME]``) when the cluster came from the inventory: shown
    first, and where ``apply --plan`` applies a saved plan."""


@dataclass(frozen=True, slots=True)
class Summary:
    add: int
    change: int
    delete: int
    unchanged: int

    @property
    def total(self) -> int:
        return self.add + self.change + self.delete


@dataclass(frozen=True, slots=True)
class Plan:
    changes: tuple[Change, ...]
    """Sorted by the entity's display form: deterministic for review and for tests."""
    unchanged: int
    cluster: ClusterRef
    state_fingerprint: str | None
    """Digest of the whole state the plan was computed from, when recorded (saved and JSON
    plans). Display only: staleness is judged per change from ``before``."""
    notes: tuple[str, ...] = field(default=())
    """Display only: e.g. unlisted entities inside a scope without prune, <default> warnings."""
    unmanaged: tuple[tuple[Entity, Quotas], ...] = field(default=())
    """Cluster entities no manifest lists and no ownership scope covers (sorted): reported, never
    changed. Drift outside the manifests shows here."""
    now: datetime | None = None
    """The clock expiries were judged by (``KQPLAN_NOW`` or the system's); None when no entry has
    ``expires:`` (a plan without one is the same whenever it is made)."""
    valid_until: datetime | None = None
    """When the first entry in effect expires: a saved plan applied from then on is stale."""
    legacy: bool = field(default=False, compare=False)
    """Read from a plan file saved by a kqplan that predates safe rollout: its JSON has none of
    ``now``, ``valid_until``, ``cluster.brokers`` and the changes' rollout fields (its digest is
    checked without them)."""
    breaches: tuple[Diagnostic, ...] = field(default=(), compare=False)
    """Never saved: KQP157 errors (protected principals given a new or lower quota); plan and
    apply refuse the plan with them (:func:`kqplan.pipeline.guarded.guardrail_problem`)."""

    @property
    def uses_budgets(self) -> bool:
        return any(c.per_cluster for c in self.changes)

    @property
    def summary(self) -> Summary:
        counts = {a: 0 for a in Action}
        for c in self.changes:
            counts[c.action] += 1
        return Summary(counts[Action.CREATE], counts[Action.UPDATE], counts[Action.DELETE],
                       self.unchanged)

    @property
    def has_changes(self) -> bool:
        return bool(self.changes)


def same_value(a: float, b: float) -> bool:
    """Kafka compares with ``Objects.equals``: NaN equals NaN there, so it does here."""
    return a == b or (math.isnan(a) and math.isnan(b))


def ops_between(before: Quotas | None, after: Quotas | None) -> tuple[Op, ...]:
    """The ops of one alter entry turning ``before`` into ``after`` (never remove-then-set)."""
    before = before or _EMPTY
    after = after or _EMPTY
    # same_value's fast case inlined (a plan builds these for every change)
    ops = [Op(k, v) for k, v in after.items()
           if k not in before or not ((w := before[k]) == v or same_value(w, v))]
    ops.extend(Op(k, None) for k in before if k not in after)
    ops.sort(key=_op_key)
    return tuple(ops)


_EMPTY: Quotas = {}
_op_key = operator.attrgetter("key")


class _OpsCache:
    """:func:`ops_between` of each pair of quota dicts once: states share one dict among the
    entities with the same quotas (compile and the describe decoder both do), so a plan's
    changes pair a few tiers (20k changes: 2.5 µs each to compute, a lookup to reuse). Keyed
    by identity: each entry holds its two dicts, so no id is reused while it is cached."""

    __slots__ = ("_known",)

    def __init__(self) -> None:
        self._known: dict[tuple[int, int], tuple[Quotas | None, Quotas | None, tuple[Op, ...]]] = {}

    def ops(self, before: Quotas | None, after: Quotas | None) -> tuple[Op, ...]:
        key = (id(before), id(after))
        known = self._known.get(key)
        if known is not None:
            return known[2]
        ops = ops_between(before, after)
        if len(self._known) < _OPS_CACHE_LIMIT:
            self._known[key] = (before, after, ops)
        return ops


_OPS_CACHE_LIMIT = 4096  # pairs kept: states of unique values gain nothing and pay a little


_change_key = operator.attrgetter("display")  # Entity.sort_key, made once per change


def diff(desired: QuotaState, actual: QuotaState, ownership: Ownership, *,
         cluster: ClusterRef, fingerprint: str | None, absent: Collection[Entity] = (),
         origin: Callable[[Entity], str | None] = lambda _: None,
         metadata: Mapping[Entity, Metadata] | None = None, released: Collection[Entity] = ()) -> Plan:
    """Compare desired with actual: listed entities are owned whole; unlisted ones are deleted
    only inside a ``prune`` scope, or when a layer overrode them away (``absent``); the rest are
    reported as unmanaged, but the ``released`` ones, which are not kqplan's any more (neither
    changed nor reported). ``origin`` and ``metadata`` only annotate the changes."""
    metadata = metadata or {}
    changes: list[Change] = []
    unchanged = 0
    found = 0
    lookup = actual.get
    ops_of = _OpsCache().ops
    for entity, want in desired.items():
        have = lookup(entity)
        if have is None:
            changes.append(Change(entity, Action.CREATE, None, want, ops_of(None, want),
                                  origin(entity), metadata.get(entity)))
            continue
        found += 1
        if want == have:  # dict == in C: almost every unchanged entity
            unchanged += 1
            continue
        ops = ops_of(have, want)
        if not ops:  # equal but for NaN, which Kafka holds equal to itself
            unchanged += 1
        else:
            changes.append(Change(entity, Action.UPDATE, have, want, ops, origin(entity),
                                  metadata.get(entity)))
    watched = 0
    unmanaged: list[tuple[Entity, Quotas]] = []
    # every entity on the cluster was found above (the usual plan): no second pass of lookups
    for entity, have in actual.items() if found < len(actual) else ():
        if entity in desired or entity in released:
            continue
        if entity in absent:
            changes.append(Change(entity, Action.DELETE, have, None, ops_between(have, None),
                                  origin(entity), metadata.get(entity)))
        elif ownership.prunes(entity):
            changes.append(Change(entity, Action.DELETE, have, None, ops_between(have, None)))
        elif ownership.watches(entity):
            watched += 1
        else:
            unmanaged.append((entity, have))
    changes.sort(key=_change_key)
    unmanaged.sort(key=lambda item: item[0].sort_key())
    notes: tuple[str, ...] = ()
    if watched:
        notes = (f"{watched} entit{'y' if watched == 1 else 'ies'} inside an ownership scope "
                 "without prune are not in any manifest (left untouched).",)
    return Plan(tuple(changes), unchanged, cluster, fingerprint, notes, tuple(unmanaged))


def apply_ops(state: Mapping[Entity, Quotas], changes: Iterable[Change]) -> dict[Entity, dict[str, float]]:
    """What ``state`` becomes once each change's ops are applied (Kafka's alter semantics)."""
    result = {e: dict(q) for e, q in state.items()}
    for change in changes:
        quotas = result.setdefault(change.entity, {})
        for op in change.ops:
            if op.value is None:
                quotas.pop(op.key, None)
            else:
                quotas[op.key] = op.value
        if not quotas:
            del result[change.entity]
    return result
