"""``kqplan export``: write manifests (or a snapshot) that reproduce the cluster's quotas."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from kqplan.console import Streams
from kqplan.errors import ExitCode, KqplanError
from kqplan.export import SplitBy, export
from kqplan.state import snapshot_to_json, write_atomically
from kqplan.target import Target, open_cluster


class ExportFormat(StrEnum):
    YAML = "yaml"
    JSON = "json"  # a snapshot, readable by --state and by the sandbox


def export_command(target: Target, *, out: Path | None, split_by: SplitBy, fmt: ExportFormat,
                   streams: Streams) -> int:
    with open_cluster(target) as cluster:
        ident = cluster.identity()
        state = cluster.describe()
    if fmt is ExportFormat.JSON:
        text = snapshot_to_json(state, ident.cluster_id)
        if out is None:
            streams.print(text, end="")
        else:
            write_atomically(out, text)
            streams.warn(f"Wrote a snapshot of {len(state)} entities to {out}.")
        return ExitCode.OK
    files, skipped = export(state, ident.cluster_id, split_by=split_by)
    for s in skipped:
        streams.warn(f"warning: {s.entity.display} {s.key}={s.value!r} is not exported: {s.reason}")
    if out is None:
        if len(files) > 1:
            raise KqplanError("--split-by user writes several files", hint="give --out DIR")
        streams.print(files[0].text, end="")
        return ExitCode.OK
    out.mkdir(parents=True, exist_ok=True)
    for f in files:
        path = out / f.name
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, f.text)
    streams.warn(f"Wrote {len(state) - len({s.entity for s in skipped})} entities to {len(files)} "
                 f"file(s) under {out}.")
    return ExitCode.OK
