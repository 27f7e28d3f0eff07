"""``kqplan plan``: diff the manifests against one describe of the cluster."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kqplan.cluster.base import Cluster
from kqplan.config import ProjectConfig
from kqplan.console import Streams
from kqplan.diagnostics import DiagnosticsError, render_text
from kqplan.errors import ExitCode, KqplanError
from kqplan.manifest.compile import DesiredState, load_desired
from kqplan.plan import ClusterRef, Plan, diff
from kqplan.planfile import dumps_plan
from kqplan.render import RENDERERS, Format
from kqplan.state import QuotaState, fingerprint, write_atomically
from kqplan.target import Target, open_cluster

if TYPE_CHECKING:
    from kqplan.principals import Principal


def load_checked(paths: Sequence[Path], config: ProjectConfig, streams: Streams) -> DesiredState:
    """Manifests that must be valid to go on: errors raise, warnings go to stderr."""
    desired = load_desired(paths, config)
    if desired.errors:
        raise DiagnosticsError(desired.diagnostics)
    if desired.diagnostics:
        streams.warn(render_text(desired.diagnostics))
    return desired


def check_guard(desired: DesiredState, cluster_id: str | None, address: str,
                config: ProjectConfig) -> None:
    """Refuse a cluster other than the one the manifests' ``cluster:`` names."""
    guard = desired.cluster_guard
    if guard is None:
        return
    wanted = config.cluster_id_for(guard)
    if cluster_id is None:
        raise KqplanError(f"manifests are guarded to cluster '{guard}', but {address} did not "
                          "report a cluster id", hint="use a snapshot that records cluster_id")
    if cluster_id != wanted:
        named = f"'{guard}' (id {wanted})" if wanted != guard else f"'{guard}'"
        raise KqplanError(f"wrong cluster: the manifests are guarded to {named}, but {address} "
                          f"is cluster {cluster_id}",
                          hint="point kqplan at the right cluster, or map the name to this id "
                          "under [clusters] in kqplan.toml")


def compute_plan(desired: DesiredState, cluster: Cluster, config: ProjectConfig, *,
                 record_state: bool = True, actual: QuotaState | None = None) -> Plan:
    """One describe (unless ``actual`` was read already), then the diff; ``record_state`` adds
    the state's fingerprint."""
    ident = cluster.identity()
    check_guard(desired, ident.cluster_id, ident.address, config)
    if actual is None:
        actual = cluster.describe()
    return diff(desired.quotas, actual, desired.ownership,
                cluster=ClusterRef(ident.cluster_id, ident.address),
                fingerprint=fingerprint(actual) if record_state else None)


def plan(paths: Sequence[Path], target: Target, config: ProjectConfig, *, fmt: Format,
         out: Path | None, detailed_exitcode: bool, streams: Streams,
         principals: Path | None = None) -> int:
    desired = load_checked(paths, config, streams)
    who = None
    if principals is not None:
        from kqplan.principals import read_principals

        who = read_principals(principals)
    with open_cluster(target) as cluster, streams.progress() as progress:
        progress("Describing the cluster")
        actual = cluster.describe() if who is not None else None
        result = compute_plan(desired, cluster, config,
                              record_state=out is not None or fmt is Format.JSON, actual=actual)
    if out is not None:
        write_atomically(out, dumps_plan(result))
    streams.print(RENDERERS[fmt](result), end="")
    if fmt is not Format.JSON:
        _blast_radius(result, actual, who, streams)
    if out is not None and fmt is not Format.JSON:
        streams.print(f"\nSaved the plan to {out}. Apply exactly these changes with: "
                      f"kqplan apply --plan {out}")
    return ExitCode.CHANGES if detailed_exitcode and result.has_changes else ExitCode.OK


def _blast_radius(plan: Plan, actual: QuotaState | None, principals: Sequence[Principal] | None,
                  streams: Streams) -> None:
    """Who the plan affects: per principal with a principals file, else a warning per default."""
    if not plan.has_changes:
        return
    if principals is None or actual is None:
        from kqplan.impact import default_warnings

        for warning in default_warnings(plan):
            streams.warn(warning.message)
        return
    from kqplan.impact import blast_radius, render_impact_text
    from kqplan.plan import apply_ops

    after = apply_ops(actual, plan.changes)
    streams.print("\n" + render_impact_text(blast_radius(actual, after, principals)), end="")
