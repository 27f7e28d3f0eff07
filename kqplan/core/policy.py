"""Guardrails from ``[policy]`` in kqplan.toml: what a plan may never do, and what manifests must say.

Two kinds. Rules on the desired state (per-key ``min``/``max``, keys required on user entities,
required ``<default>`` entities, required labels) are located diagnostics, so ``validate``,
``plan`` and ``apply`` all stop on them. Rules on a plan (the deletion brake, ``protect: true``)
need the cluster and are checked by ``plan`` and again by ``apply``, saved plans included.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from kqplan.core.desired import DesiredState
from kqplan.core.diagnostics import Diagnostic, Pending, Source, Span, locate
from kqplan.core.entity import USER, Entity, EntityKind
from kqplan.core.errors import KqplanError
from kqplan.core.plan import Action, Plan
from kqplan.core.units import format_number

BELOW_MIN = "KQP150"
ABOVE_MAX = "KQP151"
MISSING_KEY = "KQP152"
MISSING_DEFAULT = "KQP153"
MISSING_LABEL = "KQP154"
MASS_DELETE = "KQP155"
PROTECTED = "KQP156"

DEFAULT_MAX_DELETE = 10
DEFAULT_MAX_DELETE_PERCENT = 25.0


@dataclass(frozen=True, slots=True)
class KeyBounds:
    key: str
    min: float | None
    max: float | None


@dataclass(frozen=True, slots=True)
class Policy:
    """Guardrails from ``[policy]``; the defaults brake mass deletion and require nothing else."""

    max_delete: int = DEFAULT_MAX_DELETE
    max_delete_percent: float = DEFAULT_MAX_DELETE_PERCENT
    required_keys: tuple[str, ...] = ()
    """Keys every ``{user=…}`` entity (any user entity, client-id or not) must set."""
    required_defaults: tuple[tuple[str, ...], ...] = ()
    """Default entities that must be listed, as type tuples: ``("user",)`` is ``{user=<default>}``."""
    required_labels: tuple[str, ...] = ()
    key_bounds: tuple[KeyBounds, ...] = ()
    allow_unmanaged: bool = True
    """False: a plan fails while cluster entities are outside every manifest and scope."""
    source: Path | None = None


def _rule(policy: Policy, name: str) -> str:
    where = f" in {policy.source}" if policy.source is not None else ""
    return f"[policy] {name}{where}"


def policy_diagnostics(desired: DesiredState, policy: Policy) -> list[Diagnostic]:
    """Every violation of the desired-state rules, located at the entry (or the config)."""
    found: list[Diagnostic] = []
    bounds = {b.key: b for b in policy.key_bounds}
    per_entry = bool(bounds or policy.required_keys or policy.required_labels)
    for entity, quotas in desired.quotas.items() if per_entry else ():
        origin = desired.origins.get(entity)
        if origin is None:
            continue

        def report(code: str, message: str, loc: tuple[str | int, ...], hint: str,
                   source: Source = origin.source) -> None:
            found.append(locate(source, Pending(code, message, loc, hint=hint)))

        for key, value in quotas.items():
            bound = bounds.get(key)
            if bound is None:
                continue
            loc = (*origin.loc, "quotas", key)
            if bound.min is not None and value < bound.min:
                report(BELOW_MIN, f"{key} = {format_number(value)} of {entity.display} is below the "
                       f"minimum {format_number(bound.min)} ({_rule(policy, f'keys.{key}.min')})", loc,
                       "raise the value, or change the policy")
            if bound.max is not None and value > bound.max:
                report(ABOVE_MAX, f"{key} = {format_number(value)} of {entity.display} is above the "
                       f"maximum {format_number(bound.max)} ({_rule(policy, f'keys.{key}.max')})", loc,
                       "lower the value, or change the policy")
        if USER in entity and entity.kind is EntityKind.CLIENT:
            missing = [k for k in policy.required_keys if k not in quotas]
            if missing:
                report(MISSING_KEY, f"{entity.display} does not set {', '.join(missing)}, required on "
                       f"every user entity ({_rule(policy, 'required-keys')})", origin.loc,
                       f"add {missing[0]} to its quotas (or to its profile)")
        if policy.required_labels:
            labels = dict(desired.metadata[entity].labels) if entity in desired.metadata else {}
            missing = [name for name in policy.required_labels if not labels.get(name)]
            if missing:
                report(MISSING_LABEL, f"{entity.display} has no label {', '.join(missing)} "
                       f"({_rule(policy, 'required-labels')})", origin.loc,
                       f"add `metadata: {{labels: {{{missing[0]}: ...}}}}` to the entry or to its file")
    for types in policy.required_defaults:
        default = Entity(tuple((t, None) for t in types))
        if default not in desired.quotas:
            span = Span(str(policy.source), 0, 0) if policy.source is not None else Span("kqplan.toml", 0, 0)
            found.append(Diagnostic(MISSING_DEFAULT, f"no manifest lists {default.display}, required by "
                                    f"{_rule(policy, 'required-defaults')}", span,
                                    hint=f"add an entry `{' '.join(f'{t}: <default>' for t in types)}` "
                                    "with its quotas"))
    return found


def managed_count(plan: Plan) -> int:
    """Entities on the cluster that the manifests manage: unchanged, updated or deleted ones."""
    s = plan.summary
    return s.unchanged + s.change + s.delete


def deletion_problem(plan: Plan, policy: Policy, protected: Collection[Entity], *,
                     allow_mass_delete: bool) -> KqplanError | None:
    """Why the plan's deletions are refused: a protected entity, or a mass deletion."""
    deletes = [c.entity for c in plan.changes if c.action is Action.DELETE]
    guarded = [e for e in deletes if e in protected]
    if guarded:
        shown = ", ".join(e.display for e in guarded[:5])
        return KqplanError(f"the plan deletes {len(guarded)} protected entit"
                           f"{'y' if len(guarded) == 1 else 'ies'} ({shown}); nothing was changed "
                           f"[{PROTECTED}]",
                           hint="remove `protect: true` from the entry first if the deletion is meant")
    if allow_mass_delete or not deletes:
        return None
    managed = managed_count(plan)
    share = 100.0 * len(deletes) / managed if managed else 100.0
    # A single deletion is never "mass", however small the cluster.
    too_many = len(deletes) > policy.max_delete
    too_large = len(deletes) > 1 and share > policy.max_delete_percent
    if not (too_many or too_large):
        return None
    over = []
    if too_many:
        count = _brake(policy, "max-delete", policy.max_delete, DEFAULT_MAX_DELETE)
        over.append(f"more than {policy.max_delete} ({count})")
    if too_large:
        percent = _brake(policy, "max-delete-percent", policy.max_delete_percent, DEFAULT_MAX_DELETE_PERCENT)
        over.append(f"{share:.0f}% of the {managed} managed entities, over {policy.max_delete_percent:g}% "
                    f"({percent})")
    tripped = " and ".join(name for name, on in (("max-delete", too_many), ("max-delete-percent", too_large))
                           if on)
    return KqplanError(f"the plan deletes {len(deletes)} entities: {' and '.join(over)} [{MASS_DELETE}]",
                       hint=f"review the deletions; pass --allow-mass-delete if they are meant, or set "
                       f"{tripped} under [policy] in kqplan.toml")


def _brake(policy: Policy, name: str, value: float, default: float) -> str:
    """Which setting of the deletion brake tripped: a default one says so (the brake is on without
    any ``[policy]``), a configured one says where it is set."""
    return f"the default [policy] {name}" if value == default else _rule(policy, name)
