"""Guardrails from ``[policy]`` in kqplan.toml: what a plan may never do, and what manifests must say.

Two kinds. Rules on the desired state (per-key ``min``/``max``, keys required on user entities,
required ``<default>`` entities, required labels) are located diagnostics, so ``validate``,
``plan`` and ``apply`` all stop on them. Rules on a plan (the deletion brake, ``protect: true``)
need the cluster and are checked by ``plan`` and again by ``apply``, saved plans included.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from kqplan.core.desired import DesiredState
from kqplan.core.diagnostics import Diagnostic, Pending, Severity, Source, Span, locate
from kqplan.core.entity import USER, Entity, EntityKind, visible
from kqplan.core.errors import KqplanError
from kqplan.core.expiry import show_span, show_when
from kqplan.core.plan import Action, Plan
from kqplan.core.sensors import ClusterSettings
from kqplan.core.units import format_number

BELOW_MIN = "KQP150"
ABOVE_MAX = "KQP151"
MISSING_KEY = "KQP152"
MISSING_DEFAULT = "KQP153"
MISSING_LABEL = "KQP154"
MASS_DELETE = "KQP155"
PROTECTED = "KQP156"
PROTECTED_PRINCIPAL = "KQP157"
EXPIRED = "KQP158"
EXPIRES_TOO_LATE = "KQP159"
EXPIRES_SOON = "KQP161"

DEFAULT_MAX_DELETE = 10
DEFAULT_MAX_DELETE_PERCENT = 25.0
DEFAULT_EXPIRY_WARNING = timedelta(days=7)
ACTING_DEFAULTS = ("max-delete", "max-delete-percent", "expiry-warning")
"""The ``[policy]`` settings whose default acts without any ``[policy]`` (the deletion brake, the
expiry warning); every other rule does nothing until kqplan.toml sets it."""


@dataclass(frozen=True, slots=True)
class KeyBounds:
    key: str
    min: float | None
    max: float | None


@dataclass(frozen=True, slots=True)
class ProtectedPrincipal:
    """A principal no plan may give a new or a lower quota: a user and, optionally, a client-id
    (None: every client-id the user connects with, none included)."""

    user: str
    client_id: str | None = None

    @property
    def display(self) -> str:
        """``{user=canary, client-id=probe}``, ``{user=canary} (every client-id)``."""
        if self.client_id is None:
            return Entity.user(self.user).display + " (every client-id)"
        return Entity.user_client(self.user, self.client_id).display


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
    expiry_warning: timedelta = DEFAULT_EXPIRY_WARNING
    """``expiry-warning``: an entry expiring sooner than this is a warning (KQP161)."""
    max_expiry: timedelta | None = None
    """``max-expiry``: an entry may not expire further ahead than this (KQP159)."""
    protected_principals: tuple[ProtectedPrincipal, ...] = ()
    """``protected-principals``: no plan gives one a new or a lower quota (KQP157)."""
    source: Path | None = None
    quota_callback: str = "warn"
    """``quota-callback``: a broker's ``client.quota.callback.class`` is a warning (``warn``) or
    refuses plan and apply (``error``), KQP175."""
    allowed_quota_callbacks: tuple[str, ...] = ()
    """``allowed-quota-callbacks``: callback classes known to keep Kafka's buckets and limits."""
    shown: str | None = None
    """``source`` as output shows it (from the repository root), for the problems located on it."""
    configured: frozenset[str] = frozenset()
    """The ``[policy]`` settings kqplan.toml sets (``expiry-warning``, ``keys``, …): one of
    :data:`ACTING_DEFAULTS` not listed here has its default, and messages say so."""


def rule_name(policy: Policy | None, name: str, *, remedy: bool = True) -> str:
    """The setting a message blames: ``[policy] max-expiry in kqplan.toml`` where it is set, ``the
    default [policy] expiry-warning; set it in kqplan.toml to change it`` where kqplan.toml does not
    set it (no ``[policy]``, or no kqplan.toml) and its default acted (``remedy=False``: without the
    second part, for a message whose hint says how to change it)."""
    if name in ACTING_DEFAULTS and (policy is None or name not in policy.configured):
        return f"the default [policy] {name}" + ("; set it in kqplan.toml to change it" if remedy else "")
    where = f" in {policy.source}" if policy is not None and policy.source is not None else ""
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
                       f"minimum {format_number(bound.min)} ({rule_name(policy, f'keys.{key}.min')})", loc,
                       "raise the value, or change the policy")
            if bound.max is not None and value > bound.max:
                report(ABOVE_MAX, f"{key} = {format_number(value)} of {entity.display} is above the "
                       f"maximum {format_number(bound.max)} ({rule_name(policy, f'keys.{key}.max')})", loc,
                       "lower the value, or change the policy")
        if USER in entity and entity.kind is EntityKind.CLIENT:
            budgets = desired.budgets.get(entity, {}) if desired.budgets else {}
            missing = [k for k in policy.required_keys if k not in quotas and k not in budgets]
            if missing:
                report(MISSING_KEY, f"{entity.display} does not set {', '.join(missing)}, required on "
                       f"every user entity ({rule_name(policy, 'required-keys')})", origin.loc,
                       f"add {missing[0]} to its quotas (or to its profile)")
        if policy.required_labels:
            labels = dict(desired.metadata[entity].labels) if entity in desired.metadata else {}
            missing = [name for name in policy.required_labels if not labels.get(name)]
            if missing:
                report(MISSING_LABEL, f"{entity.display} has no label {', '.join(missing)} "
                       f"({rule_name(policy, 'required-labels')})", origin.loc,
                       f"add `metadata: {{labels: {{{missing[0]}: ...}}}}` to the entry or to its file")
    found += expiry_diagnostics(desired, policy)
    for types in policy.required_defaults:
        default = Entity(tuple((t, None) for t in types))
        if default not in desired.quotas:
            where = policy.shown or (str(policy.source) if policy.source is not None else "kqplan.toml")
            span = Span(where, 0, 0)
            found.append(Diagnostic(MISSING_DEFAULT, f"no manifest lists {default.display}, required by "
                                    f"{rule_name(policy, 'required-defaults')}", span,
                                    hint=f"add an entry `{' '.join(f'{t}: <default>' for t in types)}` "
                                    "with its quotas"))
    return found


def expiry_diagnostics(desired: DesiredState, policy: Policy) -> list[Diagnostic]:
    """Entries in effect that expire within ``expiry-warning`` (a warning, KQP161) or further
    ahead than ``max-expiry`` (an error, KQP159), each at its ``expires``."""
    now = desired.now
    if now is None or not desired.expiring:
        return []
    found = []
    for expiry in desired.expiring:
        left = expiry.at - now
        when = show_when(expiry.at)
        if policy.max_expiry is not None and left > policy.max_expiry:
            limit = show_span(policy.max_expiry)
            found.append(locate(expiry.origin.source, Pending(
                EXPIRES_TOO_LATE, f"{expiry.entity.display} expires {when}, further ahead than "
                f"{limit} ({rule_name(policy, 'max-expiry')})", expiry.loc,
                hint=f"temporary quotas may last at most {limit}: choose an earlier date (extend it "
                "later in a reviewed change if needed)")))
        elif left <= policy.expiry_warning:
            what = "the override of " if expiry.override else ""
            effect = (f"{expiry.entity.display} falls back to the layer beneath" if expiry.override else
                      "an entity listed only here is deleted under an ownership scope with prune")
            found.append(locate(expiry.origin.source, Pending(
                EXPIRES_SOON, f"{what}{expiry.entity.display} expires {when}, within "
                f"{show_span(policy.expiry_warning)} ({rule_name(policy, 'expiry-warning')}); from then "
                f"on {effect}", expiry.loc, severity=Severity.WARNING,
                hint="extend `expires:` if the quota is still needed, or remove the entry once it expired")))
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
        over.append(f"more than {policy.max_delete} ({rule_name(policy, 'max-delete', remedy=False)})")
    if too_large:
        percent = rule_name(policy, "max-delete-percent", remedy=False)
        over.append(f"{share:.0f}% of the {managed} managed entities, over {policy.max_delete_percent:g}% "
                    f"({percent})")
    tripped = " and ".join(name for name, on in (("max-delete", too_many), ("max-delete-percent", too_large))
                           if on)
    return KqplanError(f"the plan deletes {len(deletes)} entities: {' and '.join(over)} [{MASS_DELETE}]",
                       hint=f"review the deletions; pass --allow-mass-delete if they are meant, or set "
                       f"{tripped} under [policy] in kqplan.toml")


QUOTA_CALLBACK = "KQP175"
UNREAD_SETTINGS = "KQP176"


def callback_diagnostics(settings: ClusterSettings, where: str, policy: Policy) -> list[Diagnostic]:
    """A broker that runs a ``client.quota.callback.class`` (KQP175: a warning, or an error with
    ``[policy] quota-callback = "error"``; none for ``allowed-quota-callbacks``), and a broker whose
    settings could not be read (KQP176, a warning): said once per cluster, at ``where``."""
    found = []
    span = Span(where, 0, 0)
    for name, brokers in settings.callbacks.items():
        if name in policy.allowed_quota_callbacks:
            continue
        nodes = ", ".join(str(b.node) for b in brokers)
        several = len(brokers) > 1
        error = policy.quota_callback == "error"
        hint = ("kqplan apply --verify-enforcement judges what Kafka enforces; list a callback known to "
                f"keep Kafka's buckets and limits in {rule_name(policy, 'allowed-quota-callbacks')}")
        if error:
            hint = f"{rule_name(policy, 'quota-callback')} is \"error\"; " + hint
        found.append(Diagnostic(
            QUOTA_CALLBACK, f"broker{'s' if several else ''} {nodes} enforce{'' if several else 's'} client "
            f"quotas through client.quota.callback.class={visible(name)}: the quotas kqplan stores may "
            "not be what clients get", span, Severity.ERROR if error else Severity.WARNING, hint))
    for broker in settings.unread:
        found.append(Diagnostic(
            UNREAD_SETTINGS, f"cannot read the settings of broker {broker.node} at {visible(broker.address)} "
            f"({visible(broker.problem or 'no answer')}): whether it runs a client.quota.callback.class is "
            "unknown, and Kafka's default sensor windows are assumed", span, Severity.WARNING,
            "grant DESCRIBE_CONFIGS on the cluster (it lets kqplan describe quotas too) and check that the "
            "address the broker advertises is reachable"))
    return found
