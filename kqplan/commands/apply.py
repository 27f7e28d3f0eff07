"""``kqplan apply``: make the cluster match (DESIGN §3.5), from manifests or a saved plan."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any

from kqplan import deadline
from kqplan.apply.protocol import Journal, apply, check_stale
from kqplan.config.model import ClusterEntry, ProjectConfig
from kqplan.console import Streams
from kqplan.core.cluster import Cluster
from kqplan.core.desired import DesiredState
from kqplan.core.errors import ExitCode, KqplanError
from kqplan.core.plan import ClusterRef, Plan
from kqplan.core.report import ApplyReport, RunStatus
from kqplan.core.state import QuotaState
from kqplan.files import check_writable, write_atomically
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
from kqplan.planfile.codec import plan_to_json
from kqplan.planfile.file import read_plan
from kqplan.render.apply import render_apply, report_to_json
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
    target = target.within(config.max_input_bytes).or_cluster(cluster_entry)
    where = target.bootstrap or (str(target.state) if target.state is not None else "(unknown)")
    with Recorder(report, where, as_json, streams) as record, ExitStack() as stack:
        ahead = describing_ahead(target, stack) if plan_file is None else None
        desired = load_checked(paths, config, streams) if plan_file is None else None
        cluster = ahead if ahead is not None else stack.enter_context(open_cluster(target))
        return _apply(cluster, desired, plan_file, config, auto_approve=auto_approve, record=record,
                      streams=streams, cluster_entry=cluster_entry, guardrails=guardrails, color=color,
                      as_json=as_json, enforcement=enforcement)


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


def _apply(cluster: Cluster, desired: DesiredState | None, plan_file: Path | None, config: ProjectConfig, *,
           auto_approve: bool, record: Recorder, streams: Streams, cluster_entry: ClusterEntry | None,
           guardrails: Guardrails, color: bool, as_json: bool, enforcement: Enforcement | None = None) -> int:
    """Plan (from ``desired``, or the saved ``plan_file`` refreshed) and apply on an open cluster."""
    with streams.progress() as progress:
        if desired is not None:
            progress("Describing the cluster")
            plan = compute_plan(desired, cluster, config, record_state=False, entry=cluster_entry)
        else:
            assert plan_file is not None
            plan = read_plan(plan_file, limit=config.max_input_bytes)
            progress("Refreshing")
            ident = cluster.identity()
            check_inventory_id(cluster_entry, ident.cluster_id, ident.address)
            check_rollout_stale(plan, ident.brokers)
            actual = cluster.describe()
            check_stale(plan, actual, ident.cluster_id)
            _check_protected(plan, actual, config)
            _check_callbacks(cluster, cluster_entry.name if cluster_entry else ident.address, config)
            plan = _retarget(plan, ClusterRef(ident.cluster_id, ident.address, ident.version, ident.mode))
        journal = record.planned(plan)
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


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the apply stands so that its report is written (as Ctrl-C is)."""


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise Terminated


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Recorder:
    """The ``--report`` file of one apply, true at every moment: an ``in progress`` document
    replaces the previous run's before the first real alter, and the final one is written however
    the apply ends — a result, an error (what was known then, and the error), Ctrl-C or SIGTERM
    (``interrupted``). A report from an older run is never left standing."""

    def __init__(self, path: Path | None, where: str, as_json: bool, streams: Streams) -> None:
        self.path, self.where, self.as_json, self.streams = path, where, as_json, streams
        self.started_at = _now()
        self.journal: Journal | None = None
        self.digest: str | None = None
        self.done = False
        self._previous: Any = None
        self._result: ApplyReport | None = None
        self._enforcement: dict[str, Any] | None = None
        """The report's ``enforcement`` object: ``in progress`` while apply watches the metrics."""

    def __enter__(self) -> Recorder:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, _terminate)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            if not self.done and self.path is not None:
                self._write(self._stopped(exc))
            elif self._enforcement is not None and self._enforcement.get("status") == "in progress":
                self._watch_stopped(exc)
        finally:
            if self._previous is not None:
                signal.signal(signal.SIGTERM, self._previous)

    def planned(self, plan: Plan) -> Journal:
        """The plan is known: from now on a report lists its entities."""
        self.journal = Journal(plan)
        self.digest = str(plan_to_json(plan)["digest"]) if self.path is not None else None
        return self.journal

    def begin(self) -> None:
        """Before the first request that changes anything: ``in progress``, every entity not sent
        yet (only into a regular file: a pipe or /dev/stdout gets the final document alone)."""
        path = self.path
        if path is None or self.journal is None or (path.exists() and not path.is_file()):
            return
        self._write(self.journal.report(RunStatus.IN_PROGRESS))

    def finish(self, result: ApplyReport, *, quiet: bool = False, color: bool = False,
               verifying: bool = False) -> None:
        """The apply's result: the file, and stdout (the JSON document, or the text). ``verifying``:
        the metrics are watched next, so the file says ``enforcement: in progress`` and the JSON
        document waits for :meth:`enforced`."""
        self.done = True
        self._result = result
        if verifying:
            self._enforcement = {"status": "in progress"}
        document = self._document(result, finished=True)
        if self.path is not None:
            write_atomically(self.path, document)
        if self.as_json and not verifying:
            self.streams.print(document, end="")
        elif not quiet and not self.as_json:
            self.streams.print(render_apply(result, color=color), end="")

    def enforced(self, enforcement: dict[str, Any]) -> None:
        """The watch of the metrics ended: the report with its ``enforcement``, file and stdout."""
        assert self._result is not None
        self._enforcement = enforcement
        document = self._document(self._result, finished=True)
        if self.path is not None:
            write_atomically(self.path, document)
        if self.as_json:
            self.streams.print(document, end="")

    def _watch_stopped(self, exc: BaseException | None) -> None:
        """The watch stopped early (Ctrl-C, SIGTERM, an error): the alter stands, the report says so."""
        interrupted = isinstance(exc, KeyboardInterrupt)
        error = None if interrupted else exc.message if isinstance(exc, KqplanError) else (
            f"internal error: {type(exc).__name__}: {exc}" if exc is not None else None)
        self.enforced({"status": "interrupted" if interrupted else "failed", "error": error})

    def _stopped(self, exc: BaseException | None) -> ApplyReport:
        interrupted = isinstance(exc, KeyboardInterrupt)
        status = RunStatus.INTERRUPTED if interrupted else RunStatus.FAILED
        error = (None if interrupted else exc.message if isinstance(exc, KqplanError)
                 else f"internal error: {type(exc).__name__}: {exc}" if exc is not None else None)
        if self.journal is not None:
            return self.journal.report(status, error)
        return ApplyReport(ClusterRef(None, self.where), (), False, 0,
                           {"describe": 0, "alter_validate": 0, "alter": 0}, status=status, error=error)

    def _write(self, result: ApplyReport) -> None:
        assert self.path is not None
        finished = result.status is not RunStatus.IN_PROGRESS
        write_atomically(self.path, self._document(result, finished=finished))

    def _document(self, result: ApplyReport, *, finished: bool) -> str:
        result = replace(result, started_at=self.started_at, plan_digest=self.digest,
                         finished_at=_now() if finished else None)
        document = report_to_json(result)
        if self._enforcement is not None:
            document["enforcement"] = self._enforcement
        return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


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
