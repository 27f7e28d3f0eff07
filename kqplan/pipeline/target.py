"""Which cluster a command talks to: a snapshot file, a Kafka cluster or an in-process sandbox."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from kqplan.cluster.connection import ENV_BOOTSTRAP, ENV_COMMAND_CONFIG
from kqplan.config.model import ClusterEntry
from kqplan.core.cluster import Cluster
from kqplan.core.errors import KqplanError
from kqplan.files import DEFAULT_INPUT_LIMIT

NO_TARGET_HINT = ("give --bootstrap-server HOST:PORT (with --command-config for SASL/TLS), "
                  "--state SNAPSHOT.json, or --sandbox [SEED.json] for a local sandbox broker")


@dataclass(frozen=True, slots=True)
class Target:
    """The target options of one command, as given (environment variables are read on open)."""

    state: Path | None = None
    bootstrap: str | None = None
    command_config: Path | None = None
    sandbox: bool = False
    sandbox_seed: Path | None = None
    input_limit: int = DEFAULT_INPUT_LIMIT
    """Bound of the snapshot or seed file read whole: ``[limits] max-input-mib`` (:meth:`within`)."""

    @classmethod
    def of_cluster(cls, entry: ClusterEntry) -> Target:
        """The target an inventory entry names (``snapshot`` or ``bootstrap-server``)."""
        if not entry.has_target:
            raise KqplanError(f"cluster '{entry.name}' has no target in the inventory",
                              hint=f"add bootstrap-server (or snapshot) to [clusters.{entry.name}]")
        from kqplan.files import shown_path  # the plan header shows it: relative here

        return cls(state=shown_path(entry.snapshot) if entry.snapshot is not None else None,
                   bootstrap=entry.bootstrap, command_config=entry.command_config)

    def within(self, limit: int) -> Target:
        """This target with its snapshot (or seed) read under ``limit`` bytes (``config.max_input_bytes``)."""
        return replace(self, input_limit=limit)

    def or_cluster(self, entry: ClusterEntry | None) -> Target:
        """Explicit target options win; without any, the inventory entry's target (with
        ``--command-config``, if given, in place of the entry's: the same cluster, other
        credentials)."""
        if entry is None or self.chosen():
            return self
        target = Target.of_cluster(entry).within(self.input_limit)
        return replace(target, command_config=self.command_config) if self.command_config else target

    def chosen(self) -> list[str]:
        """The explicitly given, mutually exclusive target options."""
        given = [("--state", self.state is not None), ("--sandbox", self.sandbox),
                 ("--bootstrap-server", bool(self.bootstrap))]
        return [name for name, on in given if on]


@contextmanager
def open_cluster(target: Target, env: Mapping[str, str] | None = None) -> Iterator[Cluster]:
    """Open the selected cluster; explicit options win over KQPLAN_* environment variables."""
    env = os.environ if env is None else env
    chosen = target.chosen()
    if len(chosen) > 1:
        raise KqplanError(f"choose one target, not {' and '.join(chosen)}", hint=NO_TARGET_HINT)
    if target.command_config is not None and (target.state is not None or target.sandbox):
        raise KqplanError("--command-config configures a connection to --bootstrap-server; "
                          f"it does not apply to {chosen[0]}")
    with ExitStack() as stack:
        cluster: Cluster
        if target.state is not None:
            from kqplan.cluster.snapshot import SnapshotCluster

            cluster = SnapshotCluster(target.state, limit=target.input_limit)
        elif target.sandbox:
            cluster = _sandbox_cluster(target.sandbox_seed, stack, target.input_limit)
        elif target.bootstrap or target.command_config or env.get(ENV_BOOTSTRAP) \
                or env.get(ENV_COMMAND_CONFIG):
            from kqplan.cluster.kafka import KafkaCluster

            cluster = KafkaCluster.connect(target.bootstrap, target.command_config, env=env)
        else:
            raise KqplanError("no cluster to work on", hint=NO_TARGET_HINT)
        stack.callback(cluster.close)
        yield cluster


def _sandbox_cluster(seed: Path | None, stack: ExitStack, limit: int) -> Cluster:
    """Start an in-process sandbox broker on a loopback port and connect to it over TCP."""
    from kqplan.cluster.connection import config_from_properties
    from kqplan.cluster.kafka import KafkaCluster
    from kqplan.sandbox import DEFAULT_CLUSTER_ID, Sandbox, SandboxConfig
    from kqplan.snapshot.file import read_snapshot

    config = SandboxConfig(port=0)
    if seed is not None:
        state, cluster_id = read_snapshot(seed, limit=limit)
        config = SandboxConfig(port=0, seed=state, cluster_id=cluster_id or DEFAULT_CLUSTER_ID)
    sandbox = stack.enter_context(Sandbox.start(config))
    return KafkaCluster(config_from_properties("", bootstrap=sandbox.bootstrap,
                                               source="(sandbox)", env={}))
