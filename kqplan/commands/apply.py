"""``kqplan apply``: make the cluster match (DESIGN §3.5), from manifests or a saved plan."""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

from kqplan.apply.protocol import apply, check_stale
from kqplan.commands.plan import check_writable
from kqplan.config.model import ClusterEntry, ProjectConfig
from kqplan.console import Streams
from kqplan.core.cluster import Cluster
from kqplan.core.desired import DesiredState
from kqplan.core.errors import ExitCode, KqplanError
from kqplan.core.plan import ClusterRef, Plan
from kqplan.core.report import ApplyReport
from kqplan.files import DEFAULT_INPUT_LIMIT, read_bounded, write_atomically
from kqplan.pipeline.guarded import (
    DEFAULT_GUARDRAILS,
    Guardrails,
    check_inventory_id,
    compute_plan,
    describing_ahead,
    guardrail_problem,
    load_checked,
)
from kqplan.pipeline.inputs import manifest_paths
from kqplan.pipeline.target import Target, open_cluster
from kqplan.planfile.codec import loads_plan
from kqplan.render.apply import render_apply, report_to_json
from kqplan.render.escape import terminal
from kqplan.render.text import render_text

CONFIRM_WORD = "yes"


def read_plan(path: Path, *, limit: int = DEFAULT_INPUT_LIMIT) -> Plan:
    """``apply --plan FILE``: a regular file of at most ``limit`` bytes (``[limits] max-input-mib``)."""
    return loads_plan(read_bounded(path, what="saved plan", limit=limit), source=str(path))


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
        answer = input()
    except EOFError:  # Ctrl-D: no answer is not a yes
        streams.print("")
        return False
    return answer.strip() == CONFIRM_WORD


def apply_command(paths: Sequence[Path], plan_file: Path | None, target: Target,
                  config: ProjectConfig, *, auto_approve: bool, report: Path | None,
                  streams: Streams, cluster_entry: ClusterEntry | None = None,
                  guardrails: Guardrails = DEFAULT_GUARDRAILS, color: bool = False,
                  as_json: bool = False) -> int:
    """``as_json``: the report (the ``--report`` document) is stdout, the plan goes to stderr."""
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
    with ExitStack() as stack:
        ahead = describing_ahead(target, stack) if plan_file is None else None
        desired = load_checked(paths, config, streams) if plan_file is None else None
        cluster = ahead if ahead is not None else stack.enter_context(open_cluster(target))
        return _apply(cluster, desired, plan_file, config, auto_approve=auto_approve, report=report,
                      streams=streams, cluster_entry=cluster_entry, guardrails=guardrails, color=color,
                      as_json=as_json)


def _apply(cluster: Cluster, desired: DesiredState | None, plan_file: Path | None, config: ProjectConfig, *,
           auto_approve: bool, report: Path | None, streams: Streams, cluster_entry: ClusterEntry | None,
           guardrails: Guardrails, color: bool, as_json: bool) -> int:
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
            check_stale(plan, cluster.describe(), ident.cluster_id)
            plan = _retarget(plan, ClusterRef(ident.cluster_id, ident.address, ident.version, ident.mode))
        # the guardrails again, saved plans included: a plan may have been made with looser flags
        refused = guardrail_problem(plan, desired, config, guardrails)
        if refused is not None:
            raise refused
        (streams.warn if as_json else streams.print)(render_text(plan, color=color and not as_json), end="")
        if not plan.has_changes:
            result = ApplyReport(plan.cluster, (), False, 0, {"describe": 0, "alter_validate": 0, "alter": 0},
                                 plan.unchanged)
            _finish(result, report, as_json, streams, quiet=True)
            return ExitCode.OK
        if not as_json:
            streams.print("")
        if not confirm(plan, streams, auto_approve=auto_approve):
            streams.print("Apply cancelled.")
            return ExitCode.ERROR
        result = apply(cluster, plan, progress=progress)
    _finish(result, report, as_json, streams, color=color)
    return ExitCode.OK if result.ok else ExitCode.ERROR


def _finish(result: ApplyReport, report: Path | None, as_json: bool, streams: Streams, *,
            quiet: bool = False, color: bool = False) -> None:
    """The report file (always, even with nothing to do: an old one must not stand), and stdout."""
    document = json.dumps(report_to_json(result), indent=2, ensure_ascii=False) + "\n"
    if report is not None:
        write_atomically(report, document)
    if as_json:
        streams.print(document, end="")
    elif not quiet:
        streams.print(render_apply(result, color=color), end="")


def _retarget(plan: Plan, cluster: ClusterRef) -> Plan:
    """Show where the saved plan is being applied now (same id, maybe another address)."""
    from dataclasses import replace

    return replace(plan, cluster=cluster)
