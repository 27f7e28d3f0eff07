"""Reading and writing snapshot files (the file form is :mod:`kqplan.snapshot.codec`'s)."""

from __future__ import annotations

from pathlib import Path

from kqplan.core.entity import Entity
from kqplan.core.state import QuotaState
from kqplan.files import DEFAULT_INPUT_LIMIT, read_bounded, write_atomically
from kqplan.snapshot.codec import Snapshot, parse_snapshot, snapshot_to_json


def load_snapshot(path: Path, *, limit: int = DEFAULT_INPUT_LIMIT) -> Snapshot:
    """Read a snapshot file: a regular file of at most ``limit`` bytes (``[limits]
    max-input-mib``), never a device or a FIFO (``/dev/zero`` would fill memory, a FIFO hang)."""
    return parse_snapshot(read_bounded(path, what="snapshot", limit=limit), source=str(path))


def read_snapshot(path: Path, *,
                  limit: int = DEFAULT_INPUT_LIMIT) -> tuple[dict[Entity, dict[str, float]], str | None]:
    """Read a snapshot file: (state, cluster id)."""
    found = load_snapshot(path, limit=limit)
    return found.state, found.cluster_id


def write_snapshot(path: Path, state: QuotaState, cluster_id: str | None) -> None:
    """Write a snapshot atomically (temp file, fsync, rename)."""
    write_atomically(path, snapshot_to_json(state, cluster_id))
