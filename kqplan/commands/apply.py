"""``kqplan apply``: make the cluster match (DESIGN §3.5), from manifests or a saved plan."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from kqplan import deadline
from kqplan.apply.protocol import apply, check_stale
from kqplan.cluster.connection import ENV_BOOTSTRAP, ENV_COMMAND_CONFIG
from kqplan.commands.report import Recorder
from kqplan.config.model import ClusterEntry, ProjectConfig
from kqplan.console import Streams
from kqplan.core.cluster import Cluster
from kqplan.core.desired import DesiredState
from kqplan.core.errors import ExitCode, KqplanError
from kqplan.core.plan import ClusterRef, Plan
from kqplan.core.report import RunStatus
from kqplan.core.state import QuotaState
from kqplan.files import check_writable
from kqplan.pipeline.guarded import (
    DEFAULT_GUARDRAILS,
    Guardrails,
    check_inventory_id,
    cluster_diagnostics,
    compute_plan,
    describing_ahead,
    guardrail_problem,
    load_checked,
)
from kqplan.pipeline.inputs import manifest_paths
from kqplan.pipeline.target import Target, open_cluster
from kqplan.planfile.file import read_plan
from kqplan.render.escape import terminal
from kqplan.render.text import render_text

if TYPE_CHECKING:
    from kqplan.commands.forecast import Metrics
    from kqplan.core.enforcement import Watch
    from kqplan.core.sensors import ClusterSettings
    from kqplan.metrics.source import PrometheusSource

CONFIRM_WORD = "yes"


def confirm(plan: Plan, streams: Streams, *, auto_approve: bool) -> bool:
    """terraform's rule: only the word 'yes' applies; no terminal means no implicit yes."""
    if auto_approve:
        return True
    if not streams.interactive:
        raise KqplanError("refusing to apply without confirmation: not running on a terminal",
                          hint="review the plan and pass --auto-approve (or apply a saved plan "
                          "with --plan FILE --auto-approve)")
    where = terminal(plan.cluster.id or plan.cluster.address)
    streams.print(f"Do you want to apply these changes to {where}?\n"
                  f"  Only '{CONFIRM_WORD}' will be accepted to approve.\n")
    streams.print("  Enter a value: ", end="")
    streams.out.flush()
    try:
        with deadline.paused():  # --timeout is the cluster's time, not the reader's
            answer = input()
    except EOFError:  # Ctrl-D: no answer is not a yes
        streams.print("")
        return False
    return answer.strip() == CONFIRM_WORD


def apply_command(paths: Sequence[Path], plan_file: Path | None, target: Target,
                  config: ProjectConfig, *, auto_approve: bool, report: Path | None,
                  streams: Streams, cluster_entry: ClusterEntry | None = None,
                  guardrails: Guardrails = DEFAULT_GUARDRAILS, color: bool = False,
                  as_json: bool = False, enforcement: Enforcement | None = None) -> int:
    """``as_json``: the report (the ``--report`` document) is stdout, the plan goes to stderr.
    ``enforcement``: after the alter, watch the metrics until Kafka enforces the changed buckets
    (:mod:`kqplan.commands.enforcement`)."""
    if report is not None:
        check_writable(report, "the report")
    if as_json and not auto_approve:
        raise KqplanError("--format json needs --auto-approve (stdout is the report, nobody answers a "
                          "prompt)", hint="review the plan first (kqplan plan), then apply with "
                          "--auto-approve")
    if paths and plan_file is not None:
        raise KqplanError("give manifest paths or --plan FILE (exactly one of them)")
    if plan_file is None:
        paths = manifest_paths(paths, cluster_entry)
    target = target.within(config.max_input_bytes)
    with Recorder(report, _where(target.or_cluster(cluster_entry)), as_json, streams) as record, \
            ExitStack() as stack:
        saved = None
        if plan_file is not None:
            saved = read_plan(plan_file, limit=config.max_input_bytes)
            check_clock(saved)
            cluster_entry = planned_cluster(saved, cluster_entry, target, config)
        target = target.or_cluster(cluster_entry)
        record.where = _where(target)
        ahead = describing_ahead(target, stack) if saved is None else None
        desired = load_checked(paths, config, streams) if saved is None else None
        cluster = ahead if ahead is not None else stack.enter_context(open_cluster(target))
        return _apply(cluster, desired, saved, config, auto_approve=auto_approve, record=record,
                      streams=streams, cluster_entry=cluster_entry, guardrails=guardrails, color=color,
                      as_json=as_json, enforcement=enforcement)


def _where(target: Target) -> str:
    return target.bootstrap or (str(target.state) if target.state is not None else "(unknown)")


def planned_cluster(plan: Plan, entry: ClusterEntry | None, target: Target,
                    config: ProjectConfig) -> ClusterEntry | None:
    """The inventory cluster a saved plan is applied to: the one it was made for (its
    ``cluster.name``), as ``terraform apply PLAN`` applies where the plan was made. A ``--cluster``
    that names another is refused; an explicit target (``--bootstrap-server``, ``--state``,
    ``--sandbox``) must then be that cluster (its id is checked against the inventory's and the
    plan's)."""
    name = plan.cluster.name
    if name is None:
        return entry
    if entry is not None and entry.name != name:
        raise KqplanError(f"the plan was made for cluster {name}, not {entry.name}; nothing was changed",
                          hint=f"apply it with --cluster {name} (or without --cluster), or make a plan for "
                          f"{entry.name} (kqplan plan --cluster {entry.name} --out FILE)")
    found = entry or config.clusters.get(name)
    given = target.chosen() or os.environ.get(ENV_BOOTSTRAP) or os.environ.get(ENV_COMMAND_CONFIG)
    if found is None and not given:
        where = f"{config.source} does not list" if config.source else "no kqplan.toml was found to list"
        raise KqplanError(f"the plan was made for inventory cluster {name}, which {where}; nothing was "
                          "changed", hint="apply it from the repository whose kqplan.toml lists it (or "
                          "--config FILE), or give the cluster's address (--bootstrap-server)")
    return found


@dataclass(frozen=True, slots=True)
class Enforcement:
    """``--verify-enforcement[=WINDOW]`` with the metrics flags."""

    source: PrometheusSource
    window: float | None
    """Seconds; None: the default, from the brokers' sensor settings."""
    given: str | None = None
    """WINDOW as typed, for messages."""


@dataclass(frozen=True, slots=True)
class _Watching:
    """What ``--verify-enforcement`` watches, known before the alter."""

    metrics: Metrics
    watches: list[Watch]
    settings: ClusterSettings
    window: float


def _apply(cluster: Cluster, desired: DesiredState | None, saved: Plan | None, config: ProjectConfig, *,
           auto_approve: bool, record: Recorder, streams: Streams, cluster_entry: ClusterEntry | None,
           guardrails: Guardrails, color: bool, as_json: bool, enforcement: Enforcement | None = None) -> int:
    """Plan (from ``desired``, or the ``saved`` plan refreshed) and apply on an open cluster."""
    with streams.progress() as progress:
        if desired is not None:
            progress("Describing the cluster")
            plan = compute_plan(desired, cluster, config, record_state=False, entry=cluster_entry)
        else:
            assert saved is not None
            plan = saved
            progress("Refreshing")
            ident = cluster.identity()
            check_inventory_id(cluster_entry, ident.cluster_id, ident.address)
            check_rollout_stale(plan, ident.brokers)
            actual = cluster.describe()
            check_stale(plan, actual, ident.cluster_id)
            _check_protected(plan, actual, config)
            _check_callbacks(cluster, cluster_entry.name if cluster_entry else ident.address, config)
            plan = _retarget(plan, ClusterRef(ident.cluster_id, ident.address, ident.version, ident.mode,
                                              name=cluster_entry.name if cluster_entry else None))
        journal = record.planned(plan, saved)
        # the guardrails again, saved plans included: a plan may have been made with looser flags
        refused = guardrail_problem(plan, desired, config, guardrails)
        if refused is not None:
            raise refused
        (streams.warn if as_json else streams.print)(render_text(plan, color=color and not as_json), end="")
        if not plan.has_changes:
            record.finish(journal.report(RunStatus.FINISHED), quiet=True)
            return ExitCode.OK
        if not as_json:
            streams.print("")
        watching = _watching(cluster, plan, cluster_entry, enforcement, progress) if enforcement else None
        if not confirm(plan, streams, auto_approve=auto_approve):
            record.finish(journal.report(RunStatus.CANCELLED), quiet=True)
            streams.print("Apply cancelled.")
            return ExitCode.ERROR
        record.begin()
        result = apply(cluster, plan, progress=progress, journal=journal)
    changed = time.time()
    record.finish(result, color=color, verifying=watching is not None and result.ok)
    if watching is not None and result.ok \
            and not _verified(watching, changed, record, streams, as_json=as_json):
        return ExitCode.ERROR
    return ExitCode.OK if result.ok else ExitCode.ERROR


def _watching(cluster: Cluster, plan: Plan, entry: ClusterEntry | None, enforcement: Enforcement,
              progress: Callable[[str], None]) -> _Watching:
    """Before the alter (a Prometheus that cannot answer, or a window too short to show anything,
    stops the apply here, nothing sent): the buckets to watch, from the last minutes of usage, and
    the brokers' sensor settings."""
    from kqplan.commands.enforcement import check_watchable, default_window, expectations
    from kqplan.commands.forecast import metrics_of
    from kqplan.core.plan import apply_ops

    progress("Reading the buckets' usage from Prometheus (--verify-enforcement)")
    actual = cluster.describe()
    settings = cluster.broker_settings()
    metrics = metrics_of(enforcement.source, entry)
    watches = expectations(metrics, actual, apply_ops(actual, plan.changes),
                           entry.name if entry is not None else "cluster", time.time())
    keys = sorted({w.key for w in watches})
    window = enforcement.window if enforcement.window is not None else default_window(settings, keys)
    check_watchable(window, settings, keys, enforcement.given)
    return _Watching(metrics, watches, settings, window)


def _verified(watching: _Watching, changed: float, record: Recorder, streams: Streams, *,
              as_json: bool) -> bool:
    """Watch, report (text, and the report's ``enforcement``); False when Kafka contradicts a bucket."""
    from kqplan.commands.enforcement import verify
    from kqplan.render.enforcement import EnforcementView, enforcement_json, render_enforcement

    with streams.progress() as progress:
        found = verify(watching.metrics, watching.watches, changed=changed, window=watching.window,
                       settings=watching.settings, progress=progress)
    units = {m.key: m.unit for m in watching.metrics.names.keys}
    view = EnforcementView(found.verdicts, changed, found.waited, found.window, found.sensors, units)
    (streams.warn if as_json else streams.print)(render_enforcement(view), end="")
    record.enforced(enforcement_json(view))
    return found.contradicted == 0


CLOCK_SKEW = timedelta(minutes=5)
"""How far a saved plan's ``now`` may be ahead of the clock that applies it: two machines' clocks
differ by this much at most before the plan is refused as made with a clock ahead."""


def check_clock(plan: Plan) -> None:
    """A saved plan made with a clock ahead of this one (a skewed runner, a leftover KQPLAN_NOW) is
    refused: its ``now`` more than :data:`CLOCK_SKEW` later than ours, or any change caused by an
    expiry that has not happened yet by our clock (those are never applied, whatever the skew).
    A plan saved before ``expired_at`` existed bounds its expiries by its ``now``."""
    from kqplan.config.clock import now
    from kqplan.core.expiry import show_when

    ours = now()
    fix = ("make the plan again where the clock is right (a KQPLAN_NOW left set makes it wrong), once the "
           "time it counted on has come")
    for change in plan.changes:
        at = change.expired_at if change.expired_at is not None else plan.now if change.expired else None
        if at is not None and at > ours:
            raise KqplanError(f"the plan {change.action.value}s {change.display} because an entry expired "
                              f"{show_when(at)}, but this machine's clock says {show_when(ours)}: it has "
                              "not expired yet; nothing was changed", hint=fix)
    if plan.now is not None and plan.now - ours > CLOCK_SKEW:
        raise KqplanError(f"the plan was made at {show_when(plan.now)}, later than this machine's clock "
                          f"({show_when(ours)}) by more than {CLOCK_SKEW.seconds // 60} minutes; nothing was "
                          "changed", hint=fix)


def check_rollout_stale(plan: Plan, brokers: int | None) -> None:
    """A saved plan is stale once an entry it counted on has expired (its ``valid_until``, judged by
    KQPLAN_NOW or the system clock), or when budgets it divided by the broker count meet another
    count: the manifests now ask for something else."""
    from kqplan.config.clock import now
    from kqplan.core.expiry import show_when

    if plan.valid_until is not None and now() >= plan.valid_until:
        made = f" (the plan was made at {show_when(plan.now)})" if plan.now is not None else ""
        raise KqplanError(f"plan is stale: an entry of it expired at {show_when(plan.valid_until)}{made}; "
                          "nothing was changed", hint="make a new plan (`kqplan plan --out FILE`): expired "
                          "entries are left out of it (an override falls back to the layer beneath)")
    if plan.uses_budgets and plan.cluster.brokers is not None and brokers is not None \
            and brokers != plan.cluster.brokers:
        raise KqplanError(f"plan is stale: it divides cluster-wide budgets by {plan.cluster.brokers} "
                          f"brokers, but the cluster now has {brokers}; nothing was changed",
                          hint="make a new plan (`kqplan plan --out FILE`), which divides them by the "
                          "live count")


def _check_protected(plan: Plan, actual: QuotaState, config: ProjectConfig) -> None:
    """A saved plan judged again against ``[policy] protected-principals`` on the cluster as it is
    now (the policy may have been tightened since the plan was made): KQP157, as plan refuses."""
    principals = config.policy.protected_principals
    if not principals or not plan.changes:
        return
    from kqplan.core.diagnostics import DiagnosticsError
    from kqplan.core.protected import breaches, diagnostics

    found = breaches(actual, {c.entity: c.after for c in plan.changes}, principals)
    if found:
        raise DiagnosticsError(diagnostics(found, None, config.policy))


def _check_callbacks(cluster: Cluster, where: str, config: ProjectConfig) -> None:
    """A saved plan applied where ``[policy] quota-callback = "error"`` refuses the brokers'
    quota callback (KQP175), as plan would: nothing sent."""
    from kqplan.core.diagnostics import DiagnosticsError

    refused = [d for d in cluster_diagnostics(cluster, where, config) if d.is_error]
    if refused:
        raise DiagnosticsError(refused)


def _retarget(plan: Plan, cluster: ClusterRef) -> Plan:
    """Show where the saved plan is being applied now (same id, maybe another address; the broker
    count its budgets were divided by, checked by :func:`check_rollout_stale`)."""
    return replace(plan, cluster=replace(cluster, brokers=plan.cluster.brokers))
