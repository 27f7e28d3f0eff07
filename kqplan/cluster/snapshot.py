"""A snapshot file as a cluster: ``plan --state SNAPSHOT.json`` works offline."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kqplan.core.cluster import ALL, Alteration, ClusterIdentity, DescribeFilter, EntityResult
from kqplan.core.errors import KqplanError
from kqplan.core.sensors import BrokerRead, BrokerSettings, ClusterSettings
from kqplan.core.state import QuotaState
from kqplan.files import DEFAULT_INPUT_LIMIT
from kqplan.snapshot.file import load_snapshot


class SnapshotCluster:
    """Reads its state once, at open; describe answers from that copy."""

    def __init__(self, path: Path, *, limit: int = DEFAULT_INPUT_LIMIT) -> None:
        self.path = path
        self._snapshot = load_snapshot(path, limit=limit)
        self._state = self._snapshot.state

    def identity(self) -> ClusterIdentity:
        """The recorded id, and the Kafka version and mode when the snapshot recorded them (a
        plan from a ZooKeeper cluster's snapshot follows ZooKeeper's rules)."""
        s = self._snapshot
        return ClusterIdentity(s.cluster_id, f"snapshot:{self.path}", s.kafka_version, s.mode)

    def describe(self, flt: DescribeFilter = ALL) -> QuotaState:
        if flt == ALL:
            return {e: dict(q) for e, q in self._state.items()}
        from kqplan.core.selectors import matches

        return {e: dict(q) for e, q in self._state.items() if matches(flt, e)}

    def alter(self, alterations: Sequence[Alteration], *, validate_only: bool) -> list[EntityResult]:
        raise KqplanError(f"{self.path} is a read-only snapshot",
                          hint="apply to a cluster with --bootstrap-server or --sandbox")

    def broker_settings(self) -> ClusterSettings:
        """The brokers' settings the snapshot recorded (none: nothing known, Kafka's defaults)."""
        recorded = self._snapshot.brokers or {}
        where = f"snapshot:{self.path}"
        return ClusterSettings(tuple(
            BrokerRead(node, where, BrokerSettings.of(values)) if values is not None
            else BrokerRead(node, where, None, "not read when the snapshot was taken")
            for node, values in sorted(recorded.items())))

    def close(self) -> None:
        pass
