"""sandbox: run the sandbox broker (kqplan/sandbox) in the foreground."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from kqplan.cli.app import app, console_streams
from kqplan.cli.boundary import run


class _SandboxFlavor(StrEnum):
    KRAFT = "kraft"
    ZK = "zk"


@app.command()
def sandbox(
    host: Annotated[str, typer.Option("--host", help="Address to listen on.", metavar="HOST")] = "127.0.0.1",
    port: Annotated[int, typer.Option(
        "--port", help="Port (0: pick a free one and print it).", min=0, max=65535,
        metavar="PORT")] = 9092,
    state: Annotated[Path | None, typer.Option(
        "--state", dir_okay=False,
        help="Snapshot file: loaded at start, rewritten atomically after every committed alter.",
            metavar="SNAPSHOT.json")] = None,
    seed: Annotated[Path | None, typer.Option(
        "--seed", dir_okay=False, help="Start from this snapshot (instead of --state's content).",
            metavar="SNAPSHOT.json")] = None,
    cluster_id: Annotated[str | None, typer.Option(
        "--cluster-id", help="Cluster id to report (default: the snapshot's, else a fixed one).",
            metavar="ID")] = None,
    request_log: Annotated[Path | None, typer.Option(
        "--request-log", dir_okay=False, help="Append one JSON line per request served.",
            metavar="FILE")] = None,
    sasl_users: Annotated[Path | None, typer.Option(
        "--sasl-users", dir_okay=False,
        help="JSON users for SASL/PLAIN with their permissions; the listener then requires SASL.",
            metavar="USERS.json")] = None,
    tls_cert: Annotated[Path | None, typer.Option(
        "--tls-cert", dir_okay=False, help="PEM certificate (the listener then speaks TLS).",
            metavar="PEM")] = None,
    tls_key: Annotated[Path | None, typer.Option("--tls-key", dir_okay=False, help="PEM key.",
        metavar="PEM")] = None,
    lag_ms: Annotated[int, typer.Option(
        "--lag-ms", help="Serve the pre-alter state to describes for this long (read-after-write lag).",
            metavar="MS")] = 0,
    flavor: Annotated[_SandboxFlavor, typer.Option(
        "--flavor", help="Answer as a KRaft 4.3 broker (kraft) or a ZooKeeper-mode 3.9 broker (zk).",
        case_sensitive=False)] = _SandboxFlavor.KRAFT,
    brokers: Annotated[int, typer.Option(
        "--brokers", min=1, metavar="N",
        help="Advertise N brokers in Metadata (all served by this process): plans divide cluster-wide "
        "budgets ({per-cluster: …}) by N.")] = 1,
    broker_config: Annotated[list[str] | None, typer.Option(
        "--broker-config", metavar="NAME=VALUE",
        help="A broker setting DescribeConfigs reports (repeatable), e.g. "
        "client.quota.callback.class=com.example.Callback or metrics.sample.window.ms=10000.")] = None,
) -> int:
    """Run the sandbox broker: a Kafka-wire client-quota broker that behaves like Kafka."""
    from kqplan.commands.sandbox import sandbox_command
    from kqplan.sandbox import Flavor

    return run(lambda: sandbox_command(
        host=host, port=port, state=state, seed=seed, cluster_id=cluster_id, request_log=request_log,
        sasl_users=sasl_users, tls_cert=tls_cert, tls_key=tls_key, lag_ms=lag_ms, streams=console_streams(),
        flavor=Flavor(flavor.value), brokers=brokers, broker_configs=tuple(broker_config or ())))
