"""validate, plan, apply: manifests checked offline, planned against a cluster, applied."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kqplan.cli.app import (
    app,
    choice,
    cluster_entry,
    console_streams,
    global_options,
    project_config,
    use_color,
    use_config,
)
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
    refuse_unused,
    target_of,
)
from kqplan.core.errors import KqplanError

if TYPE_CHECKING:
    from kqplan.commands.forecast import UsageOptions
    from kqplan.core.diagnostics import Diagnostic


_USAGE = "Usage: who the plan would throttle"
UsageOpt = Annotated[list[str] | None, typer.Option(
    "--usage", metavar="PATH", rich_help_panel=_USAGE,
    help="Usage files or directories (CSV, JSON lines, Parquet: kqplan schema usage; kqplan fleet usage "
         "writes them): show which quota buckets the plan would throttle.")]
UsageFromMetricsOpt = Annotated[bool, typer.Option(
    "--usage-from-metrics", rich_help_panel=_USAGE,
    help="The usage from the brokers' metrics in Prometheus (--prometheus, or kqplan.toml's [metrics]).")]
SinceOpt = Annotated[str | None, typer.Option(
    "--since", metavar="DURATION", rich_help_panel=_USAGE,
    help="--usage-from-metrics: the window, the last 7d, 24h, ... (default: 7d)")]
StepOpt = Annotated[str | None, typer.Option(
    "--step", metavar="DURATION", rich_help_panel=_USAGE,
    help="--usage-from-metrics: one usage point per step, at least the scrape interval (default: 60s).")]
StatOpt = Annotated[str, typer.Option(
    "--stat", metavar="STAT", rich_help_panel=_USAGE,
    help="A bucket's usage: max | pNN (e.g. p99) over its windows.")]
FailOnThrottleOpt = Annotated[bool, typer.Option(
    "--fail-on-throttle", rich_help_panel=_USAGE,
    help="Exit 1 when the plan would newly throttle a bucket (with --usage or --usage-from-metrics).")]


@contextmanager
def config_first(problems: list[Diagnostic]) -> Iterator[None]:
    """A cluster or its layers missing from a kqplan.toml with problems: the file's problems are
    the error (they say why), not the missing cluster."""
    try:
        yield
    except KqplanError:
        if not problems:
            raise
        from kqplan.core.diagnostics import DiagnosticsError

        raise DiagnosticsError(problems) from None


@app.command()
def validate(
    paths: OptionalPathsArg = None,
    cluster: ClusterOpt = None,
    fmt: Annotated[str, typer.Option("--format", help="text | json | github", metavar="FORMAT")] = "text",
    strict: Annotated[bool, typer.Option("--strict", help="Warnings fail too.")] = False,
    related: Annotated[bool, typer.Option(
        "--related", help="Each PATH is a changed file (pre-commit): validate it with its manifest set "
        "(its inventory layers, else its directory); skip YAML that is no manifest.")] = False,
    config: ConfigOpt = None,
) -> int:
    """Check manifests offline; report every problem with file:line:column."""
    from kqplan.commands.validate import DiagnosticFormat
    from kqplan.commands.validate import validate as command
    from kqplan.pipeline.inputs import declared_profile, manifest_paths

    use_config(config)

    def body() -> int:
        given = paths or []
        problems: list[Diagnostic] = []  # kqplan.toml's, reported with the manifests' in one run
        project = project_config(given, problems)
        with config_first(problems):
            entry = cluster_entry(cluster, project)
            found = manifest_paths(given, entry, missing_ok=True)  # a missing one is KQP191 here
        return command(found, project,
                       fmt=choice(DiagnosticFormat, fmt, "--format"), strict=strict,
                       streams=console_streams(), related=related, profile=declared_profile(entry),
                       config_problems=problems, brokers=entry.brokers if entry is not None else None)

    return run(body, json_errors=fmt == "json")


@app.command()
def plan(
    paths: OptionalPathsArg = None,
    cluster: ClusterOpt = None,
    state: StateOpt = None,
    bootstrap_server: BootstrapOpt = None,
    command_config: CommandConfigOpt = None,
    sandbox: SandboxOpt = None,
    timeout: TimeoutOpt = None,
    fmt: Annotated[str, typer.Option(
        "--format", help="text | markdown | json | github", metavar="FORMAT")] = "text",
    out: Annotated[Path | None, typer.Option(
        "--out", help="Save the plan (JSON) for `kqplan apply --plan`.", dir_okay=False,
        metavar="PLAN.json")] = None,
    detailed_exitcode: Annotated[bool, typer.Option(
        "--detailed-exitcode", help="Exit 2 when there are changes (0: none, 1: error).")] = False,
    principals: Annotated[Path | None, typer.Option(
        "--principals", dir_okay=False, metavar="FILE",
        help="CSV or JSON lines of user,client-id pairs: show whose effective quota changes.")] = None,
    allow_mass_delete: Annotated[bool, typer.Option(
        "--allow-mass-delete", help="Allow more deletions than [policy] max-delete(-percent).")] = False,
    fail_on_unmanaged: Annotated[bool, typer.Option(
        "--fail-on-unmanaged",
        help="Exit 1 when cluster entities are outside every manifest and ownership scope.")] = False,
    markdown_limit: Annotated[int, typer.Option(
        "--markdown-limit", metavar="CHARS", min=2000,
        help="--format markdown stays under this size (GitHub refuses comments over 65536).")] = 60_000,
    usage: UsageOpt = None,
    usage_from_metrics: UsageFromMetricsOpt = False,
    since: SinceOpt = None,
    step: StepOpt = None,
    stat: StatOpt = "max",
    prometheus: PrometheusOpt = None,
    selector: SelectorOpt = None,
    metric: MetricOpt = None,
    prometheus_headers: PrometheusHeadersOpt = None,
    fail_on_throttle: FailOnThrottleOpt = False,
    config: ConfigOpt = None,
) -> int:
    """Show what apply would change: manifests against one describe of the cluster."""
    from kqplan.commands.plan import plan as command
    from kqplan.config.model import MISSING_LAYER
    from kqplan.pipeline.guarded import Guardrails
    from kqplan.render.formats import Format

    use_config(config)
    github = fmt == "github"

    def body() -> int:
        given = paths or []
        problems: list[Diagnostic] = []
        project = project_config(given, problems)
        # another cluster's layer not written yet is validate's to report; this one's, manifest_paths'
        problems = [p for p in problems if p.code != MISSING_LAYER]
        if problems:  # refused before any cluster is asked, with the manifests' problems beside
            from kqplan.pipeline.guarded import config_refusal
            from kqplan.pipeline.inputs import manifest_paths

            with config_first(problems):
                found = manifest_paths(given, cluster_entry(cluster, project))
            raise config_refusal(problems, found, project)
        return command(
            given, target_of(state, bootstrap_server, command_config, sandbox, timeout), project,
            fmt=Format.MARKDOWN if github else choice(Format, fmt, "--format"), out=out,
            detailed_exitcode=detailed_exitcode, streams=console_streams(), principals=principals,
            cluster=cluster_entry(cluster, project),
            guardrails=Guardrails(allow_mass_delete, fail_on_unmanaged), color=use_color(),
            config_flag=global_options["config"], github=github, markdown_limit=markdown_limit,
            usage=usage_options(usage, usage_from_metrics, since=since, step=step, stat=stat,
                                source=(prometheus, selector, prometheus_headers, metric),
                                fail_on_throttle=fail_on_throttle),
            fail_on_throttle=fail_on_throttle)

    return run(body, json_errors=fmt == "json")


def usage_options(paths: list[str] | None, from_metrics: bool, *, since: str | None, step: str | None,
                  stat: str, source: tuple[str | None, str | None, Path | None, list[str] | None],
                  fail_on_throttle: bool = False) -> UsageOptions | None:
    """``--usage`` / ``--usage-from-metrics`` and their settings, checked; None when neither is
    given (the forecast's modules, ~0.07 s of imports, are then not imported)."""
    from kqplan.fleet.samples import parse_stat

    if fail_on_throttle and not paths and not from_metrics:
        raise KqplanError("--fail-on-throttle needs usage to judge the plan by",
                          hint="add --usage FILES or --usage-from-metrics (Prometheus)")
    if paths and from_metrics:
        raise KqplanError("--usage and --usage-from-metrics both given: kqplan reads one usage",
                          hint="keep --usage FILES, or --usage-from-metrics (Prometheus)")
    prometheus, selector, headers, metric = source
    refuse_unused("--usage-from-metrics", from_metrics, {
        "--since": since, "--step": step, "--prometheus": prometheus, "--selector": selector,
        "--prometheus-headers": headers, "--metric": metric})
    q = parse_stat(stat)
    if not paths and not from_metrics:
        return None
    from kqplan.commands.forecast import UsageOptions
    from kqplan.commands.throttled import window_of
    from kqplan.core.units import duration_option
    from kqplan.fleet.usage import local_paths
    from kqplan.metrics.source import PrometheusSource

    if from_metrics:
        window = window_of(duration_option(since or "7d", "--since"),
                           duration_option(step or "60s", "--step"))
        return UsageOptions(metrics=PrometheusSource(prometheus, selector, headers, tuple(metric or ())),
                            window=window, q=q)
    return UsageOptions(paths=tuple(local_paths(paths or [])), q=q)


class _ApplyFormat(StrEnum):
    TEXT = "text"
    JSON = "json"


@app.command()
def apply(
    paths: Annotated[list[Path] | None, typer.Argument(
        help="Manifest files or directories (or use --plan, or --cluster's manifests).",
        show_default=False, metavar="[PATH...]")] = None,
    plan_file: Annotated[Path | None, typer.Option(
        "--plan", help="Apply exactly this saved plan (refused if stale).", dir_okay=False,
        metavar="PLAN.json")] = None,
    cluster: ClusterOpt = None,
    state: StateOpt = None,
    bootstrap_server: BootstrapOpt = None,
    command_config: CommandConfigOpt = None,
    sandbox: SandboxOpt = None,
    timeout: TimeoutOpt = None,
    auto_approve: Annotated[bool, typer.Option(
        "--auto-approve", help="Do not ask for confirmation (required without a terminal).")] = False,
    report: Annotated[Path | None, typer.Option(
        "--report", help="Write the per-entity results as JSON.", dir_okay=False,
        metavar="REPORT.json")] = None,
    allow_mass_delete: Annotated[bool, typer.Option(
        "--allow-mass-delete", help="Allow more deletions than [policy] max-delete(-percent).")] = False,
    fmt: Annotated[str, typer.Option(
        "--format", metavar="FORMAT",
        help="text | json (the report on stdout; needs --auto-approve)")] = "text",
    verify_enforcement: Annotated[str | None, typer.Option(
        "--verify-enforcement", metavar="[=WINDOW]",
        help="After the alter, watch the brokers' metrics (--prometheus, or kqplan.toml's [metrics]) up to "
             "WINDOW (default: 2m, or longer when the brokers' sensors remember longer) until each "
             "changed bucket is judged on Kafka's own measurements: confirmed, not yet observed or "
             "contradicted (exit 1).")] = None,
    prometheus: PrometheusOpt = None,
    selector: SelectorOpt = None,
    metric: MetricOpt = None,
    prometheus_headers: PrometheusHeadersOpt = None,
    config: ConfigOpt = None,
) -> int:
    """Make the cluster match: validateOnly pre-flight, alter, verify, per-entity report."""
    from kqplan.commands.apply import Enforcement, apply_command
    from kqplan.commands.report import Recorder
    from kqplan.console import Streams
    from kqplan.files import check_writable
    from kqplan.pipeline.guarded import Guardrails

    use_config(config)

    def body() -> int:
        if report is not None:
            check_writable(report, "the report")
        # an option or the project refused before the apply's own recorder begins: this run's
        # `failed` report still replaces an earlier run's
        with Recorder(report, "(not chosen yet)", False, Streams()) as early:
            enforcement = None
            refuse_unused("--verify-enforcement", verify_enforcement is not None, {
                "--prometheus": prometheus, "--selector": selector,
                "--prometheus-headers": prometheus_headers, "--metric": metric})
            if verify_enforcement is not None:
                from kqplan.commands.enforcement import check_window  # only then: ~0.09 s of imports
                from kqplan.metrics.source import PrometheusSource

                source = PrometheusSource(prometheus, selector, prometheus_headers, tuple(metric or ()))
                window = check_window(verify_enforcement)
                enforcement = Enforcement(source, window, verify_enforcement or None)
            manifest_paths = paths or []
            project = project_config(manifest_paths)
            target = target_of(state, bootstrap_server, command_config, sandbox, timeout)
            code = apply_command(
                manifest_paths, plan_file, target, project, auto_approve=auto_approve, report=report,
                streams=console_streams(),
                cluster_entry=cluster_entry(cluster, project), guardrails=Guardrails(allow_mass_delete),
                color=use_color(), as_json=choice(_ApplyFormat, fmt, "--format") is _ApplyFormat.JSON,
                enforcement=enforcement)
            early.done = True  # apply_command's own recorder wrote this run's report
            return code

    return run(body, json_errors=fmt == "json")
