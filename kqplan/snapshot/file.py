"""Reading and writing snapshot files (the file form is :mod:`kqplan.snapshot.codec`'s)."""

from __future__ import annotations

from pathlib import Path

from kqplan.core.entity import Entity
from kqplan.core.errors import KqplanError
from kqplan.core.state import QuotaState
from kqplan.files import write_atomically
from kqplan.snapshot.codec import Snapshot, parse_snapshot, snapshot_to_json


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


def write_snapshot(path: Path, state: QuotaState, cluster_id: str | None) -> None:
    """Write a snapshot atomically (temp file, fsync, rename)."""
    write_atomically(path, snapshot_to_json(state, cluster_id))
