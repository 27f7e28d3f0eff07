"""The plan: what apply would change, as data. ``diff`` computes it; renderers live elsewhere.

A saved plan (``--out``) records what it was computed against — cluster id and a
fingerprint of the state it saw — and each change's ``before``, so that ``apply --plan``
can refuse a stale plan (terraform's "Saved plan is stale").
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from kqplan.cluster.base import Op
from kqplan.entity import Entity, Name
from kqplan.errors import KqplanError
from kqplan.ownership import Ownership
from kqplan.state import Quotas, QuotaState

PLAN_FORMAT_VERSION = 1


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


@dataclass(frozen=True, slots=True)
class ClusterRef:
    id: str | None
    address: str


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
    """Display only: e.g. unlisted entities inside a scope without prune."""

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


def _same(a: Quotas, b: Quotas) -> bool:
    # dict == runs in C and settles almost every case; NaN is the only value it gets "wrong".
    return a == b or (a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a))


def ops_between(before: Quotas | None, after: Quotas | None) -> tuple[Op, ...]:
    """The ops of one alter entry turning ``before`` into ``after`` (never remove-then-set)."""
    before = before or {}
    after = after or {}
    ops = [Op(k, v) for k, v in after.items() if k not in before or not same_value(before[k], v)]
    ops.extend(Op(k, None) for k in before if k not in after)
    return tuple(sorted(ops, key=lambda op: op.key))


def diff(desired: QuotaState, actual: QuotaState, ownership: Ownership, *,
         cluster: ClusterRef, fingerprint: str | None) -> Plan:
    """Compare desired with actual: listed entities are owned whole; unlisted ones are deleted
    only inside a ``prune`` scope."""
    changes: list[Change] = []
    unchanged = 0
    for entity, want in desired.items():
        have = actual.get(entity)
        if have is None:
            changes.append(Change(entity, Action.CREATE, None, want, ops_between(None, want)))
        elif not _same(want, have):
            changes.append(Change(entity, Action.UPDATE, have, want, ops_between(have, want)))
        else:
            unchanged += 1
    watched = 0
    if ownership.prune or ownership.watch:
        for entity, have in actual.items():
            if entity in desired:
                continue
            if ownership.prunes(entity):
                changes.append(Change(entity, Action.DELETE, have, None, ops_between(have, None)))
            elif ownership.watches(entity):
                watched += 1
    changes.sort(key=lambda c: c.entity.sort_key())
    notes: tuple[str, ...] = ()
    if watched:
        notes = (f"{watched} entit{'y' if watched == 1 else 'ies'} inside an ownership scope "
                 "without prune are not in any manifest (left untouched).",)
    return Plan(tuple(changes), unchanged, cluster, fingerprint, notes)


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


# -- the file form (DESIGN §3.3) -------------------------------------------------------------

def _op_json(op: Op) -> dict[str, Any]:
    return {"key": op.key, "value": op.value, "remove": op.remove}


def change_to_json(change: Change) -> dict[str, Any]:
    return {
        "entity": change.entity.to_json(),
        "display": change.entity.display,
        "action": change.action.value,
        "before": dict(change.before) if change.before is not None else None,
        "after": dict(change.after) if change.after is not None else None,
        "ops": [_op_json(op) for op in change.ops],
    }


def plan_to_json(plan: Plan) -> dict[str, Any]:
    s = plan.summary
    return {
        "format_version": PLAN_FORMAT_VERSION,
        "cluster": {"id": plan.cluster.id, "bootstrap": plan.cluster.address},
        "state_fingerprint": plan.state_fingerprint,
        "summary": {"add": s.add, "change": s.change, "delete": s.delete, "unchanged": s.unchanged},
        "changes": [change_to_json(c) for c in plan.changes],
        "notes": list(plan.notes),
    }


def dumps_plan(plan: Plan) -> str:
    return json.dumps(plan_to_json(plan), indent=2, ensure_ascii=False) + "\n"


class _OpFile(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    key: str
    value: float | None
    remove: bool


class _ChangeFile(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    entity: dict[str, Name]
    display: str
    action: Action
    before: dict[str, float] | None
    after: dict[str, float] | None
    ops: list[_OpFile]


class _ClusterFile(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    id: str | None
    bootstrap: str


class PlanFile(BaseModel):
    """A saved plan, validated on read."""

    model_config = ConfigDict(extra="forbid", defer_build=True)
    format_version: Literal[1]
    cluster: _ClusterFile
    state_fingerprint: str | None
    summary: dict[str, int]
    changes: list[_ChangeFile]
    notes: list[str] = []


def loads_plan(text: str | bytes, *, source: str) -> Plan:
    """Read a saved plan (``--out``); KqplanError naming ``source`` if it is not one."""
    try:
        doc = PlanFile.model_validate_json(text)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise KqplanError(f"{source}: not a kqplan plan file: {where}: {err['msg']}",
                          hint="plan files are written by `kqplan plan --out FILE`") from None
    changes = []
    for c in doc.changes:
        ops = []
        for op in c.ops:
            if op.remove == (op.value is not None):
                raise KqplanError(f"{source}: op {op.key} of {c.display}: value must be null "
                                  "exactly when remove is true")
            ops.append(Op(op.key, op.value))
        changes.append(Change(Entity.of(c.entity), c.action, c.before, c.after, tuple(ops)))
    return Plan(tuple(changes), doc.summary.get("unchanged", 0),
                ClusterRef(doc.cluster.id, doc.cluster.bootstrap), doc.state_fingerprint,
                tuple(doc.notes))
