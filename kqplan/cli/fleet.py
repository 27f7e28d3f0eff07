"""fleet: the sub-app for every cluster of the kqplan.toml inventory at once, and its commands."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import typer

from kqplan.cli.app import app, choice, console_streams, project_config, use_config
from kqplan.cli.boundary import run
from kqplan.cli.options import (
    ConfigOpt,
    MetricOpt,
    PrometheusHeadersOpt,
    PrometheusOpt,
    TimeoutOpt,
    start_timeout,
)

# -- fleet (kqplan/commands/fleet.py defines the sub-app) ------------------------------------------
# [anchor: fleet commands]
fleet_app = typer.Typer(help="Every cluster of the kqplan.toml inventory at once (local or Spark engine).",
                        no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]})
app.add_typer(fleet_app, name="fleet")
FleetClustersOpt = Annotated[list[str] | None, typer.Option(
    "--cluster", metavar="NAME", help="Only this inventory cluster (repeatable; default: all).")]
FleetEngineOpt = Annotated[str, typer.Option("--engine", metavar="ENGINE", help="local | spark")]
FleetFormatOpt = Annotated[str, typer.Option("--format", metavar="FORMAT", help="text | markdown | json")]
SparkMasterOpt = Annotated[str | None, typer.Option(
    "--spark-master", metavar="URL", help="Spark master for --engine spark (default local[*]).")]
UsageOpt = Annotated[list[str] | None, typer.Option(
    "--usage", metavar="PATH|URI", help=(
        "Usage samples: CSV, JSON lines or Parquet files or directories (repeatable); with --engine spark "
        "also URIs Spark reads (file://, s3a://, gs://, abfss://, hdfs://)."))]
UsageTableOpt = Annotated[list[str] | None, typer.Option(
    "--usage-table", metavar="NAME", help="With --engine spark: a table of Spark's catalog (repeatable).")]
SparkRemoteOpt = Annotated[str | None, typer.Option(
    "--spark-remote", metavar="sc://HOST:PORT", help="A Spark Connect server instead.")]
AllowUnknownOpt = Annotated[bool, typer.Option(
    "--allow-unknown-clusters",
    help="Leave out (with a warning) usage rows of clusters the inventory does not list; default: an error.")]


@fleet_app.command("snapshot")
def fleet_snapshot(
    out: Annotated[str, typer.Option("--out", metavar="DIR", help="Write DIR/<cluster>.json.")],
    cluster: FleetClustersOpt = None,
    timeout: TimeoutOpt = None,
    config: ConfigOpt = None,
) -> int:
    """One describe per cluster, written as snapshots; exit 1 if any cluster failed."""
    from kqplan.commands.fleet import local_dir, snapshot_command

    use_config(config)
    return run(_timed(timeout, lambda: snapshot_command(
        project_config(), cluster or [], out=local_dir(out, "fleet snapshot writes snapshot files"),
        streams=console_streams())))


@fleet_app.command("impact")
def fleet_impact(
    out: Annotated[str, typer.Option("--out", metavar="DIR|URI", help=(
        "Write impact.parquet, unused.parquet and charts; with --engine spark a URI, where Spark writes "
        "the tables itself."))],
    usage: UsageOpt = None,
    cluster: FleetClustersOpt = None,
    stat: Annotated[str, typer.Option("--stat", metavar="STAT", help="max | pNN (e.g. p99)")] = "max",
    window: Annotated[float, typer.Option(
        "--window", metavar="SECONDS",
        help="A bucket's usage: each member's mean per window of this many seconds (by ts), summed.")] = 60.0,
    engine: FleetEngineOpt = "local",
    fmt: FleetFormatOpt = "text",
    fail_on_throttle: Annotated[bool, typer.Option(
        "--fail-on-throttle",
        help="Exit 1 when a principal's bucket is over its quota after the plan, not before.")] = False,
    spark_master: SparkMasterOpt = None,
    spark_remote: SparkRemoteOpt = None,
    usage_table: UsageTableOpt = None,
    allow_unknown_clusters: AllowUnknownOpt = False,
    timeout: TimeoutOpt = None,
    config: ConfigOpt = None,
) -> int:
    """Which observed clients each cluster's plan would throttle (per quota bucket, as Kafka shares
    a quota between connections), and which quotas nobody hits."""
    from kqplan.commands.fleet import Engine, FleetFormat, impact_command

    use_config(config)
    return run(_timed(timeout, lambda: impact_command(
        project_config(), cluster or [], usage=usage or [], tables=usage_table or [], stat=stat,
        window=window,
        engine=choice(Engine, engine, "--engine"),
        out=out, fmt=choice(FleetFormat, fmt, "--format"), fail_on_throttle=fail_on_throttle,
        streams=console_streams(), spark_master=spark_master, spark_remote=spark_remote,
        allow_unknown_clusters=allow_unknown_clusters)), json_errors=fmt == "json")


@fleet_app.command("plan")
def fleet_plan(
    cluster: FleetClustersOpt = None,
    engine: FleetEngineOpt = "local",
    out: Annotated[str | None, typer.Option(
        "--out", metavar="DIR|URI", help=(
            "Write DIR/changes.parquet (one row per changed key); with --engine spark a URI, where Spark "
            "writes it itself."))] = None,
    fmt: FleetFormatOpt = "text",
    detailed_exitcode: Annotated[bool, typer.Option(
        "--detailed-exitcode", help="Exit 2 when any cluster would change (0: none, 1: error).")] = False,
    spark_master: SparkMasterOpt = None,
    spark_remote: SparkRemoteOpt = None,
    timeout: TimeoutOpt = None,
    config: ConfigOpt = None,
) -> int:
    """Every cluster's plan with kqplan plan's semantics: a summary and the changed keys as a table."""
    from kqplan.commands.fleet import Engine, FleetFormat, plan_command

    use_config(config)
    return run(_timed(timeout, lambda: plan_command(
        project_config(), cluster or [], engine=choice(Engine, engine, "--engine"), out=out,
        fmt=choice(FleetFormat, fmt, "--format"), detailed_exitcode=detailed_exitcode,
        streams=console_streams(), spark_master=spark_master, spark_remote=spark_remote)),
        json_errors=fmt == "json")


@fleet_app.command("rightsize")
def fleet_rightsize(
    out: Annotated[str, typer.Option("--out", metavar="DIR", help=(
        "Write DIR/<cluster>/rightsize.yaml, DIR/proposals.parquet and DIR/proposals.md."))],
    usage: UsageOpt = None,
    cluster: FleetClustersOpt = None,
    stat: Annotated[str, typer.Option("--stat", metavar="STAT", help="max | pNN (e.g. p99)")] = "p99",
    headroom: Annotated[float, typer.Option(
        "--headroom", metavar="X", help="Multiplies the statistic before rounding up (at least 1).")] = 1.5,
    tolerance: Annotated[float, typer.Option("--tolerance", metavar="T", help=(
        "Keep a current quota that covers the proposal and is at most (1+T) x it."))] = 0.5,
    minimum: Annotated[list[str] | None, typer.Option(
        "--min", metavar="KEY=VALUE",
        help="Floor for a key, e.g. producer_byte_rate=1MiB (repeatable).")] = None,
    label: Annotated[list[str] | None, typer.Option(
        "--label", metavar="KEY=VALUE", help="A label of the written manifests (repeatable).")] = None,
    window: Annotated[float, typer.Option(
        "--window", metavar="SECONDS",
        help="A bucket's usage: each member's mean per window of this many seconds (by ts), summed.")] = 60.0,
    min_samples: Annotated[int | None, typer.Option(
        "--min-samples", metavar="N", help=(
            "A lowering needs N windows of the bucket's usage (without ts: N samples); fewer: the quota is "
            "held, and the summary says why. Default: one day of windows (86400 / --window)."))] = None,
    engine: FleetEngineOpt = "local",
    fmt: FleetFormatOpt = "text",
    spark_master: SparkMasterOpt = None,
    spark_remote: SparkRemoteOpt = None,
    usage_table: UsageTableOpt = None,
    allow_unknown_clusters: AllowUnknownOpt = False,
    timeout: TimeoutOpt = None,
    config: ConfigOpt = None,
) -> int:
    """Proposed quotas from observed usage, per quota bucket (the bucket's usage x headroom, rounded up),
    as manifests per cluster."""
    from kqplan.commands.fleet import Engine, FleetFormat, rightsize_command

    use_config(config)
    return run(_timed(timeout, lambda: rightsize_command(
        project_config(), cluster or [], usage=usage or [], tables=usage_table or [], stat=stat,
        headroom=headroom, tolerance=tolerance,
        mins=minimum or [], labels=label or [], window=window, engine=choice(Engine, engine, "--engine"),
        out=out, fmt=choice(FleetFormat, fmt, "--format"), streams=console_streams(),
        spark_master=spark_master, spark_remote=spark_remote, min_samples=min_samples,
        allow_unknown_clusters=allow_unknown_clusters)), json_errors=fmt == "json")


def _timed(timeout: str | None, call: Callable[[], int]) -> Callable[[], int]:
    """``--timeout``: the command's clock starts inside the error boundary (a bad duration is an
    error like any other). It bounds every wait on a cluster; Spark's own work is not cut."""
    def body() -> int:
        start_timeout(timeout)
        return call()
    return body


@fleet_app.command("usage")
def fleet_usage(
    out: Annotated[str, typer.Option("--out", metavar="DIR", help="Write DIR/<cluster>.parquet.")],
    prometheus: PrometheusOpt = None,
    selector: Annotated[str | None, typer.Option(
        "--selector", metavar="'{LABEL=\"VALUE\",...}'",
        help="Label matchers that pick a cluster's series; {cluster} is replaced by each inventory name, "
             "e.g. '{kafka_cluster=\"{cluster}\"}' (required with several clusters).")] = None,
    since: Annotated[str, typer.Option(
        "--since", metavar="DURATION", help="The window: the last 7d, 24h, ...")] = "7d",
    step: Annotated[str, typer.Option(
        "--step", metavar="DURATION", help="One row per bucket per step (its mean; at least the scrape "
        "interval).")] = "60s",
    metric: MetricOpt = None,
    headers: PrometheusHeadersOpt = None,
    cluster: FleetClustersOpt = None,
    timeout: TimeoutOpt = None,
    config: ConfigOpt = None,
) -> int:
    """Each cluster's per-bucket usage over a window, from the brokers' metrics in Prometheus, as usage
    Parquet for fleet impact and fleet rightsize; exit 1 if any cluster failed."""
    from kqplan.commands.fleet import local_dir
    from kqplan.commands.fleet_usage import usage_command
    from kqplan.commands.throttled import window_of
    from kqplan.core.units import duration_option
    from kqplan.metrics.source import PrometheusSource

    use_config(config)

    def body() -> int:
        local = local_dir(out, "fleet usage writes Parquet files")
        window = window_of(duration_option(since, "--since"), duration_option(step, "--step"))
        return usage_command(project_config(), cluster or [],
                             source=PrometheusSource(prometheus, selector, headers, tuple(metric or ())),
                             window=window, out=local, streams=console_streams())

    return run(_timed(timeout, body))
