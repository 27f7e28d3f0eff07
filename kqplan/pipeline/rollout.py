"""Safe rollout in a plan: budgets divided by the cluster's broker count, expiries shown on the
changes they cause (and recorded for staleness), and protected principals checked against
Kafka's resolution before and after. :func:`kqplan.pipeline.guarded.compute_plan` calls these."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime

from kqplan.config.model import ClusterEntry, ProjectConfig, toml_table
from kqplan.core.budgets import Budget, divide
from kqplan.core.cluster import ClusterIdentity
from kqplan.core.desired import DesiredState, Expiry
from kqplan.core.diagnostics import DiagnosticsError
from kqplan.core.entity import Entity
from kqplan.core.errors import KqplanError
from kqplan.core.expiry import show_when
from kqplan.core.plan import Change, Plan
from kqplan.core.state import Quotas, QuotaState


def broker_count(desired: DesiredState, ident: ClusterIdentity, entry: ClusterEntry | None) -> int | None:
    """The broker count budgets are divided by: the cluster's (Metadata), else the inventory's
    ``brokers``; a KqplanError when the manifests have budgets and neither says."""
    count = ident.brokers if ident.brokers is not None else entry.brokers if entry is not None else None
    if count is None and desired.budgets:
        entity, keys = next(iter(desired.budgets.items()))
        origin = desired.origins.get(entity)
        where = f" ({origin.here})" if origin is not None else ""
        name = entry.name if entry is not None else "NAME"
        raise KqplanError(
            f"{entity.display} sets {next(iter(keys))} as a cluster-wide budget{where}, but {ident.address} "
            "does not say how many brokers the cluster has", hint=f"for an offline target, set brokers = N "
            f"under {toml_table('clusters', name)} in kqplan.toml and plan with --cluster {name}; or plan "
            "against the "
            "live cluster")
    return count


def divided(desired: DesiredState, brokers: int | None, config: ProjectConfig
            ) -> tuple[Mapping[Entity, Quotas], tuple[Budget, ...]]:
    """The desired quotas with budgets divided (DiagnosticsError: a divided value Kafka or the
    policy refuses, at its entry)."""
    if brokers is None or not desired.budgets:
        return desired.quotas, ()
    quotas, budgets, problems = divide(desired, brokers, config.policy)
    if problems:
        raise DiagnosticsError(problems)
    return quotas, budgets


def annotate(plan: Plan, desired: DesiredState, budgets: tuple[Budget, ...],
             entry: ClusterEntry | None, live_brokers: int | None) -> Plan:
    """The plan with what safe rollout adds: per change its expiry, the expiries that cause it and
    its budgets; notes on expired entries that change nothing now, on budgets, and on a declared
    broker count the cluster contradicts; ``now`` and when the plan stops being valid."""
    per_entity: dict[Entity, dict[str, float]] = {}
    for budget in budgets:
        per_entity.setdefault(budget.entity, {})[budget.key] = budget.per_cluster
    lapsed: dict[Entity, list[Expiry]] = {}
    for expiry in desired.expired:
        lapsed.setdefault(expiry.entity, []).append(expiry)
    expiring: dict[Entity, datetime] = {}
    for expiry in desired.expiring:
        expiring[expiry.entity] = min(expiry.at, expiring.get(expiry.entity, expiry.at))
    changed = {c.entity for c in plan.changes}
    changes = tuple(_annotated(c, expiring, per_entity, lapsed) for c in plan.changes) \
        if per_entity or lapsed or expiring else plan.changes
    notes = [*plan.notes, *_lapsed_notes(plan, lapsed, changed)]
    if budgets:
        notes.append(_budget_note(budgets))
    if entry is not None and entry.brokers is not None and live_brokers is not None \
            and entry.brokers != live_brokers:
        notes.append(f"[clusters.{entry.name}] declares brokers = {entry.brokers}, but the cluster reports "
                     f"{live_brokers}: budgets are divided by {live_brokers}.")
    judged = bool(desired.expiring or desired.expired)  # else no clock was used: plans stay alike
    return replace(plan, changes=changes, notes=tuple(notes), now=desired.now if judged else None,
                   valid_until=desired.next_expiry)


def _lapsed_notes(plan: Plan, lapsed: dict[Entity, list[Expiry]], changed: set[Entity]) -> list[str]:
    """Expired entries this plan changes nothing for (reverted already, or never applied)."""
    unmanaged = {e for e, _ in plan.unmanaged} if lapsed else set()
    notes = []
    for entity, items in sorted(lapsed.items(), key=lambda item: item[0].sort_key()):
        if entity in changed:
            continue
        left = " It is left on the cluster (no ownership scope with prune covers it)." \
            if entity in unmanaged else ""
        for expiry in items:
            what = "override" if expiry.override else "entry"
            notes.append(f"{entity.display}: the {what} at {expiry.origin.here} expired "
                         f"{show_when(expiry.at)} and no longer applies; remove it from the manifests.{left}")
    return notes


def _budget_note(budgets: tuple[Budget, ...]) -> str:
    n, count = len(budgets), budgets[0].brokers
    values = "1 quota value is a cluster-wide budget" if n == 1 else \
        f"{n} quota values are cluster-wide budgets"
    return (f"{values}, divided by {count} broker{'' if count == 1 else 's'} (rounded down for "
            "whole-number keys); a change in the broker count changes the plan.")


def _annotated(change: Change, expiring: dict[Entity, datetime], budgets: dict[Entity, dict[str, float]],
               lapsed: dict[Entity, list[Expiry]]) -> Change:
    entity = change.entity
    expires = expiring.get(entity) if change.after is not None else None
    causes = lapsed.get(entity, ())
    why = tuple(e.expired_text() for e in causes)
    per_cluster = budgets.get(entity) if change.after is not None else None
    if not (expires or why or per_cluster):
        return change
    return replace(change, expires=expires, expired=why, expired_at=max((e.at for e in causes), default=None),
                   per_cluster=per_cluster)


def breaches(plan: Plan, actual: QuotaState, desired: DesiredState, config: ProjectConfig) -> Plan:
    """The plan with the KQP157 errors of ``[policy] protected-principals`` (none without any)."""
    principals = config.policy.protected_principals
    if not principals or not plan.changes:
        return plan
    from kqplan.core.protected import breaches as find
    from kqplan.core.protected import diagnostics

    after: dict[Entity, Quotas | None] = {c.entity: c.after for c in plan.changes}
    found = find(actual, after, principals)
    if not found:
        return plan
    return replace(plan, breaches=tuple(diagnostics(found, desired, config.policy)))


def quota_tests(plan: Plan, actual: QuotaState, desired: DesiredState) -> Plan:
    """The plan with notes on the manifests' quota tests, judged on the cluster before and on the
    state the plan would leave (none without tests)."""
    if not desired.tests:
        return plan
    from kqplan.core.intent import judge, plan_notes

    after: dict[Entity, Quotas] = dict(actual)
    for change in plan.changes:
        if change.after:
            after[change.entity] = change.after
        else:
            after.pop(change.entity, None)
    notes = plan_notes(judge(desired.tests, actual), judge(desired.tests, after))
    return replace(plan, notes=(*plan.notes, *notes))


def releases(plan: Plan, actual: QuotaState, desired: DesiredState) -> Plan:
    """The plan with a ``~ release`` note for each entity on the cluster released now but not at
    the Git base (:mod:`kqplan.pipeline.gitbase`): shown in the change that releases it, silent
    afterwards (and without a base)."""
    on_cluster = {e: r for e, r in desired.released.items() if e in actual}
    if not on_cluster:
        return plan
    from kqplan.pipeline import gitbase

    base = gitbase.base_ref()
    if base is None:
        return plan
    before = gitbase.released_at(base, sorted({str(r.source.opened) for r in on_cluster.values()}))
    if before is None:
        return replace(plan, notes=(*plan.notes, f"Released entities are not shown: git cannot read the "
                                    f"base {base} here (fetch it, or set {gitbase.BASE_ENV})."))
    notes = [f"~ release {e.display}  # {r.here}: no longer managed, left on the cluster as it is "
             "(no request)." for e, r in sorted(on_cluster.items(), key=lambda i: i[0].sort_key())
             if e not in before]
    return replace(plan, notes=(*plan.notes, *notes)) if notes else plan
