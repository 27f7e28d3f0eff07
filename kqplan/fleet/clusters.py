"""Per-cluster work of a fleet job: describe (snapshot) and plan each inventory cluster, bounded
concurrency, one cluster's failure reported without stopping the others."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from kqplan.config.model import ClusterEntry, ProjectConfig
from kqplan.console import Progress
from kqplan.core.desired import DesiredState
from kqplan.core.entity import visible
from kqplan.core.errors import KqplanError
from kqplan.core.filenames import fit_name
from kqplan.core.plan import Plan
from kqplan.core.state import QuotaState
from kqplan.files import inside, write_atomically
from kqplan.pipeline.target import Target, open_cluster
from kqplan.snapshot.codec import snapshot_to_json

T = TypeVar("T")
MAX_WORKERS = 4
"""Clusters described at once: each is one connection and one describe."""


@dataclass(frozen=True, slots=True)
class Outcome(Generic[T]):
    """One cluster's result, or why it has none."""

    cluster: str
    value: T | None = None
    error: str | None = None


def select(config: ProjectConfig, names: Sequence[str]) -> list[ClusterEntry]:
    """The named inventory clusters (all of them when none is named), in inventory order."""
    if not config.clusters:
        raise KqplanError("the inventory lists no clusters",
                          hint="add [clusters.NAME] tables with a target and manifests to kqplan.toml")
    if names:
        return [config.cluster(name) for name in dict.fromkeys(names)]
    return list(config.clusters.values())


def each(entries: Sequence[ClusterEntry], work: Callable[[ClusterEntry], T], *,
         progress: Progress | None = None, label: str = "Working") -> list[Outcome[T]]:
    """``work`` for every cluster, a few at a time; a KqplanError is that cluster's error.
    ``progress`` hears ``label (k/n clusters)`` as each one ends."""
    finished = 0
    lock = threading.Lock()

    def run(entry: ClusterEntry) -> Outcome[T]:
        nonlocal finished
        try:
            return Outcome(entry.name, work(entry))
        except KqplanError as exc:
            return Outcome(entry.name, error=str(exc).splitlines()[0])
        finally:
            with lock:
                finished += 1
                if progress is not None:
                    progress(f"{label} ({finished}/{len(entries)} clusters)")

    if progress is not None:
        progress(f"{label} (0/{len(entries)} clusters)")
    with ThreadPoolExecutor(max_workers=min(MAX_WORKERS, max(1, len(entries)))) as pool:
        return list(pool.map(run, entries))


def output_paths(out: Path, names: Sequence[str], suffix: str = "", *,
                 reserved: Collection[str] = ()) -> dict[str, Path]:
    """Each cluster's output under ``out``: ``out/<name><suffix>``, joined through
    :func:`kqplan.files.inside` (a name that is not one plain file name is refused: nothing is
    written outside ``out``; a long one is shortened with a hash). Refused too, before any cluster
    is described: a name landing on one of the command's own files (``reserved``), or on another
    cluster's (names that differ only in case are one file on macOS and Windows)."""
    paths: dict[str, Path] = {}
    own = {r.casefold(): r for r in reserved}
    taken: dict[str, str] = {}
    for name in names:
        inside(out, fit_name(name, ""))  # the name itself: ".." is refused, not written as "...json"
        path = inside(out, fit_name(name, suffix))
        key = path.name.casefold()
        if key in own:
            raise KqplanError(f"cluster '{visible(name)}' cannot be written to {visible(str(path))}: the "
                              f"command writes its own {own[key]} there",
                              hint=f"rename the [clusters.…] table in kqplan.toml (beside the clusters' "
                              f"outputs go {', '.join(sorted(reserved))})")
        if key in taken:
            raise KqplanError(f"clusters '{taken[key]}' and '{visible(name)}' would both be written to "
                              f"{visible(str(path))} (names that differ only in case are one file on macOS "
                              "and Windows)", hint="rename one of them in kqplan.toml, or run them "
                              "separately (--cluster NAME) into different --out directories")
        taken[key] = visible(name)
        paths[name] = path
    return paths


def snapshot(entry: ClusterEntry, out: Path, config: ProjectConfig) -> int:
    """Write ``out/<cluster>.json`` (with the Kafka version and mode seen); the number of entities."""
    path = output_paths(out, [entry.name], ".json")[entry.name]
    with open_cluster(Target.of_cluster(entry).within(config.max_input_bytes)) as cluster:
        state, ident = cluster.describe(), cluster.identity()
    write_atomically(path, snapshot_to_json(
        state, ident.cluster_id, kafka_version=ident.version, mode=ident.mode))
    return len(state)


def load(entries: Sequence[ClusterEntry], config: ProjectConfig) -> dict[str, DesiredState | KqplanError]:
    """Every cluster's manifests, compiled in the calling thread, one cluster after the other
    (:func:`plan`'s threads then only talk to the clusters). yaml_rs 0.1.6, which parses without
    the GIL, crashed the process (SIGSEGV) in worker threads: 2 runs in 3 of
    tests/commands/fleet_apply_test.py when three planning threads loaded manifests."""
    from kqplan.manifest.compile import load_desired
    from kqplan.pipeline.inputs import manifest_paths

    loaded: dict[str, DesiredState | KqplanError] = {}
    for entry in entries:
        try:
            loaded[entry.name] = load_desired(manifest_paths((), entry), config)
        except KqplanError as exc:
            loaded[entry.name] = exc
    return loaded


def plan(entry: ClusterEntry, config: ProjectConfig,
         loaded: DesiredState | KqplanError) -> tuple[Plan, QuotaState, QuotaState]:
    """``kqplan plan --cluster NAME``'s plan (layers, ownership, prune, guards, guardrails), with
    the desired and actual states it was computed from (one describe); ``loaded``: the cluster's
    compiled manifests (:func:`load`)."""
    from kqplan.pipeline.guarded import DEFAULT_GUARDRAILS, compute_plan, guardrail_problem

    if isinstance(loaded, KqplanError):
        raise loaded
    desired = loaded
    if desired.errors:
        first = desired.errors[0]
        raise KqplanError(f"{len(desired.errors)} error(s) in the manifests, e.g. {first.span}: "
                          f"{first.message}", hint=f"kqplan validate --cluster {entry.name}")
    with open_cluster(Target.of_cluster(entry).within(config.max_input_bytes)) as cluster:
        cluster.identity()  # the guards first: nothing is described from the wrong cluster
        actual = cluster.describe()
        result = compute_plan(desired, cluster, config, record_state=False, entry=entry, actual=actual)
    problem = guardrail_problem(result, desired, config, DEFAULT_GUARDRAILS)
    if problem is not None:
        raise problem
    return result, desired.quotas, actual


def inventory_check(config: ProjectConfig, *, allow_unknown: bool,
                    warn: Callable[[str], None]) -> Callable[[Collection[str]], None]:
    """What a fleet job does with the clusters its usage names: every name the inventory lists is
    fine (a cluster not selected, or failed, has its rows left out); any other is an error naming
    each with the closest inventory name (``prd``: did you mean ``prod``?), or with
    ``allow_unknown`` a warning, those rows left out. Rows of an unknown cluster would otherwise
    vanish, and a cluster read as "0 principals observed"."""
    known = list(config.clusters)

    def check(seen: Collection[str]) -> None:
        from kqplan.core.diagnostics import did_you_mean

        unknown = sorted(set(seen) - set(known))
        if not unknown:
            return
        told = []
        for name in unknown[:10]:
            guess = did_you_mean(name, known)
            told.append(f"'{visible(name)}'" + (f" (did you mean '{visible(guess)}'?)" if guess else ""))
        listed = ", ".join(told) + (f" and {len(unknown) - 10} more" if len(unknown) > 10 else "")
        where = visible(str(config.source)) if config.source is not None else "the inventory"
        some = "a cluster" if len(unknown) == 1 else f"{len(unknown)} clusters"
        if allow_unknown:
            their = "its" if len(unknown) == 1 else "their"
            warn(f"kqplan: the usage names {some} not in {where}, {their} rows left out: {listed}")
            return
        raise KqplanError(f"the usage names {some} not in {where}: {listed}",
                          hint="correct the usage's cluster column, add the cluster to the inventory "
                          "([clusters.NAME]), or give --allow-unknown-clusters to leave those rows out")

    return check
