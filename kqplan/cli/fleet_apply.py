"""``kqplan fleet apply``: registered on the ``fleet`` sub-app (its own module: the command is
the fleet's only writer)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kqplan.cli.app import console_streams, project_config, use_color, use_config
from kqplan.cli.boundary import run
from kqplan.cli.fleet import FleetClustersOpt, fleet_app
from kqplan.cli.options import ConfigOpt, TimeoutOpt, start_timeout


@fleet_app.command("apply")
def fleet_apply(
    cluster: FleetClustersOpt = None,
    rollout: Annotated[bool, typer.Option(
        "--rollout", help="Cluster by cluster in the order of [rollout] waves; the first wave that "
        "does not apply cleanly stops the rollout.")] = False,
    auto_approve: Annotated[bool, typer.Option(
        "--auto-approve", help="Do not ask for confirmation (required without a terminal).")] = False,
    report: Annotated[Path | None, typer.Option(
        "--report", dir_okay=False, metavar="REPORT.json",
        help="What was applied where, and what was not started, per cluster (JSON): 'in progress' from "
        "the first alter, then this run's result however it ends.")] = None,
    timeout: TimeoutOpt = None,
    config: ConfigOpt = None,
) -> int:
    """Apply every cluster's plan (validateOnly, alter, verify, per entity), optionally in waves."""
    from kqplan.commands.fleet_apply import FleetRecorder, fleet_apply_command
    from kqplan.files import check_writable

    use_config(config)

    def body() -> int:
        if report is not None:
            check_writable(report, "the report")
        # --timeout or the project refused before the fleet's own recorder begins: this run's
        # `failed` report still replaces an earlier run's
        with FleetRecorder(report, rollout=rollout) as early:
            start_timeout(timeout)
            code = fleet_apply_command(project_config(), cluster or [], rollout=rollout,
                                       auto_approve=auto_approve, report=report, streams=console_streams(),
                                       color=use_color())
            early.done = True  # fleet_apply_command's own recorder wrote this run's report
            return code

    return run(body)
