"""What a command reads for an inventory cluster: its manifest layers and the Kafka rules it
declares. Light on purpose: ``validate`` needs these without the cluster-facing modules."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kqplan.config import ClusterEntry
from kqplan.errors import KqplanError
from kqplan.versions import ClusterProfile


def manifest_paths(paths: Sequence[Path], cluster: ClusterEntry | None) -> list[Path]:
    """The paths given, else the inventory cluster's layers."""
    if paths:
        return list(paths)
    if cluster is not None and cluster.manifests:
        return list(cluster.manifests)
    if cluster is not None:
        raise KqplanError(f"cluster '{cluster.name}' lists no manifests in the inventory",
                          hint=f"add manifests = [\"DIR\", ...] to [clusters.{cluster.name}], or give paths")
    raise KqplanError("no manifests given", hint="give manifest files or directories, or --cluster NAME")


def declared_profile(entry: ClusterEntry | None) -> ClusterProfile:
    """The mode/version an inventory entry declares for offline checks (unknown: KRaft rules)."""
    return ClusterProfile.of(entry.version, entry.mode) if entry is not None else ClusterProfile()
