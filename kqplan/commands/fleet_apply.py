"""``kqplan fleet apply``: every selected inventory cluster's plan, applied with the single-cluster
protocol (validateOnly, alter, verify, an outcome per entity). With ``--rollout``, cluster by
cluster in the order of ``[rollout] waves``: a wave starts only when every cluster of the one
before applied and verified cleanly; the first wave that does not stops the rollout, and the
clusters after it are ``not started``.

Every cluster is planned first (all of them, a few at a time): one that cannot be planned (its
manifests, its guard, a guardrail) stops everything before any alter. The plans are shown, and
approved once. ``--report FILE`` says, per cluster, what was applied and what was not started.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kqplan.apply.protocol import Journal, apply
from kqplan.config.model import ClusterEntry, ProjectConfig
from kqplan.console import Streams
from kqplan.core.errors import ExitCode, KqplanError
from kqplan.core.plan import Plan
from kqplan.core.report import ApplyReport, RunStatus
from kqplan.files import check_writable, write_atomically
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
    plan: Plan
    status: str = "not started"
    """``applied``, ``no changes``, ``failed``, ``not started``."""
    report: ApplyReport | None = None
    error: str | None = None


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
    entries = select(config, names)
    waves = waves_of(config, entries, rollout)
    if not auto_approve and not streams.interactive:
        raise KqplanError("refusing to apply without confirmation: not running on a terminal",
                          hint="review `kqplan fleet plan` and pass --auto-approve")
    ordered = [e for wave in waves for e in wave]
    with streams.progress() as progress:
        loaded = load(ordered, config)
        planned = each(ordered, lambda e: plan(e, config, loaded[e.name])[0], progress=progress,
                       label="Planning")
    failed = {o.cluster: o.error for o in planned if o.error is not None}
    if failed:
        shown = "; ".join(f"{name}: {error}" for name, error in failed.items())
        raise KqplanError(f"fleet apply stops before any change: {len(failed)} cluster(s) could not be "
                          f"planned ({shown})", hint="kqplan fleet plan shows each cluster's plan or error")
    plans = {o.cluster: o.value for o in planned if o.value is not None}
    runs = [ClusterRun(e.name, i, plans[e.name]) for i, wave in enumerate(waves, 1) for e in wave]
    for run in runs:
        streams.print(f"== {terminal(run.name)}" + (f" (wave {run.wave} of {len(waves)})" if rollout else "")
                      + " ==")
        streams.print(render_text(run.plan, color=color), end="")
    if not any(r.plan.has_changes for r in runs):
        for run in runs:
            run.status = "no changes"
        return _finish(runs, waves, rollout, report, streams)
    if not auto_approve and not _confirm(streams, len(runs), len(waves) if rollout else 0):
        streams.print("Apply cancelled.")
        return ExitCode.ERROR
    _apply_waves(runs, config, rollout, streams, color)
    return _finish(runs, waves, rollout, report, streams)


def _confirm(streams: Streams, clusters: int, waves: int) -> bool:
    how = f" in {waves} waves" if waves else ""
    streams.print(f"\nDo you want to apply these changes to {clusters} clusters{how}?\n"
                  f"  Only '{CONFIRM_WORD}' will be accepted to approve.\n")
    streams.print("  Enter a value: ", end="")
    streams.out.flush()
    try:
        return input().strip() == CONFIRM_WORD
    except EOFError:
        return False


def _apply_waves(runs: list[ClusterRun], config: ProjectConfig, rollout: bool, streams: Streams,
                 color: bool) -> None:
    """Wave after wave; with ``rollout``, the first wave with a cluster not cleanly applied is the
    last one started."""
    for wave in sorted({r.wave for r in runs}):
        members = [r for r in runs if r.wave == wave]
        for run in members:
            _apply_one(run, config.clusters[run.name], config, streams, color)
        if rollout and any(r.status == "failed" for r in members):
            rest = [r.name for r in runs if r.wave > wave]
            if rest:
                streams.warn(f"Rollout stopped after wave {wave}: {', '.join(rest)} not started.")
            return


def _apply_one(run: ClusterRun, entry: ClusterEntry, config: ProjectConfig, streams: Streams,
               color: bool) -> None:
    if not run.plan.has_changes:
        run.status = "no changes"
        return
    streams.print(f"== applying {terminal(run.name)} ==")
    journal = Journal(run.plan)
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
        streams.warn(f"{terminal(run.name)}: {terminal(exc.message)}")
        return
    run.report = result
    run.status = "applied" if result.ok else "failed"
    streams.print(render_apply(result, color=color), end="")


def _finish(runs: Sequence[ClusterRun], waves: Sequence[Sequence[ClusterEntry]], rollout: bool,
            report: Path | None, streams: Streams) -> int:
    ok = all(r.status in ("applied", "no changes") for r in runs)
    counts = {s: sum(r.status == s for r in runs) for s in ("applied", "no changes", "failed", "not started")}
    streams.print("Fleet apply " + ("complete" if ok else "incomplete") + ": "
                  + ", ".join(f"{n} {s}" for s, n in counts.items() if n) + ".")
    if report is not None:
        document: dict[str, Any] = {
            "ok": ok, "rollout": rollout, "waves": [[e.name for e in wave] for wave in waves],
            "clusters": [{"name": r.name, "wave": r.wave, "status": r.status, "error": r.error,
                          "report": report_to_json(r.report) if r.report is not None else None}
                         for r in runs]}
        write_atomically(report, json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    return ExitCode.OK if ok else ExitCode.ERROR
