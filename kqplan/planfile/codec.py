"""The saved-plan file form (DESIGN §3.3): ``plan_to_json``/``loads_plan`` side by side.

In-memory plans are :mod:`kqplan.core.plan`; this module turns them into the versioned JSON that
``--out`` writes and ``apply --plan`` reads (terraform's ``planfile``), and validates what it reads.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from datetime import datetime
from typing import Any

import orjson

from kqplan.core.cluster import Op
from kqplan.core.entity import Entity, EntityKind
from kqplan.core.errors import KqplanError
from kqplan.core.expiry import ExpiryError, iso_when, parse_when
from kqplan.core.metadata import Metadata
from kqplan.core.plan import Action, Change, ClusterRef, Plan, ops_between
from kqplan.core.quotas import QUOTA_KEYS, entity_error, value_error
from kqplan.core.state import Quotas

PLAN_FORMAT_VERSION = 1


def _plain(quotas: Quotas | None) -> dict[str, float] | None:
    """A plain dict of the quotas (the same one when it is: the JSON body only reads it)."""
    if quotas is None or quotas.__class__ is dict:
        return quotas
    return dict(quotas)


def change_to_json(change: Change) -> dict[str, Any]:
    # A plan writes one per change (100k on a first plan): op fields read directly, the action
    # as the StrEnum member itself (a str: every encoder writes its value).
    return {
        "entity": change.entity.to_json(),
        "display": change.display,
        "action": change.action,
        "before": _plain(change.before),
        "after": _plain(change.after),
        "ops": [{"key": op.key, "value": op.value, "remove": op.value is None} for op in change.ops],
        "origin": change.origin,
        "metadata": change.metadata.to_json() if change.metadata is not None else None,
    }


def rollout_to_json(plan: Plan) -> dict[str, Any]:
    """Safe rollout's part of the plan file: the clock, when the plan stops being valid, and per
    change (by its ``display``) when it expires, the expiries that cause it and its budgets. Maps
    beside ``changes``, not fields in them: a change reads as DESIGN §3.3 shows it. ``expired_at``
    (when each change's last expiry happened) only when a change has one: plans saved before it
    keep their digest."""
    doc: dict[str, Any] = {
        "now": iso_when(plan.now) if plan.now is not None else None,
        "valid_until": iso_when(plan.valid_until) if plan.valid_until is not None else None,
        "expiring": {c.display: iso_when(c.expires) for c in plan.changes if c.expires is not None},
        "expired": {c.display: list(c.expired) for c in plan.changes if c.expired},
        "budgets": {c.display: dict(sorted(c.per_cluster.items())) for c in plan.changes if c.per_cluster},
    }
    expired_at = {c.display: iso_when(c.expired_at) for c in plan.changes if c.expired_at is not None}
    if expired_at:
        doc["expired_at"] = expired_at
    return doc


def plan_to_json(plan: Plan, *, finite: bool | None = None) -> dict[str, Any]:
    """The file form; ``digest`` covers everything else, so a hand edit is detected on read.
    ``finite``: :func:`_finite` of the plan, when the caller knows it already."""
    body = _body(plan)
    return {**body, "digest": digest(body, finite=_finite(plan) if finite is None else finite)}


def digest(body: dict[str, Any], *, finite: bool = True) -> str:
    """sha256 of the body's canonical JSON (sorted keys, no spaces)."""
    if not finite:  # orjson writes NaN as null; the standard library keeps it (a cluster may hold NaN)
        return _legacy_digest(body)
    return "sha256:" + hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _legacy_digest(body: dict[str, Any]) -> str:
    """The digest of plans written before kqplan 0.3 (the standard library's number format, which
    differs from orjson's only in exponents: ``1e+16`` vs ``1e16``); still accepted on read."""
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _finite(plan: Plan) -> bool:
    """Whether every number in the plan is finite (true unless the cluster holds NaN/Infinity)."""
    values = itertools.chain.from_iterable(
        itertools.chain((q.values() for c in plan.changes for q in (c.before, c.after) if q is not None),
                        (q.values() for _, q in plan.unmanaged),
                        ((op.value,) for c in plan.changes for op in c.ops if op.value is not None)))
    return all(map(math.isfinite, values))


def _body(plan: Plan) -> dict[str, Any]:
    """The plan's JSON without its digest: with safe rollout's fields (:func:`rollout_to_json`), except
    for a plan read from a file saved before them (``legacy``), whose digest must still match; and
    ``cluster.brokers`` when the broker count is known."""
    s = plan.summary
    cluster: dict[str, Any] = {"id": plan.cluster.id, "bootstrap": plan.cluster.address,
                               "version": plan.cluster.version, "mode": plan.cluster.mode}
    if plan.cluster.brokers is not None:
        cluster["brokers"] = plan.cluster.brokers
    if plan.cluster.name is not None:  # only then: plans saved before it keep their digest
        cluster["name"] = plan.cluster.name
    body: dict[str, Any] = {"format_version": PLAN_FORMAT_VERSION, "cluster": cluster}
    if not plan.legacy:
        body.update(rollout_to_json(plan))
    body.update({
        "state_fingerprint": plan.state_fingerprint,
        "summary": {"add": s.add, "change": s.change, "delete": s.delete, "unchanged": s.unchanged},
        "changes": [change_to_json(c) for c in plan.changes],
        "notes": list(plan.notes),
        "unmanaged": [{"entity": e.to_json(), "display": e.display, "quotas": dict(sorted(q.items()))}
                      for e, q in plan.unmanaged],
    })
    return body


def dumps_plan(plan: Plan) -> str:
    """The plan file's text: orjson (30x faster than the standard library on a 100k-entity plan),
    except for a plan holding NaN/Infinity, which only the standard library writes."""
    finite = _finite(plan)
    doc = plan_to_json(plan, finite=finite)
    if finite:
        encoded = orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
        del doc  # the body (a dict per change) is let go before the text is made from the bytes
        return encoded.decode()
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _metadata(data: dict[str, Any] | None) -> Metadata | None:
    if data is None:
        return None
    labels = data.get("labels") or {}
    description = data.get("description")
    return Metadata.of({str(k): str(v) for k, v in labels.items()},
                       description if isinstance(description, str) else None)


def _when(text: str | None, source: str) -> datetime | None:
    if text is None:
        return None
    try:
        return parse_when(text)
    except ExpiryError as exc:
        raise KqplanError(f"{source}: not a kqplan plan file: {exc}",
                          hint="plan files are written by `kqplan plan --out FILE`") from None


def loads_plan(text: str | bytes, *, source: str) -> Plan:
    """Read a saved plan (``--out``); KqplanError naming ``source`` if it is not one."""
    from pydantic import ValidationError

    from kqplan.planfile.models import PlanFile

    try:
        doc = PlanFile.model_validate_json(text)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise KqplanError(f"{source}: not a kqplan plan file: {where}: {err['msg']}",
                          hint="plan files are written by `kqplan plan --out FILE`") from None
    changes = []
    expiring, lapsed, lapsed_at, budgets = doc.expiring, doc.expired, doc.expired_at, doc.budgets
    for c in doc.changes:
        ops = []
        for op in c.ops:
            if op.remove == (op.value is not None):
                raise KqplanError(f"{source}: op {op.key} of {c.display}: value must be null "
                                  "exactly when remove is true")
            ops.append(Op(op.key, op.value))
        changes.append(Change(Entity.of(c.entity), c.action, c.before, c.after, tuple(ops),
                              c.origin, _metadata(c.metadata), _when(expiring.get(c.display), source),
                              tuple(lapsed.get(c.display, ())), _when(lapsed_at.get(c.display), source),
                              budgets.get(c.display)))
    plan = Plan(tuple(changes), doc.summary.get("unchanged", 0),
                ClusterRef(doc.cluster.id, doc.cluster.bootstrap, doc.cluster.version, doc.cluster.mode,
                           doc.cluster.brokers, doc.cluster.name),
                doc.state_fingerprint, tuple(doc.notes),
                tuple((Entity.of(u.entity), u.quotas) for u in doc.unmanaged),
                now=_when(doc.now, source), valid_until=_when(doc.valid_until, source),
                legacy="now" not in doc.model_fields_set)
    verify_plan(plan, doc.summary, source=source)
    if doc.digest is None:
        raise KqplanError(f"{source}: the plan was edited after it was made (it has no digest: every plan "
                          "kqplan writes has one)",
                          hint="make a new plan with `kqplan plan --out FILE`; never edit a saved plan")
    if doc.digest != digest(body := _body(plan), finite=_finite(plan)) and doc.digest != _legacy_digest(body):
        raise KqplanError(f"{source}: the plan was edited after it was made (its digest does not match)",
                          hint="make a new plan with `kqplan plan --out FILE`; never edit a saved plan")
    return plan


def verify_plan(plan: Plan, summary: dict[str, int], *, source: str) -> None:
    """A saved plan must be what ``kqplan plan`` could have written: every op follows from
    before -> after, every action matches them, entities are distinct and valid, values are
    valid quotas, and the summary counts the changes. Otherwise apply would send something the
    reviewer never saw (a "+" that deletes, a "~" that writes NaN)."""
    seen: set[Entity] = set()
    for change in plan.changes:
        where = f"{source}: {change.display}"
        if change.entity in seen:
            raise KqplanError(f"{where} appears twice in the plan")
        seen.add(change.entity)
        if change.entity.kind is not EntityKind.CUSTOM:  # custom types are the config's to judge
            problem = entity_error(change.entity.parts)
            if problem is not None:
                raise KqplanError(f"{where}: not a valid entity: {problem}")
        expected = {Action.CREATE: (False, True), Action.DELETE: (True, False), Action.UPDATE: (True, True)}
        if (change.before is not None, change.after is not None) != expected[change.action]:
            raise KqplanError(f"{where}: action {change.action.value} does not match its before/after")
        if change.action is Action.UPDATE and not ops_between(change.before, change.after):
            raise KqplanError(f"{where}: an update that changes nothing")
        for key, value in (change.after or {}).items():
            if not math.isfinite(value) or (key in QUOTA_KEYS and value_error(key, value) is not None):
                why = value_error(key, value) if math.isfinite(value) else "NaN and infinity are not quotas"
                raise KqplanError(f"{where}: {key}={value!r} is not a valid quota ({why})")
        if change.ops != ops_between(change.before, change.after):
            raise KqplanError(f"{where}: its ops are not the change from before to after",
                              hint="the plan file was edited; make a new plan")
    s = plan.summary
    if {k: summary.get(k) for k in ("add", "change", "delete")} != {"add": s.add, "change": s.change,
                                                                    "delete": s.delete}:
        raise KqplanError(f"{source}: the summary does not count the changes it lists")
