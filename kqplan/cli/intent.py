"""test: the ``kind: QuotaTests`` documents judged on the manifests' desired state or a cluster."""

from __future__ import annotations

from typing import Annotated

import typer

from kqplan.cli.app import app, choice, cluster_entry, console_streams, project_config, use_config
from kqplan.cli.boundary import run
from kqplan.cli.options import (
    BootstrapOpt,
    ClusterOpt,
    CommandConfigOpt,
    ConfigOpt,
    OptionalPathsArg,
    SandboxOpt,
    StateOpt,
    TimeoutOpt,
    target_of,
)


@app.command(name="test")
def quota_tests(
    paths: OptionalPathsArg = None,
    cluster: ClusterOpt = None,
    offline: Annotated[bool, typer.Option(
        "--offline", help="Judge the manifests' desired state even with --cluster (its layers).")] = False,
    state: StateOpt = None,
    bootstrap_server: BootstrapOpt = None,
    command_config: CommandConfigOpt = None,
    sandbox: SandboxOpt = None,
    timeout: TimeoutOpt = None,
    fmt: Annotated[str, typer.Option("--format", help="text | json | github", metavar="FORMAT")] = "text",
    related: Annotated[bool, typer.Option(
        "--related", help="Each PATH is a changed file (pre-commit): judge the tests of its manifest set "
        "(its inventory layers, else its directory); skip YAML that is no manifest.")] = False,
    config: ConfigOpt = None,
) -> int:
    """Judge the quota tests (kind: QuotaTests) on the manifests, or on a cluster as it is."""
    from kqplan.commands.quota_tests import TestFormat, quota_tests_command
    from kqplan.pipeline.inputs import manifest_paths

    use_config(config)

    def body() -> int:
        given = paths or []
        project = project_config(given)
        entry = cluster_entry(cluster, project)
        target = target_of(state, bootstrap_server, command_config, sandbox, timeout)
        if offline and target.chosen():
            from kqplan.core.errors import KqplanError

            raise KqplanError(f"--offline judges the manifests; it cannot be combined with "
                              f"{target.chosen()[0]}", hint="drop --offline to judge the cluster")
        if not offline:
            target = target.or_cluster(entry)
        return quota_tests_command(given if related else manifest_paths(given, entry), target, project,
                                   fmt=choice(TestFormat, fmt, "--format"), streams=console_streams(),
                                   related=related, entry=None if offline else entry)

    return run(body, json_errors=fmt == "json")
