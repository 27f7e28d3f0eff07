"""``kqplan fleet rightsize``'s manifests: where they go (a folder per cluster beside
``proposals.parquet`` and ``proposals.md``, checked before any cluster is described), what each
holds (the cluster's proposals, its ``cluster:`` guard, ``--label``), and whether they validate
under the project's config (its policy's required labels above all)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kqplan.config.model import ProjectConfig
from kqplan.console import Streams
from kqplan.core.errors import KqplanError
from kqplan.files import inside
from kqplan.fleet import clusters
from kqplan.render.escape import terminal

if TYPE_CHECKING:
    from kqplan.core.state import QuotaState
    from kqplan.fleet.proposals import ClusterResult
    from kqplan.fleet.rightsize import ProposalRow, Rules

PROPOSALS_TABLE = "proposals.parquet"
PROPOSALS_MD = "proposals.md"
"""What rightsize writes beside the clusters' folders: a cluster may not be named so."""


def folders(out: Path, entries: Sequence[Any]) -> dict[str, Path]:
    """``out/<cluster>/`` of each cluster, checked before any describe: one plain name, neither
    rightsize's own ``proposals.parquet`` / ``proposals.md`` nor a file already there."""
    found = clusters.output_paths(out, [e.name for e in entries], reserved=(PROPOSALS_TABLE, PROPOSALS_MD))
    for path in found.values():
        if path.exists() and not path.is_dir():
            raise KqplanError(f"{terminal(str(path))} is a file, where a cluster's manifest folder goes",
                              hint="remove it, or give another --out directory")
    from kqplan.fleet.proposals import MANIFEST_NAME

    for name in (PROPOSALS_TABLE, PROPOSALS_MD):
        if inside(out, name).is_dir():
            raise KqplanError(f"{terminal(str(out / name))} is a directory, where rightsize writes its "
                              f"{name}", hint="remove it, or give another --out directory")
    for path in found.values():
        if inside(path, MANIFEST_NAME).is_dir():
            raise KqplanError(f"{terminal(str(path / MANIFEST_NAME))} is a directory, where rightsize "
                              "writes a cluster's manifest",
                              hint="remove it, or give another --out directory")
    return found


def manifests(results: Sequence[clusters.Outcome[tuple[QuotaState, str | None]]],
              rows: Sequence[ProposalRow], *, folders: Mapping[str, Path],
              guards: Mapping[str, str | None], config: ProjectConfig, rules: Rules,
              labels: Mapping[str, str], streams: Streams) -> tuple[list[ClusterResult], dict[Path, str]]:
    """Each described cluster's ``rightsize.yaml``: (each cluster's result, the text of each file).

    The ``cluster:`` guard is written only when the inventory gives the cluster an ``id``: the
    guard must name an id (or a name mapped to one) of the inventory, and a cluster without one
    cannot be guarded by its name (a name guards the cluster whose id it is)."""
    from kqplan.fleet.proposals import MANIFEST_NAME, ClusterResult, manifest_text, writes_of

    outcomes: list[ClusterResult] = []
    texts: dict[Path, str] = {}
    by_cluster: dict[str, list[ProposalRow]] = {}
    for row in rows:  # in table order
        by_cluster.setdefault(row.cluster, []).append(row)
    for r in results:
        if r.value is None:
            outcomes.append(ClusterResult(r.cluster, error=r.error))
            continue
        state, cluster_id = r.value
        guard = cluster_id if guards.get(r.cluster) is not None else None
        if guard is None and cluster_id is not None:
            streams.warn(terminal(f"kqplan: {r.cluster} has no id in {config.source or 'kqplan.toml'}: its "
                                  f"manifest is written without a cluster: guard (add id = \"{cluster_id}\" "
                                  f"to [clusters.{r.cluster}] to guard it)"))
        mine = by_cluster.get(r.cluster, [])
        path = inside(folders[r.cluster], MANIFEST_NAME)
        written = writes_of(mine)
        texts[path] = manifest_text(r.cluster, guard, mine, state, rules=rules, labels=labels,
                                    written=written)
        outcomes.append(ClusterResult(r.cluster, mine, path, written=written))
    return outcomes, texts


def invalid(outcomes: Sequence[ClusterResult], config: ProjectConfig, streams: Streams) -> bool:
    """Whether a written manifest does not validate as ``kqplan validate`` would check it under
    this config (policy included; a required <default> entity concerns the whole manifest set,
    not these entries); each problem told, and for labels the policy requires, the ``--label``
    that gives them."""
    from kqplan.core.diagnostics import render_text
    from kqplan.core.policy import MISSING_DEFAULT, MISSING_LABEL
    from kqplan.manifest.compile import load_desired

    found = False
    unlabelled = False
    for outcome in outcomes:
        if outcome.manifest is None:
            continue
        problems = [d for d in load_desired([outcome.manifest.parent], config).diagnostics
                    if d.is_error and d.code != MISSING_DEFAULT]
        if problems:
            found = True
            unlabelled = unlabelled or any(d.code == MISSING_LABEL for d in problems)
            streams.warn(render_text(problems))
            streams.warn(terminal(f"{outcome.manifest}: the proposals do not validate under "
                                  f"{config.source or 'the config'}"))
    if unlabelled:
        wanted = " ".join(f"--label {name}=VALUE" for name in config.policy.required_labels)
        streams.warn(terminal(f"kqplan: [policy] required-labels asks every entry for "
                              f"{', '.join(config.policy.required_labels)}: run fleet rightsize again "
                              f"with {wanted}"))
    return found


def manifest_dir(out: str | Path) -> Path:
    """rightsize's ``--out``: a local directory, as the manifests it writes are for review."""
    from kqplan.fleet.usage import is_uri, local_paths

    try:
        path = local_paths([out])[0] if is_uri(out) else Path(out)
    except KqplanError:
        raise KqplanError(f"--out {out}: rightsize writes manifests to review, into a local directory",
                          hint="give a directory of your repository's checkout") from None
    if path.exists() and not path.is_dir():
        raise KqplanError(f"--out {path} is a file", hint="give a directory for the manifests and tables")
    return path


def describe(entry: Any, limit: int) -> tuple[Any, str | None]:
    """One describe of an inventory cluster (its ``id`` checked first): (state, cluster id)."""
    from kqplan.pipeline.guarded import check_inventory_id
    from kqplan.pipeline.target import Target, open_cluster

    with open_cluster(Target.of_cluster(entry).within(limit)) as cluster:
        ident = cluster.identity()
        check_inventory_id(entry, ident.cluster_id, ident.address)
        return cluster.describe(), ident.cluster_id


def labels(items: Sequence[str]) -> dict[str, str]:
    """``--label KEY=VALUE`` values: the manifest's labels (a policy may require some)."""
    found: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise KqplanError(f"--label {item!r} is not KEY=VALUE", hint="e.g. --label team=platform")
        found[key.strip()] = value.strip()
    return found
