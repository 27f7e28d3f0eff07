"""Quota state ↔ its snapshot file's JSON (DESIGN §3.4).

A snapshot is ``{"format_version": 1, "cluster_id": "…", "entities": [{"entity": {...},
"quotas": {...}}]}``; ``null`` names are default entities. NaN and ±Infinity, which Kafka
can hold for DOUBLE keys, are written as the JSON extensions ``NaN``/``Infinity``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from kqplan.core.entity import Entity, visible
from kqplan.core.errors import KqplanError
from kqplan.core.state import QuotaState

SNAPSHOT_FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A snapshot file's content: the state and what is known of the cluster it came from."""

    state: dict[Entity, dict[str, float]]
    cluster_id: str | None
    kafka_version: str | None = None
    mode: str | None = None
    brokers: Mapping[int, Mapping[str, str | None] | None] | None = None
    """Each broker's quota settings (DescribeConfigs), by node id (None: unreadable then); None:
    not recorded."""


def snapshot_to_json(state: QuotaState, cluster_id: str | None, *, kafka_version: str | None = None,
                     mode: str | None = None,
                     brokers: Mapping[int, Mapping[str, str | None] | None] | None = None) -> str:
    """Serialize deterministically: entities sorted by display form, keys sorted; the Kafka
    version and metadata mode when known (a plan from the snapshot then follows that cluster's
    rules, e.g. a ZooKeeper cluster's), and each broker's quota settings when read."""
    entries = [
        {"entity": e.to_json(), "quotas": dict(sorted(state[e].items()))}
        for e in sorted(state, key=Entity.sort_key)
    ]
    known: dict[str, object] = {k: v for k, v in (("kafka_version", kafka_version), ("mode", mode))
                                if v is not None}
    if brokers:
        known["brokers"] = {str(node): dict(sorted(values.items())) if values is not None else None
                            for node, values in sorted(brokers.items())}
    doc = {"format_version": SNAPSHOT_FORMAT_VERSION, "cluster_id": cluster_id, **known, "entities": entries}
    return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"


def parse_snapshot(text: str | bytes, *, source: str) -> Snapshot:
    """Parse a snapshot; raise :class:`KqplanError` naming ``source`` when it is not one."""
    from pydantic import ValidationError

    from kqplan.snapshot.models import SnapshotFile

    try:
        doc = SnapshotFile.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise KqplanError(
            f"{source}: not a kqplan snapshot: {where}: {first['msg']}",
            hint="a snapshot is written by `kqplan export --format json` or `kqplan sandbox --state`",
        ) from None
    state: dict[Entity, dict[str, float]] = {}
    for entry in doc.entities:
        entity = Entity.of(entry.entity)
        if entity in state:
            raise KqplanError(f"{source}: entity {entity.display} appears twice in the snapshot")
        if entry.quotas:
            state[entity] = dict(entry.quotas)
    brokers: dict[int, Mapping[str, str | None] | None] | None = None
    if doc.brokers is not None:
        brokers = {}
        for node, values in doc.brokers.items():
            if not node.isdigit():
                raise KqplanError(f"{source}: brokers: '{visible(node)}' is not a broker's node id",
                                  hint='write the node id as a string of digits, e.g. "1"')
            brokers[int(node)] = values
    return Snapshot(state, doc.cluster_id, doc.kafka_version, doc.mode, brokers)
