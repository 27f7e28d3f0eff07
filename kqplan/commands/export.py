"""``kqplan export``: write manifests (or a snapshot) that reproduce the cluster's quotas."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from kqplan.config.model import ClusterEntry
from kqplan.console import Streams
from kqplan.core.entity import visible
from kqplan.core.errors import ExitCode, KqplanError
from kqplan.files import checked_input, inside, read_bounded, write_all, write_atomically
from kqplan.manifest.export import ExportFile, SplitBy, export, export_source, exported_from
from kqplan.pipeline.guarded import check_inventory_id
from kqplan.pipeline.target import Target, open_cluster
from kqplan.snapshot.codec import snapshot_to_json


class ExportFormat(StrEnum):
    YAML = "yaml"
    JSON = "json"  # a snapshot, readable by --state and by the sandbox


def _exported_from(path: Path) -> str | None:
    """The cluster the header of ``path`` says an export took it from; None when it is not an
    exported manifest (or not a regular file: a FIFO named ``x.yaml`` is not read)."""
    try:
        checked_input(path, what="manifest")
        with path.open("rb") as fh:
            head = fh.read(4096)
    except (KqplanError, OSError):
        return None
    return exported_from(head.decode("utf-8", errors="replace"))


def _current(path: Path) -> str | None:
    """The text export would replace at ``path`` (None: nothing there); a KqplanError, before
    anything is written, when something other than a file is in the way."""
    if not path.exists() and not path.is_symlink():
        return None
    if not path.is_file():
        kind = "a directory" if path.is_dir() else "not a regular file"
        raise KqplanError(f"export cannot write {visible(str(path))}: it is {kind}; nothing was written",
                          hint="move it out of the way, or export into another directory")
    return read_bounded(path, what="exported manifest").decode("utf-8", errors="replace")


def _others(out: Path, source: str, found: dict[Path, str | None]) -> KqplanError | None:
    """The refusal when ``out`` holds another cluster's export: it is never replaced nor removed."""
    foreign: dict[str, list[Path]] = {}
    for path, origin in sorted(found.items()):
        if origin is not None and origin != source:
            foreign.setdefault(origin, []).append(path)
    if not foreign:
        return None
    named = "; ".join(f"{visible(origin)} ({', '.join(visible(str(p)) for p in paths[:3])}"
                      f"{' …' if len(paths) > 3 else ''})" for origin, paths in foreign.items())
    return KqplanError(f"export refuses to write into {visible(str(out))}: it holds manifests exported from "
                       f"{named}, and this export is of {visible(source)}",
                       hint="export each cluster into its own directory (e.g. --out DIR/CLUSTER); --force "
                       "never replaces or removes another cluster's files: move them away yourself if "
                       "they are no longer wanted")


def write_failure(command: str, out: Path, exc: OSError) -> KqplanError:
    """What a failed write of a set of files tells the user: which file (a temporary one as its
    directory), why, and that the previous files were left as they were."""
    name = Path(str(exc.filename)) if exc.filename else None
    where = (f"a file under {visible(str(out))}" if name is None else
             f"into {visible(str(name.parent))}" if name.name.startswith(".") and name.suffix == ".tmp"
             else visible(str(name)))
    return KqplanError(f"{command} could not write {where}: {exc.strerror or exc}",
                       hint="every file is written before any is renamed into place, so a failure while "
                       f"writing leaves the previous files as they were; fix the cause (space, "
                       f"permissions) and run {command} again")


def write_files(out: Path, files: list[ExportFile], *, force: bool, split: bool, streams: Streams,
                cluster_id: str | None) -> None:
    """Write into ``out``, all or nothing; never overwrite an edited file or leave a stale one
    without ``force``, and never touch what another cluster's export wrote."""
    if out.exists() and not out.is_dir():
        raise KqplanError(f"--out {visible(str(out))} is a file; export writes a directory of manifests",
                          hint="give a directory (it is created), or --format json for a snapshot file")
    source = export_source(cluster_id)
    found = {p: _exported_from(p) for p in out.rglob("*.yaml")} if out.is_dir() else {}
    refusal = _others(out, source, found)
    if refusal is not None:
        raise refusal
    targets = {inside(out, *f.name.split("/")): f.text for f in files}
    changed = [path for path, text in targets.items() if _current(path) not in (None, text)]
    stale = sorted(p for p, origin in found.items() if split and origin == source and p not in targets)
    if stale and cluster_id is None:
        # without an id nothing tells this cluster's old files from another id-less cluster's:
        # kept, whatever --force says
        streams.warn(f"warning: {len(stale)} file(s) under {visible(str(out))} hold entities this export "
                     "does not write, but the cluster has no id, so kqplan cannot tell whether an earlier "
                     f"export of it wrote them: left in place "
                     f"({', '.join(visible(str(p)) for p in stale[:3])}{' …' if len(stale) > 3 else ''}); "
                     "remove them yourself if they are stale")
        stale = []
    if (changed or stale) and not force:
        shown = ", ".join(visible(str(p)) for p in changed[:3]) + (" …" if len(changed) > 3 else "")
        problems = []
        if changed:
            problems.append(f"{len(changed)} file(s) differ from what export would write ({shown})")
        if stale:
            problems.append(f"{len(stale)} exported file(s) hold entities no longer on the cluster "
                            f"({', '.join(visible(str(p)) for p in stale[:3])})")
        raise KqplanError("export refuses to overwrite: " + "; ".join(problems),
                          hint="to keep your edits and take single entities from the cluster use `kqplan "
                          "import --names … DIR`; to replace the files anyway pass --force")
    try:
        write_all(targets)  # with the missing directories, removed again if it fails
        for path in stale:
            path.unlink()
            streams.warn(f"Removed {visible(str(path))}: its entities are no longer on the cluster.")
    except OSError as exc:
        raise write_failure("export", out, exc) from None


def export_command(target: Target, *, out: Path | None, split_by: SplitBy, fmt: ExportFormat,
                   streams: Streams, force: bool = False, adopt: bool = True,
                   entry: ClusterEntry | None = None) -> int:
    """``entry``: ``--cluster NAME``: its name is the guard the manifests get (``cluster: NAME``)."""
    if out is not None and fmt is ExportFormat.JSON and out.is_dir():
        raise KqplanError(f"--out {out} is a directory; --format json writes one snapshot file")
    with open_cluster(target) as cluster:
        ident = cluster.identity()
        check_inventory_id(entry, ident.cluster_id, ident.address)
        state = cluster.describe()
        # a snapshot records the brokers' quota settings: a plan from it warns as one of the cluster
        settings = cluster.broker_settings() if fmt is ExportFormat.JSON else None
    if fmt is ExportFormat.JSON:
        assert settings is not None
        text = snapshot_to_json(state, ident.cluster_id, kafka_version=ident.version, mode=ident.mode,
                                brokers={b.node: b.settings.raw if b.settings is not None else None
                                         for b in settings.brokers})
        if out is None:
            streams.print(text, end="")
        else:
            try:
                write_atomically(out, text)
            except OSError as exc:
                raise KqplanError(f"export could not write {visible(str(out))}: {exc.strerror or exc}",
                                  hint="check that its directory is writable") from None
            streams.warn(f"Wrote a snapshot of {len(state)} entities to {visible(str(out))}.")
        return ExitCode.OK
    files, skipped = export(state, ident.cluster_id, split_by=split_by, adopt=adopt,
                            name=entry.name if entry is not None else None)
    for s in skipped:
        streams.warn(f"warning: {s.entity.display} {s.key}={s.value!r} is not exported: {s.reason} "
                     "(noted in a comment in the file)")
    if out is None:
        if len(files) > 1:
            raise KqplanError("--split-by user writes several files", hint="give --out DIR")
        streams.print(files[0].text, end="")
        return ExitCode.OK
    write_files(out, files, force=force, split=split_by is not SplitBy.NONE, streams=streams,
                cluster_id=ident.cluster_id)
    streams.warn(f"Wrote {len(state) - len({s.entity for s in skipped})} entities to {len(files)} "
                 f"file(s) under {visible(str(out))}.")
    return ExitCode.OK
