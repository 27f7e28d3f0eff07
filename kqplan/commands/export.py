"""``kqplan export``: write manifests (or a snapshot) that reproduce the cluster's quotas."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from kqplan.console import Streams
from kqplan.core.errors import ExitCode, KqplanError
from kqplan.files import write_atomically
from kqplan.manifest.export import MODELINE, ExportFile, SplitBy, export
from kqplan.pipeline.target import Target, open_cluster
from kqplan.snapshot.codec import snapshot_to_json


class ExportFormat(StrEnum):
    YAML = "yaml"
    JSON = "json"  # a snapshot, readable by --state and by the sandbox


def _exported_before(path: Path) -> bool:
    """A file an earlier export wrote (its second line names the cluster it came from)."""
    try:
        head = path.read_text(encoding="utf-8").splitlines()[:2]
    except (OSError, UnicodeDecodeError):
        return False
    return bool(head) and (head[0] == MODELINE or head[0].startswith("# Exported from"))


def write_files(out: Path, files: list[ExportFile], *, force: bool, split: bool,
                streams: Streams) -> None:
    """Write into ``out``; never overwrite an edited file or leave a stale one without ``force``."""
    if out.exists() and not out.is_dir():
        raise KqplanError(f"--out {out} is a file; export writes a directory of manifests",
                          hint="give a directory (it is created), or --format json for a snapshot file")
    changed = [f for f in files if (out / f.name).exists()
               and (out / f.name).read_text(encoding="utf-8", errors="replace") != f.text]
    written = {f.name for f in files}
    stale = sorted(p for p in out.rglob("*.yaml") if split and p.relative_to(out).as_posix() not in written
                   and _exported_before(p)) if out.is_dir() else []
    if (changed or stale) and not force:
        shown = ", ".join(str(out / f.name) for f in changed[:3]) + (" …" if len(changed) > 3 else "")
        problems = []
        if changed:
            problems.append(f"{len(changed)} file(s) differ from what export would write ({shown})")
        if stale:
            problems.append(f"{len(stale)} exported file(s) hold entities no longer on the cluster "
                            f"({', '.join(map(str, stale[:3]))})")
        raise KqplanError("export refuses to overwrite: " + "; ".join(problems),
                          hint="to keep your edits and take single entities from the cluster use `kqplan "
                          "import --names … DIR`; to replace the files anyway pass --force")
    out.mkdir(parents=True, exist_ok=True)
    for f in files:
        path = out / f.name
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, f.text)
    for path in stale:
        path.unlink()
        streams.warn(f"Removed {path}: its entities are no longer on the cluster.")


def export_command(target: Target, *, out: Path | None, split_by: SplitBy, fmt: ExportFormat,
                   streams: Streams, force: bool = False, adopt: bool = True) -> int:
    if out is not None and fmt is ExportFormat.JSON and out.is_dir():
        raise KqplanError(f"--out {out} is a directory; --format json writes one snapshot file")
    with open_cluster(target) as cluster:
        ident = cluster.identity()
        state = cluster.describe()
    if fmt is ExportFormat.JSON:
        text = snapshot_to_json(state, ident.cluster_id, kafka_version=ident.version, mode=ident.mode)
        if out is None:
            streams.print(text, end="")
        else:
            write_atomically(out, text)
            streams.warn(f"Wrote a snapshot of {len(state)} entities to {out}.")
        return ExitCode.OK
    files, skipped = export(state, ident.cluster_id, split_by=split_by, adopt=adopt)
    for s in skipped:
        streams.warn(f"warning: {s.entity.display} {s.key}={s.value!r} is not exported: {s.reason} "
                     "(noted in a comment in the file)")
    if out is None:
        if len(files) > 1:
            raise KqplanError("--split-by user writes several files", hint="give --out DIR")
        streams.print(files[0].text, end="")
        return ExitCode.OK
    write_files(out, files, force=force, split=split_by is not SplitBy.NONE, streams=streams)
    streams.warn(f"Wrote {len(state) - len({s.entity for s in skipped})} entities to {len(files)} "
                 f"file(s) under {out}.")
    return ExitCode.OK
