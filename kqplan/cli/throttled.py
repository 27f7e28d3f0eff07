"""throttled: the quota buckets Kafka throttled, from Prometheus, with the quota and the manifest
entry behind each."""

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
    MetricOpt,
    OptionalPathsArg,
    PrometheusHeadersOpt,
    PrometheusOpt,
    SandboxOpt,
    SelectorOpt,
    StateOpt,
    TimeoutOpt,
    target_of,
)


@app.command()
def throttled(
    paths: OptionalPathsArg = None,
    cluster: ClusterOpt = None,
    state: StateOpt = None,
    bootstrap_server: BootstrapOpt = None,
    command_config: CommandConfigOpt = None,
    sandbox: SandboxOpt = None,
    timeout: TimeoutOpt = None,
    prometheus: PrometheusOpt = None,
    selector: SelectorOpt = None,
    since: Annotated[str, typer.Option(
        "--since", metavar="DURATION", help="The window: the last 15m, 2h, ...")] = "15m",
    step: Annotated[str | None, typer.Option(
        "--step", metavar="DURATION",
        help="Resolution of the window (default 1m, at least Prometheus's scrape interval).")] = None,
    metric: MetricOpt = None,
    headers: PrometheusHeadersOpt = None,
    fmt: Annotated[str, typer.Option("--format", help="text | markdown | json", metavar="FORMAT")] = "text",
    detailed_exitcode: Annotated[bool, typer.Option(
        "--detailed-exitcode", help="Exit 2 when a bucket was throttled (0: none, 1: error).")] = False,
    config: ConfigOpt = None,
) -> int:
    """List the quota buckets Kafka throttled (throttle-time > 0), worst first, with their quota."""
    from kqplan.commands.throttled import ThrottledFormat, throttled_command, window_of
    from kqplan.metrics.source import PrometheusSource

    use_config(config)

    def body() -> int:
        chosen = choice(ThrottledFormat, fmt, "--format")
        target = target_of(state, bootstrap_server, command_config, sandbox, timeout)
        from kqplan.core.units import duration_option

        window = window_of(duration_option(since, "--since"),
                           duration_option(step, "--step") if step is not None else None)
        given = paths or []
        project = project_config(given)
        return throttled_command(
            given, target, project, PrometheusSource(prometheus, selector, headers, tuple(metric or ())),
            window=window, fmt=chosen, detailed_exitcode=detailed_exitcode,
            streams=console_streams(), cluster=cluster_entry(cluster, project))

    return run(body, json_errors=fmt == "json")
