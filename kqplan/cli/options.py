"""The option and argument types several commands share, and the target they describe."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kqplan.core.errors import KqplanError

if TYPE_CHECKING:
    from kqplan.pipeline.target import Target

PathsArg = Annotated[list[Path], typer.Argument(help="Manifest files or directories.",
                                                show_default=False, metavar="PATH...")]
OptionalPathsArg = Annotated[list[Path] | None, typer.Argument(
    help="Manifest files or directories (default: the --cluster's manifests).", show_default=False,
    metavar="[PATH...]")]
ClusterOpt = Annotated[str | None, typer.Option(
    "--cluster", metavar="NAME",
    help="A cluster of the kqplan.toml inventory: its manifests and target (explicit flags win).")]
ConfigOpt = Annotated[Path | None, typer.Option(
    "--config", dir_okay=False, metavar="FILE",
    help="Project config file (default: the nearest kqplan.toml).")]
StateOpt = Annotated[Path | None, typer.Option(
    "--state", help="Plan against a snapshot file instead of a live cluster.", dir_okay=False,
    metavar="SNAPSHOT.json")]
# The KQPLAN_* variables are read when the target opens (kqplan.pipeline.target), not by typer: an
# explicit --state or --sandbox must win over a bootstrap address exported in the shell.
BootstrapOpt = Annotated[str | None, typer.Option(
    "--bootstrap-server", help="Kafka bootstrap HOST:PORT [env: KQPLAN_BOOTSTRAP_SERVER].",
    metavar="HOST:PORT")]
CommandConfigOpt = Annotated[Path | None, typer.Option(
    "--command-config", dir_okay=False, metavar="FILE",
    help="Client properties (as for kafka-configs.sh): security.protocol, sasl.*, ssl.* "
         "[env: KQPLAN_COMMAND_CONFIG].")]
SandboxOpt = Annotated[str | None, typer.Option(
    "--sandbox", metavar="[SEED.json]",
    help="Run against an in-process sandbox broker, optionally seeded from a snapshot.")]

TimeoutOpt = Annotated[str | None, typer.Option(
    "--timeout", metavar="DURATION",
    help="Give up after this long in all (30s, 2m, 500ms): connections, requests, retries and "
         "verifying. Each request is also bounded by request.timeout.ms (--command-config).")]

NamesOpt = Annotated[str | None, typer.Option(
    "--names", help="Comma-separated TYPE=NAME pairs, e.g. user=alice,client-id=app.",
        metavar="TYPE=NAME,...")]
DefaultsOpt = Annotated[str | None, typer.Option(
    "--defaults", help="Comma-separated entity types whose default entity is meant, e.g. user.",
        metavar="TYPE,...")]


def target_of(state: Path | None, bootstrap: str | None, command_config: Path | None,
              sandbox: str | None, timeout: str | None = None) -> Target:
    """The target options as given; ``--timeout`` starts the command's clock now."""
    from kqplan.pipeline.target import Target

    start_timeout(timeout)

    return Target(state=state, bootstrap=bootstrap, command_config=command_config,
                  sandbox=sandbox is not None, sandbox_seed=Path(sandbox) if sandbox else None)


def start_timeout(timeout: str | None) -> None:
    """``--timeout DURATION``: the whole command's deadline, from now (none: no limit)."""
    from kqplan import deadline
    from kqplan.core.units import duration_option

    deadline.start(None if timeout is None else duration_option(timeout, "--timeout"))


# -- where the brokers' metrics are (throttled, fleet usage, plan --usage-from-metrics, apply) ----------

PrometheusOpt = Annotated[str | None, typer.Option(
    "--prometheus", metavar="URL",
    help="Prometheus's base URL, e.g. http://prometheus:9090 [env: KQPLAN_PROMETHEUS_URL; else "
         "kqplan.toml's [metrics]]; credentials: user:password@ in the URL, KQPLAN_PROMETHEUS_TOKEN "
         "(bearer) or --prometheus-headers.")]
SelectorOpt = Annotated[str | None, typer.Option(
    "--selector", metavar="'{LABEL=\"VALUE\",...}'",
    help="Label matchers that pick the cluster's series, e.g. '{kafka_cluster=\"prod\"}'; {cluster} is "
         "replaced by the inventory name.")]
MetricOpt = Annotated[list[str] | None, typer.Option(
    "--metric", metavar="ROLE.NAME=VALUE",
    help="Other metric names (repeatable): throttle.KEY=SELECTOR, usage.KEY=SELECTOR, "
         "label.user=LABEL (and label.client_id, label.broker).")]
PrometheusHeadersOpt = Annotated[Path | None, typer.Option(
    "--prometheus-headers", dir_okay=False, metavar="FILE",
    help="HTTP headers for Prometheus, 'Name: value' per line (Authorization, X-Scope-OrgID) "
         "[env: KQPLAN_PROMETHEUS_HEADERS].")]


def refuse_unused(needed: str, present: bool, flags: Mapping[str, object]) -> None:
    """Flags that only ``needed`` reads, given without it: refused rather than silently ignored."""
    if present:
        return
    used = [name for name, value in flags.items() if value not in (None, [], ())]
    if used:
        them = " and ".join(used) if len(used) <= 2 else ", ".join(used[:-1]) + " and " + used[-1]
        raise KqplanError(f"{them} {'is' if len(used) == 1 else 'are'} used only with {needed}, which was "
                          "not given", hint=f"add {needed}, or leave out {them}")
