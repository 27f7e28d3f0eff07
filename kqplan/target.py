"""Which cluster a command talks to: a snapshot file, a Kafka cluster or an in-process sandbox."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kqplan.cluster.base import Cluster
from kqplan.errors import KqplanError


@dataclass(frozen=True, slots=True)
class Target:
    state: Path | None = None
    bootstrap: str | None = None
    command_config: Path | None = None

    def describe(self) -> str:
        if self.state is not None:
            return f"snapshot {self.state}"
        return f"cluster at {self.bootstrap}"


@contextmanager
def open_cluster(target: Target) -> Iterator[Cluster]:
    """Open the selected cluster; exactly one of the target options must be given."""
    chosen = [name for name, value in (("--state", target.state), ("--bootstrap-server",
                                                                     target.bootstrap)) if value]
    if len(chosen) > 1:
        raise KqplanError(f"choose one target, not {' and '.join(chosen)}")
    if target.state is not None:
        from kqplan.cluster.snapshot import SnapshotCluster

        cluster: Cluster = SnapshotCluster(target.state)
    else:
        raise KqplanError("no cluster to plan against",
                          hint="give --state SNAPSHOT.json or --bootstrap-server HOST:PORT")
    try:
        yield cluster
    finally:
        cluster.close()
