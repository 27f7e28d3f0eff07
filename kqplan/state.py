"""Quota state (entity → key → value) and its snapshot file (DESIGN §3.4).

A snapshot is ``{"format_version": 1, "cluster_id": "…", "entities": [{"entity": {...},
"quotas": {...}}]}``; ``null`` names are default entities. NaN and ±Infinity, which Kafka
can hold for DOUBLE keys, are written as the JSON extensions ``NaN``/``Infinity``.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import orjson

from kqplan.entity import Entity
from kqplan.errors import KqplanError

Quotas = Mapping[str, float]
QuotaState = Mapping[Entity, Quotas]
"""What a cluster holds, or what manifests want: every entity with at least one key."""

SNAPSHOT_FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A snapshot file's content: the state and what is known of the cluster it came from."""

    state: dict[Entity, dict[str, float]]
    cluster_id: str | None
    kafka_version: str | None = None
    mode: str | None = None


def snapshot_to_json(state: QuotaState, cluster_id: str | None, *, kafka_version: str | None = None,
                     mode: str | None = None) -> str:
    """Serialize deterministically: entities sorted by display form, keys sorted; the Kafka
    version and metadata mode when known (a plan from the snapshot then follows that cluster's
    rules, e.g. a ZooKeeper cluster's)."""
    entries = [
        {"entity": e.to_json(), "quotas": dict(sorted(state[e].items()))}
        for e in sorted(state, key=Entity.sort_key)
    ]
    known = {k: v for k, v in (("kafka_version", kafka_version), ("mode", mode)) if v is not None}
    doc = {"format_version": SNAPSHOT_FORMAT_VERSION, "cluster_id": cluster_id, **known, "entities": entries}
    return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"


def snapshot_from_json(
    text: str | bytes, *, source: str
) -> tuple[dict[Entity, dict[str, float]], str | None]:
    """Parse a snapshot: (state, cluster id); see :func:`parse_snapshot`."""
    found = parse_snapshot(text, source=source)
    return found.state, found.cluster_id


def parse_snapshot(text: str | bytes, *, source: str) -> Snapshot:
    """Parse a snapshot; raise :class:`KqplanError` naming ``source`` when it is not one."""
    from pydantic import ValidationError

    from kqplan.state_models import SnapshotFile

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
    return Snapshot(state, doc.cluster_id, doc.kafka_version, doc.mode)


def load_snapshot(path: Path) -> Snapshot:
    """Read a snapshot file."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise KqplanError(f"cannot read snapshot {path}: {exc.strerror}") from None
    return parse_snapshot(data, source=str(path))


def read_snapshot(path: Path) -> tuple[dict[Entity, dict[str, float]], str | None]:
    """Read a snapshot file: (state, cluster id)."""
    found = load_snapshot(path)
    return found.state, found.cluster_id


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` so that a crash leaves either the old or the new file, never a torn one."""
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_snapshot(path: Path, state: QuotaState, cluster_id: str | None) -> None:
    """Write a snapshot atomically (temp file, fsync, rename)."""
    write_atomically(path, snapshot_to_json(state, cluster_id))


def fingerprint(state: QuotaState) -> str:
    """A stable digest of a state (whatever the order of entities and keys), recorded in plans
    to tell whether the cluster moved (apply itself checks each change's ``before``). orjson
    sorts and writes it in C, faster than a formatted line per entity; values differ from
    kqplan 0.2's."""
    doc = dict(zip(map(tuple.__repr__, state), state.values(), strict=True))  # repr(entity.parts)
    return "sha256:" + hashlib.sha256(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]
