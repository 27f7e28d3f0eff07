"""``kqplan import``: pull entities from the cluster into existing manifests, keeping comments.

The reconciliation ``export`` cannot do: one entity at a time (or every unmanaged one), into
the file that already lists it (its ``quotas`` rewritten in place), else into the file export's
split rule picks (created, or appended to). Everything else in the files stays byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kqplan.commands.export import write_failure
from kqplan.config.model import ClusterEntry, ProjectConfig
from kqplan.console import Streams
from kqplan.core.desired import DesiredState
from kqplan.core.entity import Entity
from kqplan.core.errors import ExitCode, KqplanError
from kqplan.core.state import QuotaState
from kqplan.files import inside, write_all
from kqplan.manifest.export import SplitBy, export, split_file
from kqplan.pipeline.target import Target, open_cluster
from kqplan.render.escape import terminal

if TYPE_CHECKING:
    from ruamel.yaml import YAML


def unmanaged(desired: DesiredState, actual: QuotaState) -> list[Entity]:
    """Cluster entities no manifest lists, no ownership scope covers and none releases."""
    own = desired.ownership
    return sorted((e for e in actual if e not in desired.quotas and not own.prunes(e)
                   and not own.watches(e) and e not in desired.released), key=Entity.sort_key)


def _write(directory: Path, texts: dict[Path, str]) -> None:
    """Every file or none: each is written before any is renamed into place."""
    try:
        write_all(texts)  # with the missing directories, removed again if it fails
    except OSError as exc:
        raise write_failure("import", directory, exc) from None


def import_command(directory: Path, wanted: Sequence[Entity], target: Target, config: ProjectConfig, *,
                   all_unmanaged: bool, split_by: SplitBy | None, streams: Streams,
                   entry: ClusterEntry | None = None) -> int:
    """``entry``: ``--cluster NAME``, whose layers ``directory`` may be one of (an entity listed
    only in another layer gets an ``override: true`` entry in ``directory``; a layer not written
    yet is created). ``split_by``: None follows the layout found in ``directory``. New files are
    guarded as the manifests are (``cluster:``), else to ``NAME``, else to the cluster's id."""
    from kqplan.manifest.yamlio import dump_rt, entity_entry, load_rt, new_document, set_quotas
    from kqplan.pipeline.guarded import check_inventory_id, load_checked

    if bool(wanted) == all_unmanaged:
        raise KqplanError("give --names/--defaults (one entity) or --all-unmanaged",
                          hint="e.g. kqplan import --names user=mallory manifests/")
    here = directory.resolve()
    layers = [layer for layer in (entry.manifests if entry is not None else ()) if layer.exists()]
    is_layer = entry is not None and here in [p.resolve() for p in entry.manifests]
    if not directory.is_dir() and not (is_layer and not directory.exists()):
        raise KqplanError(f"{terminal(str(directory))} is not a directory of manifests",
                          hint="import writes into the manifests directory (export --out DIR makes one)")
    desired = load_checked(layers if is_layer else [directory], config, streams)
    split_by = split_by if split_by is not None else SplitBy.found_in(directory)
    with open_cluster(target.within(config.max_input_bytes)) as cluster:
        ident = cluster.identity()
        check_inventory_id(entry, ident.cluster_id, ident.address)
        actual = cluster.describe()
    guard = desired.cluster_guard or (entry.name if entry is not None else None)
    entities = unmanaged(desired, actual) if all_unmanaged else list(wanted)
    released = [f"{e.display} ({desired.released[e].here})" for e in entities if e in desired.released]
    if released:
        raise KqplanError(f"released by the manifests: {', '.join(released)}; nothing was changed",
                          hint="remove it from `released:` to manage it again, then import it")
    missing = [e.display for e in entities if e not in actual]
    if missing:
        raise KqplanError(f"not on the cluster: {', '.join(missing)}; nothing was changed",
                          hint="`kqplan describe` shows what the cluster has")
    if not entities:
        streams.print("Nothing to import: every cluster entity is managed by these manifests.")
        return ExitCode.OK
    edits: dict[Path, tuple[Any, YAML]] = {}  # file -> (round-trip tree, its dumper)
    created: dict[Path, list[Entity]] = {}
    report: list[str] = []
    for entity in entities:
        quotas = dict(actual[entity])
        origin = desired.origins.get(entity)
        listed_here = origin is not None and (here == Path(origin.source.opened).resolve().parent
                                            or here in Path(origin.source.opened).resolve().parents)
        if origin is not None and listed_here:
            path = Path(origin.source.opened)
            doc, _ = edits.get(path) or edits.setdefault(path, load_rt(path))
            item = doc["entities"][origin.loc[1]]
            removed = desired.quotas.get(entity, {}).keys() - quotas.keys() if item.get("override") else ()
            notes = set_quotas(item, quotas, removed=removed)
            report.append(f"  ~ {entity.display} updated in {path}" + "".join(f"; {n}" for n in notes))
            continue
        override = origin is not None  # listed in another layer: override it here
        removed = desired.quotas.get(entity, {}).keys() - quotas.keys() if override else ()
        path = inside(directory, *split_file(entity, split_by).split("/"))
        if path.exists() or path in edits:
            doc, _ = edits.get(path) or edits.setdefault(path, load_rt(path))
            if doc.get("entities") is None:
                doc["entities"] = []
            doc["entities"].append(entity_entry(entity, quotas, override=override, removed=removed))
            report.append(f"  + {entity.display} added to {terminal(str(path))}"
                          + (" (override)" if override else ""))
        elif override:
            doc, _ = edits.setdefault(path, new_document(path, ident.cluster_id, guard))
            doc["entities"].append(entity_entry(entity, quotas, override=True, removed=removed))
            report.append(f"  + {entity.display} added to {terminal(str(path))} (new file, override)")
        else:
            created.setdefault(path, []).append(entity)
            report.append(f"  + {entity.display} added to {terminal(str(path))} (new file)")
    texts = {path: dump_rt(doc, yaml) for path, (doc, yaml) in edits.items()}
    for path, new in created.items():
        files, _ = export({e: actual[e] for e in new}, ident.cluster_id, split_by=SplitBy.NONE, name=guard)
        texts[path] = files[0].text
    _write(directory, texts)
    streams.print(f"Imported {len(entities)} entit{'y' if len(entities) == 1 else 'ies'} from "
                  f"{terminal(ident.cluster_id or ident.address)}:")
    streams.print("\n".join(report))
    return ExitCode.OK
