"""``kqplan init``: adopt clusters in one step — the inventory with each cluster's id, and each
cluster exported into its own layer, so that ``kqplan plan --cluster NAME`` says "No changes".

All or nothing: every cluster is reached and described first, and the whole layout checked —
every path absent and creatable, no layer exported into shared with another cluster or lying
inside another — then every file is written at once (:func:`kqplan.files.write_all`), and the
directories made for them removed again when that fails. It never overwrites: anything in the
way is named. ``kqplan.toml`` is written with a TOML writer (``tomli_w``): any name reads back.

With ``--cluster NAME=HOST:PORT`` it writes ``kqplan.toml``. Without, it reads the existing one
and writes the clusters' layers only (it does not rewrite a file people edit: an entry without
an ``id`` is named, with the line to add).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from shlex import quote

import tomli_w

from kqplan.commands.export import write_failure
from kqplan.config.model import ClusterEntry, ProjectConfig, empty_layer, toml_string, toml_table
from kqplan.console import Streams
from kqplan.core.errors import ExitCode, KqplanError
from kqplan.core.filenames import component_problem
from kqplan.core.state import QuotaState
from kqplan.files import inside, missing_directories, shown_path, write_all
from kqplan.manifest.export import MODELINE, ExportFile, SplitBy, export
from kqplan.pipeline.guarded import check_inventory_id
from kqplan.pipeline.target import Target, open_cluster
from kqplan.render.escape import terminal

CONFIG_NAME = "kqplan.toml"


@dataclass(frozen=True, slots=True)
class NewCluster:
    """One ``--cluster NAME=HOST:PORT``."""

    name: str
    bootstrap: str


@dataclass(frozen=True, slots=True)
class Adopted:
    """A cluster reached: its inventory entry, its id and what export writes for it."""

    name: str
    target: Target
    layer: Path
    cluster_id: str | None
    state: QuotaState
    files: list[ExportFile]


def parse_cluster(text: str) -> NewCluster:
    """``NAME=HOST:PORT`` (a KqplanError saying what is wrong)."""
    from kqplan.cluster.connection import check_bootstrap

    name, sep, bootstrap = text.partition("=")
    if not sep or not bootstrap:
        raise KqplanError(f"--cluster {terminal(text)}: expected NAME=HOST:PORT",
                          hint="e.g. --cluster prod=kafka-1.example.com:9092")
    problem = component_problem(name)
    if problem is not None:
        raise KqplanError(f"--cluster {terminal(text)}: the name {terminal(name)!r} cannot be a cluster "
                          f"name ({problem})", hint="use a plain name such as prod or staging-eu")
    check_bootstrap(bootstrap, where=f"--cluster {name}")
    return NewCluster(name, bootstrap)


def init_command(clusters: Sequence[NewCluster], config: ProjectConfig, *, root: Path,
                 command_config: Path | None, layers: str, split_by: SplitBy, streams: Streams) -> int:
    """``root``: where kqplan.toml is (or goes); ``layers``: the directory under it that holds
    one layer per cluster (``quotas/NAME``)."""
    toml = root / CONFIG_NAME
    if clusters:
        names = [c.name for c in clusters]  # the reader's rule: names differing only in case clash
        twice = sorted({terminal(n) for n in names if sum(m.casefold() == n.casefold() for m in names) > 1})
        if twice:
            raise KqplanError(f"--cluster names a cluster twice: {', '.join(twice)}",
                              hint="give each cluster one distinct name (names differing only in case "
                              "clash on some file systems)")
        if toml.exists() or toml.is_symlink():
            raise KqplanError(f"init refuses to overwrite {terminal(str(_shown(toml, Path.cwd())))}",
                              hint="run `kqplan init` without --cluster to export the clusters it "
                              "lists, or move it away")
        wanted = [(c.name, Target(bootstrap=c.bootstrap, command_config=command_config),
                   root / layers / c.name) for c in clusters]
    else:
        if config.source is None:
            raise KqplanError("nothing to initialise: no --cluster NAME=HOST:PORT and no kqplan.toml",
                              hint="e.g. kqplan init --cluster prod=kafka-1:9092 --cluster "
                              "staging=kafka-staging:9092")
        wanted = [(e.name, Target.of_cluster(e).within(config.max_input_bytes), _layer_of(e, root, layers))
                  for e in config.clusters.values()]
        if not wanted:
            raise KqplanError(f"{terminal(str(config.source))} lists no cluster",
                              hint="add [clusters.NAME] tables, or run init with --cluster NAME=HOST:PORT")
    later = {} if clusters else _later_layers(config)
    _check_layout([(name, layer) for name, _, layer in wanted], later, config, toml if clusters else None,
                  root)
    adopted = [_reach(name, target, layer, split_by,
                      config.clusters.get(name) if not clusters else None) for name, target, layer in wanted]
    files = {inside(one.layer, *f.name.split("/")): f.text for one in adopted for f in one.files}
    for layer, owners in later.items():  # above the export: to override in
        if not layer.exists():
            file, lines = empty_layer(layer, [name for name, _ in owners])
            files[file] = _overrides(owners, lines)
    if clusters:
        files[toml] = _inventory(adopted, root, command_config)
    _write(files, root)
    if clusters:
        streams.print(f"Wrote {CONFIG_NAME} with {len(adopted)} cluster(s).")
    for one in adopted:
        where = terminal(str(_shown(one.layer, root)))
        count = f"{len(one.state)} entit{'y' if len(one.state) == 1 else 'ies'}"
        streams.print(f"  {one.name}: {count} from cluster "
                      f"{terminal(one.cluster_id or '(no id)')} into {where}")
    if not clusters:
        for entry in config.clusters.values():
            ident = next(a.cluster_id for a in adopted if a.name == entry.name)
            if entry.id is None and ident is not None:
                streams.warn(f"note: {terminal(toml_table('clusters', entry.name))} records no id; add "
                             f"id = {terminal(toml_string(ident))} so that kqplan refuses another cluster "
                             "reached at its address")
    streams.print(f"Next: kqplan plan --cluster {terminal(quote(adopted[0].name))}  (it says \"No changes\" "
                  "for every cluster); then change a manifest, plan, apply.")
    return ExitCode.OK


def _overrides(owners: Sequence[tuple[str, int]], lines: list[str]) -> str:
    """A later layer's first manifest: empty, guarded (to its cluster, when one lists it), saying
    what the layer is for."""
    which = (f"Layer {owners[0][1]} of cluster {owners[0][0]}'s manifests" if len(owners) == 1 else
             f"A layer of clusters {', '.join(name for name, _ in owners)}")
    return "\n".join([MODELINE, f"# {which} (kqplan.toml): an entry here with `override: true`",
                      "# wins over the layers before it (e.g. a temporary raise).", *lines, ""])


def _later_layers(config: ProjectConfig) -> dict[Path, list[tuple[str, int]]]:
    """Every layer after a cluster's first, with the clusters that list it there (name, number);
    a layer spelled two ways is one."""
    spelled: dict[Path, Path] = {}
    found: dict[Path, list[tuple[str, int]]] = {}
    for entry in config.clusters.values():
        for number, layer in enumerate(entry.manifests[1:], 2):
            found.setdefault(spelled.setdefault(_key(layer), layer), []).append((entry.name, number))
    return found


def _check_layout(exports: Sequence[tuple[str, Path]], later: Mapping[Path, Sequence[tuple[str, int]]],
                  config: ProjectConfig, toml: Path | None, root: Path) -> None:
    """Every path init would create, checked before anything is written (a KqplanError naming the
    first one in the way): each export's layer and each later layer to create is absent and can be
    made, no export goes into a layer another cluster lists (its export is that one cluster's whole
    state, guarded and owning it), and no layer init writes lies inside another layer or holds
    one (a directory layer is read with everything under it)."""
    hint = "fix the path (kqplan.toml's manifests, or --layers), and run init again"
    try:
        _check_paths(exports, later, config, toml, root)
    except OSError as exc:  # a name too long for the file system
        where = "a layer" if exc.filename is None else _where(Path(str(exc.filename)), root)
        raise KqplanError(f"init cannot write {where}: {terminal(exc.strerror or str(exc))}",
                          hint=hint) from None
    except RuntimeError as exc:  # Path.resolve in a loop of symbolic links
        raise KqplanError(f"init cannot write a layer: {terminal(str(exc))}", hint=hint) from None


def _check_paths(exports: Sequence[tuple[str, Path]], later: Mapping[Path, Sequence[tuple[str, int]]],
                 config: ProjectConfig, toml: Path | None, root: Path) -> None:
    for _, layer in exports:
        if layer.exists() or layer.is_symlink():
            raise KqplanError(f"init refuses to write into {_where(layer, root)}: it exists",
                              hint="init only creates; `kqplan export --cluster NAME --out DIR` "
                              "refreshes an existing layer")
    created = [(layer, name, True) for name, layer in exports]
    created += [(layer, owners[0][0], False) for layer, owners in later.items()
                if not layer.exists() and not layer.is_symlink()]
    for layer, _, _ in created:
        _check_creatable(layer, root)
    for layer in later:
        if layer.is_symlink() and not layer.exists():
            raise KqplanError(f"init refuses to write into {_where(layer, root)}: it exists (a symbolic "
                              "link to nothing)", hint="remove the link, or point it at the layer")
    listed = [(layer, entry.name) for entry in config.clusters.values() for layer in entry.manifests]
    if toml is not None:
        listed.append((toml, ""))
    for layer, name, exported in created:
        mine = _key(layer)
        for other, owner in listed:
            theirs = _key(other)
            if theirs == mine and other == toml:
                raise KqplanError(f"init cannot write {_where(layer, root)}: it is where {CONFIG_NAME} goes",
                                  hint="give the cluster another name, or another --layers DIR")
            if exported and theirs == mine and owner != name:
                raise KqplanError(
                    f"init would export cluster {terminal(name)} into {_where(layer, root)}, which cluster "
                    f"{terminal(owner)} lists too: an export is one cluster's whole state (guarded to it, "
                    "with an ownership block that prunes), which no other cluster can read",
                    hint="give each cluster a first layer of its own (e.g. manifests = [\"quotas/NAME\", "
                    "…]) and run init again; a layer the clusters share comes after it, holding what "
                    "you write there or bring in with `kqplan import --cluster NAME --names TYPE=NAME "
                    "DIR`")
            if theirs != mine and (theirs in mine.parents or mine in theirs.parents):
                outer, inner = (other, layer) if theirs in mine.parents else (layer, other)
                what = "kqplan.toml" if other == toml else f"layer {_where(other, root)}"
                raise KqplanError(
                    f"init would write {_where(inner, root)} inside {_where(outer, root)}: "
                    f"{what} and {_where(layer, root)} would be read as one (a directory layer is read "
                    "with everything under it)",
                    hint="list layers that do not contain one another (e.g. quotas/NAME, or base and "
                    "overlays/NAME), and run init again")


def _check_creatable(path: Path, root: Path) -> None:
    """``path`` can be made: the nearest thing above it that exists is a directory init may write in."""
    above, _ = missing_directories(path.parent)
    if not above.is_dir():
        raise KqplanError(f"init cannot write {_where(path, root)}: {_where(above, root)} is not a "
                          "directory",
                          hint="move it away, or list another layer in kqplan.toml")
    if not os.access(above, os.W_OK | os.X_OK):
        raise KqplanError(f"init cannot write {_where(path, root)}: directory {_where(above, root)} is "
                          "not writable", hint="fix its permissions, or list another layer")


def _key(path: Path) -> Path:
    """``path`` as compared with another: absolute, ``..`` and symbolic links resolved."""
    return path.resolve()


def _where(path: Path, root: Path) -> str:
    """``path`` as a message shows it: relative to ``root`` (kqplan.toml's directory) or to the
    current directory when under it, else absolute."""
    shown = _shown(path.absolute(), root.absolute())
    return terminal(str(shown if not shown.is_absolute() else shown_path(shown)))


def _write(files: Mapping[Path, str], root: Path) -> None:
    """Every file at once, with the directories made for them (removed again when that fails:
    :func:`kqplan.files.write_all`)."""
    try:
        write_all(files)
    except OSError as exc:
        raise write_failure("init", root, exc) from None


def _layer_of(entry: ClusterEntry, root: Path, layers: str) -> Path:
    """Where an existing inventory entry's export goes: its first layer (the one later layers
    override), else ``LAYERS/NAME``."""
    return entry.manifests[0] if entry.manifests else root / layers / entry.name


def _reach(name: str, target: Target, layer: Path, split_by: SplitBy,
           entry: ClusterEntry | None) -> Adopted:
    """Connect, check the inventory's id (when it has one), describe, and export in memory."""
    with open_cluster(target) as cluster:
        ident = cluster.identity()
        check_inventory_id(entry, ident.cluster_id, ident.address)
        state = cluster.describe()
    files, _ = export(state, ident.cluster_id, split_by=split_by, adopt=True, name=name)
    return Adopted(name, target, layer, ident.cluster_id, state, files)


def _shown(path: Path, root: Path) -> Path:
    try:
        return path.relative_to(root)
    except ValueError:
        return path


def _utf8(value: str, what: str) -> str:
    """``value``, which can be written in a UTF-8 file; else a KqplanError (a path that is not
    UTF-8: a TOML file cannot hold it)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise KqplanError(f"kqplan.toml is UTF-8, and {what} {terminal(value)} is not: init cannot "
                          "write it there", hint="rename it with a UTF-8 name, and run init again") from None
    return value


def _inventory(adopted: Sequence[Adopted], root: Path, command_config: Path | None) -> str:
    """kqplan.toml: one table per cluster, its target, id and layer. The comments are kqplan's own
    text; every name and value is written by ``tomli_w``."""
    lines = ["# The cluster inventory, written by `kqplan init`: each cluster's target, its id (kqplan",
             "# refuses another cluster reached at the same address) and its manifest layers.", ""]
    for one in adopted:
        fields = {"bootstrap-server": ("the address", one.target.bootstrap),
                  "command-config": ("the path", None if command_config is None else
                                     str(_shown(command_config.absolute(), root))),
                  "id": ("the cluster id", one.cluster_id)}
        table = {key: _utf8(value, what) for key, (what, value) in fields.items() if value is not None}
        layer = toml_string(_utf8(str(_shown(one.layer, root)), "the layer"))
        lines.append(tomli_w.dumps({"clusters": {_utf8(one.name, "the cluster name"): table}})
                     + f"manifests = [{layer}]\n")
    return "\n".join(lines)
