"""The snapshot file's schema (DESIGN §3.4) as pydantic models, validated on read.

A module of its own, imported only when a snapshot is read: a plan against a live cluster never
imports pydantic for it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from kqplan.core.entity import Name


class SnapshotEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
    entity: dict[str, Name]
    quotas: dict[str, float]


class SnapshotFile(BaseModel):
    """On-disk form of a snapshot; validated on read (:func:`kqplan.snapshot.codec.parse_snapshot`)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)
    format_version: Literal[1]
    cluster_id: str | None = None
    kafka_version: str | None = None
    """The cluster's Kafka release as kqplan saw it (``>=3.9``: a lower bound from ApiVersions)."""
    mode: Literal["kraft", "zookeeper"] | None = None
    brokers: dict[str, dict[str, str | None] | None] | None = None
    """Each broker's quota settings as DescribeConfigs gave them, by node id (a plan from the
    snapshot warns about a ``client.quota.callback.class`` as a plan of the cluster would);
    null: they could not be read when the snapshot was taken."""
    entities: list[SnapshotEntry]
