"""``kqplan init``: adopt clusters in one step — the inventory with each cluster's id, and each
cluster exported into its own layer, so that ``kqplan plan --cluster NAME`` says "No changes".

All or nothing: every cluster is reached and described first, and every file checked absent;
only then is anything written. It never overwrites: anything in the way is named.

With ``--cluster NAME=HOST:PORT`` it writes ``kqplan.toml``. Without, it reads the existing one
and writes the clusters' layers only (it does not rewrite a file people edit: an entry without
an ``id`` is named, with the line to add).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kqplan.commands.export import write_files
from kqplan.config.model import ClusterEntry, ProjectConfig
from kqplan.console import Streams
from kqplan.core.errors import ExitCode, KqplanError
from kqplan.core.filenames import component_problem
from kqplan.core.state import QuotaState
from kqplan.files import write_atomically
from kqplan.manifest.export import MODELINE, ExportFile, SplitBy, export, yaml_string
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
        names = [c.name for c in clusters]
        twice = sorted({n for n in names if names.count(n) > 1 or
                        sum(m.lower() == n.lower() for m in names) > 1})
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
    for _, _, layer in wanted:
        if layer.exists() or layer.is_symlink():
            raise KqplanError(f"init refuses to write into {terminal(str(_shown(layer, root)))}: it exists",
                              hint="init only creates; `kqplan export --cluster NAME --out DIR` "
                              "refreshes an existing layer")
    adopted = [_reach(name, target, layer, split_by,
                      config.clusters.get(name) if not clusters else None) for name, target, layer in wanted]
    for one in adopted:
        write_files(one.layer, one.files, force=False, split=split_by is not SplitBy.NONE,
                    streams=streams, cluster_id=one.cluster_id)
    for entry in (config.clusters.values() if not clusters else ()):
        for number, later in enumerate(entry.manifests[1:], 2):  # above the export: to override in
            if not later.exists():
                later.mkdir(parents=True)
                write_atomically(later / "overrides.yaml", _overrides(entry.name, number))
    if clusters:
        write_atomically(toml, _inventory(adopted, root, command_config))
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
                streams.warn(f"note: [clusters.{entry.name}] records no id; add id = {json.dumps(ident)} "
                             "so that kqplan refuses another cluster reached at its address")
    streams.print(f"Next: kqplan plan --cluster {adopted[0].name}  (it says \"No changes\" for every "
                  "cluster); then change a manifest, plan, apply.")
    return ExitCode.OK


def _overrides(name: str, number: int) -> str:
    """A later layer's first manifest: empty, guarded, saying what the layer is for."""
    return "\n".join([MODELINE, f"# Layer {number} of cluster {name}'s manifests (kqplan.toml): an "
                      "entry here with `override: true`",
                      "# wins over the layers before it (e.g. a temporary raise).",
                      "apiVersion: kqplan/v1", "kind: ClientQuotas", f"cluster: {yaml_string(name)}",
                      "entities: []", ""])


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


def _inventory(adopted: Sequence[Adopted], root: Path, command_config: Path | None) -> str:
    """kqplan.toml: one table per cluster, its target, id and layer (TOML basic strings: JSON's
    escapes are TOML's)."""
    lines = ["# The cluster inventory, written by `kqplan init`: each cluster's target, its id (kqplan",
             "# refuses another cluster reached at the same address) and its manifest layers.", ""]
    for one in adopted:
        bare = re.fullmatch(r"[A-Za-z0-9_-]+", one.name) is not None
        lines.append(f"[clusters.{one.name if bare else json.dumps(one.name)}]")
        lines.append(f"bootstrap-server = {json.dumps(one.target.bootstrap)}")
        if command_config is not None:
            lines.append(f"command-config = {json.dumps(str(_shown(command_config.absolute(), root)))}")
        if one.cluster_id is not None:
            lines.append(f"id = {json.dumps(one.cluster_id)}")
        lines.append(f"manifests = [{json.dumps(str(_shown(one.layer, root)))}]")
        lines.append("")
    return "\n".join(lines)
