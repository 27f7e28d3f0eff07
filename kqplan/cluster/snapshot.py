"""A snapshot file as a cluster: ``plan --state SNAPSHOT.json`` works offline."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kqplan.cluster.base import ALL, Alteration, ClusterIdentity, DescribeFilter, EntityResult
from kqplan.errors import KqplanError
from kqplan.state import QuotaState, read_snapshot


class SnapshotCluster:
    """Reads its state once, at open; describe answers from that copy."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._state, self._cluster_id = read_snapshot(path)

    def identity(self) -> ClusterIdentity:
        return ClusterIdentity(self._cluster_id, f"snapshot:{self.path}")

    def describe(self, flt: DescribeFilter = ALL) -> QuotaState:
        if flt == ALL:
            return {e: dict(q) for e, q in self._state.items()}
        from kqplan.selectors import matches

        return {e: dict(q) for e, q in self._state.items() if matches(flt, e)}

    def alter(self, alterations: Sequence[Alteration], *, validate_only: bool) -> list[EntityResult]:
        raise KqplanError(f"{self.path} is a read-only snapshot",
                          hint="apply to a cluster with --bootstrap-server or --sandbox")

    def close(self) -> None:
        pass
