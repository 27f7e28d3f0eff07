"""``kqplan fleet apply``: every selected inventory cluster's plan, applied with the single-cluster
protocol (validateOnly, alter, verify, an outcome per entity). With ``--rollout``, cluster by
cluster in the order of ``[rollout] waves``: a wave starts only when every cluster of the one
before applied and verified cleanly; the first wave that does not stops the rollout, and the
clusters after it are ``not started``.

Every cluster is planned first (all of them, a few at a time): one that cannot be planned (its
manifests, its guard, a guardrail) stops everything before any alter. The plans are shown, and
approved once. ``--report FILE`` says, per cluster, what was applied and what was not started;
it has the single apply's life cycle (:class:`FleetRecorder`): ``in progress`` from the first
alter on, rewritten as each cluster starts and ends, and this run's final document however the
run ends.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kqplan import deadline
from kqplan.apply.protocol import Journal, apply
from kqplan.commands.report import ReportLifecycle, now
from kqplan.config.model import ClusterEntry, ProjectConfig
from kqplan.console import Streams
from kqplan.core.errors import ExitCode, KqplanError
from kqplan.core.plan import Plan
from kqplan.core.report import ApplyReport, RunStatus
from kqplan.files import check_writable
from kqplan.fleet.clusters import each, load, plan, select
from kqplan.pipeline.target import Target, open_cluster
from kqplan.render.apply import render_apply, report_to_json
from kqplan.render.escape import terminal
from kqplan.render.text import render_text

CONFIRM_WORD = "yes"


@dataclass(slots=True)
class ClusterRun:
    """One cluster of the rollout: its wave, its plan, and how its apply ended."""

    name: str
    wave: int
    plan: Plan | None
    """None: the cluster could not be planned (``error``)."""
    status: str = "not started"
    """``applied``, ``no changes``, ``failed``, ``not started``; ``in progress`` while its apply
    runs, ``interrupted`` when Ctrl-C or SIGTERM stopped it."""
    report: ApplyReport | None = None
    error: str | None = None
    journal: Journal | None = None
    """Its apply's, while it runs: what a report says of it if the run stops there."""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "wave": self.wave, "status": self.status, "error": self.error,
                "report": report_to_json(self.report) if self.report is not None else None}


class FleetRecorder(ReportLifecycle):
    """``fleet apply --report``: the single apply's life cycle
    (:class:`~kqplan.commands.report.ReportLifecycle`) over a document of every cluster —
    ``in progress`` before the first alter and again as each cluster starts and ends, then
    ``finished`` (or ``cancelled``); however else the run ends, ``failed`` (the error) or
    ``interrupted``, with every cluster's status known then: the one being applied gets its
    journal's outcomes (``unknown`` for a batch in flight, ``not sent`` after it)."""

    def __init__(self, path: Path | None, *, rollout: bool) -> None:
        super().__init__(path)
        self.rollout = rollout
        self.waves: list[list[str]] = []
        self.runs: list[ClusterRun] = []

    def progress(self) -> None:
        """The clusters as they stand now, ``in progress`` (only into a regular file)."""
        if self._takes_progress():
            self._progress(self._document(RunStatus.IN_PROGRESS, None))

    def finish(self, status: RunStatus) -> bool:
        """The run's end (``finished`` or ``cancelled``); whether it applied every cluster cleanly."""
        if self.path is not None:  # no --report: nobody reads the document
            self._final(self._document(status, None))
        else:
            self.done = True
        return _ok(status, self.runs)

    def _stopped_document(self, status: RunStatus, error: str | None) -> str:
        for run in self.runs:
            if run.status == "in progress":
                run.status = "interrupted" if status is RunStatus.INTERRUPTED else "failed"
                run.error = run.error or error
                if run.journal is not None and run.journal.batches:
                    run.report = run.journal.report(status, error)
        return self._document(status, error)

    def _document(self, status: RunStatus, error: str | None) -> str:
        finished = status is not RunStatus.IN_PROGRESS
        for run in self.runs:  # the cluster being applied: its outcomes so far
            if run.status == "in progress" and run.journal is not None and run.journal.batches:
                run.report = run.journal.report(RunStatus.IN_PROGRESS)
        document: dict[str, Any] = {
            "format_version": 1, "status": status.value, "started_at": self.started_at,
            "finished_at": now() if finished else None, "error": error, "ok": _ok(status, self.runs),
            "rollout": self.rollout, "waves": self.waves, "clusters": [r.to_json() for r in self.runs]}
        return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _ok(status: RunStatus, runs: Sequence[ClusterRun]) -> bool:
    return status is RunStatus.FINISHED and all(r.status in ("applied", "no changes") for r in runs)


def waves_of(config: ProjectConfig, entries: Sequence[ClusterEntry],
             rollout: bool) -> list[list[ClusterEntry]]:
    """The order of the apply: one wave of every selected cluster, or ``[rollout] waves`` (each
    selected cluster must be in one)."""
    if not rollout:
        return [list(entries)]
    if not config.rollout_waves:
        raise KqplanError("--rollout needs [rollout] waves in kqplan.toml",
                          hint='e.g. [rollout]\\nwaves = [["staging"], ["prod-eu"], ["prod-us", "prod-ap"]]')
    selected = {e.name: e for e in entries}
    placed = {name for wave in config.rollout_waves for name in wave}
    outside = [name for name in selected if name not in placed]
    if outside:
        raise KqplanError(f"--rollout: {', '.join(outside)} {'is' if len(outside) == 1 else 'are'} in no "
                          "[rollout] wave", hint="add each cluster to a wave, or leave it out with --cluster")
    waves = [[selected[name] for name in wave if name in selected] for wave in config.rollout_waves]
    return [wave for wave in waves if wave]


def fleet_apply_command(config: ProjectConfig, names: Sequence[str], *, rollout: bool, auto_approve: bool,
                        report: Path | None, streams: Streams, color: bool = False) -> int:
    if report is not None:
        check_writable(report, "the report")
    with FleetRecorder(report, rollout=rollout) as record:
        return _fleet_apply(config, names, rollout=rollout, auto_approve=auto_approve, record=record,
                            streams=streams, color=color)


def _fleet_apply(config: ProjectConfig, names: Sequence[str], *, rollout: bool, auto_approve: bool,
                 record: FleetRecorder, streams: Streams, color: bool) -> int:
    entries = select(config, names)
    waves = waves_of(config, entries, rollout)
    record.waves = [[e.name for e in wave] for wave in waves]
    if not auto_approve and not streams.interactive:
        raise KqplanError("refusing to apply without confirmation: not running on a terminal",
                          hint="review `kqplan fleet plan` and pass --auto-approve")
    ordered = [e for wave in waves for e in wave]
    with streams.progress() as progress:
        loaded = load(ordered, config)
        planned = each(ordered, lambda e: plan(e, config, loaded[e.name])[0], progress=progress,
                       label="Planning")
    outcomes = {o.cluster: o for o in planned}
    runs = [ClusterRun(e.name, i, outcomes[e.name].value) for i, wave in enumerate(waves, 1) for e in wave]
    record.runs = runs
    failed = {o.cluster: o.error for o in planned if o.error is not None}
    if failed:
        for run in runs:
            if run.name in failed:
                run.status, run.error = "failed", f"could not be planned: {failed[run.name]}"
        shown = "; ".join(f"{name}: {error}" for name, error in failed.items())
        raise KqplanError(f"fleet apply stops before any change: {len(failed)} cluster(s) could not be "
                          f"planned ({shown})", hint="kqplan fleet plan shows each cluster's plan or error")
    for run in runs:
        assert run.plan is not None
        streams.print(f"== {terminal(run.name)}" + (f" (wave {run.wave} of {len(waves)})" if rollout else "")
                      + " ==")
        streams.print(render_text(run.plan, color=color), end="")
    if not any(r.plan is not None and r.plan.has_changes for r in runs):
        for run in runs:
            run.status = "no changes"
        return _finish(runs, record, RunStatus.FINISHED, streams)
    if not auto_approve and not _confirm(streams, len(runs), len(waves) if rollout else 0):
        streams.print("Apply cancelled.")
        record.finish(RunStatus.CANCELLED)
        return ExitCode.ERROR
    _apply_waves(runs, config, record, streams, rollout=rollout, color=color)
    return _finish(runs, record, RunStatus.FINISHED, streams)


def _confirm(streams: Streams, clusters: int, waves: int) -> bool:
    how = f" in {waves} waves" if waves else ""
    streams.print(f"\nDo you want to apply these changes to {clusters} clusters{how}?\n"
                  f"  Only '{CONFIRM_WORD}' will be accepted to approve.\n")
    streams.print("  Enter a value: ", end="")
    streams.out.flush()
    try:
        with deadline.paused():  # --timeout is the clusters' time, not the reader's
            return input().strip() == CONFIRM_WORD
    except EOFError:
        return False


def _apply_waves(runs: list[ClusterRun], config: ProjectConfig, record: FleetRecorder, streams: Streams, *,
                 rollout: bool, color: bool) -> None:
    """Wave after wave; with ``rollout``, the first wave with a cluster not cleanly applied is the
    last one started. Once the command's ``--timeout`` has passed, a cluster still to start could
    only time out: the run stops there, an error."""
    for wave in sorted({r.wave for r in runs}):
        members = [r for r in runs if r.wave == wave]
        for run in members:
            if run.plan is not None and run.plan.has_changes and deadline.remaining() == 0:
                rest = [r.name for r in runs if r.status == "not started"]
                current = deadline.current()
                assert current is not None
                raise KqplanError(f"{current.text} passed: {', '.join(rest)} not started",
                                  hint="give a longer --timeout; the clusters applied stay applied, and "
                                  "another fleet apply plans what is left")
            _apply_one(run, config.clusters[run.name], config, record, streams, color=color)
        if rollout and any(r.status == "failed" for r in members):
            rest = [r.name for r in runs if r.wave > wave]
            if rest:
                streams.warn(f"Rollout stopped after wave {wave}: {', '.join(rest)} not started.")
            return


def _apply_one(run: ClusterRun, entry: ClusterEntry, config: ProjectConfig, record: FleetRecorder,
               streams: Streams, *, color: bool) -> None:
    assert run.plan is not None
    if not run.plan.has_changes:
        run.status = "no changes"
        return
    streams.print(f"== applying {terminal(run.name)} ==")
    journal = run.journal = Journal(run.plan)
    run.status = "in progress"
    record.progress()
    try:
        with open_cluster(Target.of_cluster(entry).within(config.max_input_bytes)) as cluster:
            ident = cluster.identity()
            if ident.cluster_id != run.plan.cluster.id:
                raise KqplanError(f"{run.name} is now cluster {ident.cluster_id}, not {run.plan.cluster.id} "
                                  "as planned: not applied")
            result = apply(cluster, run.plan, journal=journal)
    except KqplanError as exc:
        run.status, run.error = "failed", exc.message
        run.report = journal.report(RunStatus.FAILED, exc.message) if journal.batches else None
        run.journal = None
        record.progress()
        streams.warn(f"{terminal(run.name)}: {terminal(exc.message)}")
        return
    run.report, run.journal = result, None
    run.status = "applied" if result.ok else "failed"
    record.progress()
    streams.print(render_apply(result, color=color), end="")


def _finish(runs: Sequence[ClusterRun], record: FleetRecorder, status: RunStatus, streams: Streams) -> int:
    counts = {s: sum(r.status == s for r in runs) for s in ("applied", "no changes", "failed", "not started")}
    ok = record.finish(status)
    streams.print("Fleet apply " + ("complete" if ok else "incomplete") + ": "
                  + ", ".join(f"{n} {s}" for s, n in counts.items() if n) + ".")
    return ExitCode.OK if ok else ExitCode.ERROR
