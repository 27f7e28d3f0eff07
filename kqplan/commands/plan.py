"""``kqplan plan``: diff the manifests against one describe of the cluster."""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from kqplan.cluster.base import Cluster
from kqplan.commands.inputs import declared_profile, manifest_paths
from kqplan.config import ClusterEntry, ProjectConfig
from kqplan.console import Streams
from kqplan.diagnostics import Diagnostic, DiagnosticsError, render_text
from kqplan.entity import Entity
from kqplan.errors import ExitCode, KqplanError
from kqplan.manifest.compile import DesiredState, load_desired
from kqplan.perf import keep
from kqplan.plan import ClusterRef, Plan, diff
from kqplan.planfile import dumps_plan
from kqplan.render import MAX_COMMENT_CHARS, RENDERERS, Format
from kqplan.state import QuotaState, fingerprint, write_atomically
from kqplan.target import Target, open_cluster
from kqplan.versions import ClusterProfile
from kqplan.versions import diagnostics as version_diagnostics

if TYPE_CHECKING:
    from kqplan.impact import Impact
    from kqplan.principals import Principal


@dataclass(frozen=True, slots=True)
class Guardrails:
    """What a plan may do beyond the defaults of ``[policy]`` (flags of plan and apply)."""

    allow_mass_delete: bool = False
    fail_on_unmanaged: bool = False


DEFAULT_GUARDRAILS = Guardrails()


def load_checked(paths: Sequence[Path], config: ProjectConfig, streams: Streams, *,
                 quiet: bool = False) -> DesiredState:
    """Manifests that must be valid to go on: errors raise, warnings go to stderr (unless quiet)."""
    desired = load_desired(paths, config)
    if desired.errors:
        raise DiagnosticsError(desired.diagnostics)
    if desired.diagnostics and not quiet:
        streams.warn(render_text(desired.diagnostics))
    return desired


def lint_warnings(desired: DesiredState, plan: Plan) -> list[Diagnostic]:
    """validate's lint (shadowed keys, ``User:`` names) for the entries the plan changes: what a
    reviewer of this change should see (validate reports every entry)."""
    from kqplan.lint import lint

    changed = [c.entity for c in plan.changes if c.after is not None]
    return lint(desired, changed) if changed else []


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


def check_versions(desired: DesiredState, profile: ClusterProfile) -> None:
    """Refuse what the target's version or mode would refuse or store differently (KQP145)."""
    found = version_diagnostics(desired, profile)
    if found:
        raise DiagnosticsError(found)


def check_inventory_id(entry: ClusterEntry | None, cluster_id: str | None, address: str) -> None:
    """``--cluster NAME`` with an ``id``: the target reached must be that cluster."""
    if entry is None or entry.id is None or cluster_id == entry.id:
        return
    raise KqplanError(f"wrong cluster: [clusters.{entry.name}] demands id {entry.id}, but {address} is "
                      f"cluster {cluster_id or '(no id)'}",
                      hint="check the target of this cluster in kqplan.toml")


def compute_plan(desired: DesiredState, cluster: Cluster, config: ProjectConfig, *,
                 record_state: bool = True, actual: QuotaState | None = None,
                 entry: ClusterEntry | None = None) -> Plan:
    """One describe (unless ``actual`` was read already), then the diff; ``record_state`` adds
    the state's fingerprint."""
    ident = cluster.identity()
    check_inventory_id(entry, ident.cluster_id, ident.address)
    check_guard(desired, ident.cluster_id, ident.address, config)
    # before the describe is read (a describe sent ahead is left unread when this refuses)
    check_versions(desired, ClusterProfile.of(ident.version, ident.mode))
    if actual is None:
        actual = cluster.describe()
    ref = ClusterRef(ident.cluster_id, ident.address, ident.version, ident.mode)
    result = diff(desired.quotas, actual, desired.ownership, cluster=ref,
                  fingerprint=fingerprint(actual) if record_state else None, absent=desired.absent,
                  origin=lambda e: o.display if (o := desired.origins.get(e)) is not None else None,
                  metadata=desired.metadata)
    invalid = invalid_state_notes(actual, {c.entity for c in result.changes})
    keep(actual)
    return replace(result, notes=(*result.notes, *invalid)) if invalid else result


def invalid_state_notes(actual: QuotaState, changed: Collection[Entity]) -> list[str]:
    """Values on the cluster Kafka's KRaft rules refuse (0, negative, NaN: a ZooKeeper cluster
    stores them): reported, never silently kept; listing the entity in a manifest repairs them."""
    import itertools
    import math
    import operator

    from kqplan.quotas import QUOTA_KEYS, value_error

    def refused(key: str, value: float) -> bool:
        return key in QUOTA_KEYS and (math.isnan(value) or value_error(key, value) is not None)

    # A cluster repeats a few values (the decoder shares one dict among entities with the same
    # ones): judge each distinct dict's (key, value) once, walk the entities only when one is
    # refused.
    distinct = {id(quotas): quotas for quotas in actual.values()}.values()
    if not any(itertools.starmap(refused, set(itertools.chain.from_iterable(
            map(operator.methodcaller("items"), distinct))))):
        return []
    notes = []
    for entity, quotas in actual.items():
        for key, value in sorted(quotas.items()):
            if key in QUOTA_KEYS and (math.isnan(value) or value_error(key, value) is not None):
                fix = ("this plan repairs it" if entity in changed
                       else "list the entity in a manifest (or prune it) to repair it")
                notes.append(f"invalid cluster state: {entity.display} {key}={value!r} is refused by "
                             f"Kafka's own rules ({value_error(key, value) or 'NaN'}); {fix}.")
    return sorted(notes)


def guardrail_problem(plan: Plan, desired: DesiredState | None, config: ProjectConfig,
                      guardrails: Guardrails) -> KqplanError | None:
    """The deletion brake and ``protect: true`` (saved plans: the brake only)."""
    from kqplan.policy import deletion_problem

    return deletion_problem(plan, config.policy, desired.protected if desired else (),
                            allow_mass_delete=guardrails.allow_mass_delete)


def unmanaged_problem(plan: Plan, config: ProjectConfig, guardrails: Guardrails) -> KqplanError | None:
    """With --fail-on-unmanaged (or ``allow-unmanaged = false``), unmanaged entities are an error."""
    if not plan.unmanaged or not (guardrails.fail_on_unmanaged or not config.policy.allow_unmanaged):
        return None
    n = len(plan.unmanaged)
    return KqplanError(f"{n} entit{'y' if n == 1 else 'ies'} on the cluster {'is' if n == 1 else 'are'} not "
                       "managed by these manifests",
                       hint="adopt them with `kqplan import --all-unmanaged DIR`, or cover them with an "
                       "ownership scope")


def _notes(plan: Plan, warnings: Sequence[Diagnostic]) -> tuple[str, ...]:
    from kqplan.impact import default_warnings

    lint = [render_text([d]).splitlines()[0] for d in warnings]
    return (*plan.notes, *(w.message for w in default_warnings(plan)), *lint)


def apply_hint(out: Path, target: Target, cluster: ClusterEntry | None, config_flag: Path | None) -> str:
    """A command that applies the saved plan, runnable as printed."""
    words = ["kqplan"]
    if config_flag is not None:
        words += ["--config", str(config_flag)]
    words += ["apply", "--plan", str(out)]
    if cluster is not None and not target.chosen() and target.command_config is None:
        words += ["--cluster", cluster.name]
    elif target.bootstrap:
        words += ["--bootstrap-server", target.bootstrap]
        if target.command_config is not None:
            words += ["--command-config", str(target.command_config)]
    elif target.sandbox:
        words += ["--sandbox"] + ([str(target.sandbox_seed)] if target.sandbox_seed else [])
    elif target.state is not None:
        return (f"Saved the plan to {out}. It was made against a snapshot, which cannot be changed: "
                "apply it to the live cluster with `kqplan apply --plan "
                f"{out} --bootstrap-server HOST:PORT` (it is refused if the cluster differs).")
    else:  # from KQPLAN_BOOTSTRAP_SERVER / KQPLAN_COMMAND_CONFIG: the same environment applies it
        pass
    return f"Saved the plan to {out}. Apply exactly these changes with: {' '.join(words)}"


def check_writable(out: Path, what: str) -> None:
    """Refuse early (before any request) an output path that cannot be written."""
    parent = out.parent if str(out.parent) else Path(".")
    if out.is_dir():
        raise KqplanError(f"{what} {out} is a directory", hint="give a file name")
    if not parent.is_dir():
        raise KqplanError(f"cannot write {what} {out}: directory {parent} does not exist",
                          hint=f"create it first (mkdir -p {parent})")
    if not os.access(parent, os.W_OK):
        raise KqplanError(f"cannot write {what} {out}: directory {parent} is not writable")


def plan(paths: Sequence[Path], target: Target, config: ProjectConfig, *, fmt: Format,
         out: Path | None, detailed_exitcode: bool, streams: Streams,
         principals: Path | None = None, cluster: ClusterEntry | None = None,
         guardrails: Guardrails = DEFAULT_GUARDRAILS, color: bool = False,
         config_flag: Path | None = None, github: bool = False,
         markdown_limit: int = MAX_COMMENT_CHARS) -> int:
    """``fmt`` text | markdown | json; ``github`` (with fmt=markdown ignored) prints workflow
    annotations instead."""
    if out is not None:
        check_writable(out, "the plan file")
    text_like = fmt is Format.TEXT
    given = target
    target = target.or_cluster(cluster)
    with ExitStack() as stack:
        ahead = describing_ahead(target, stack)
        desired = load_checked(manifest_paths(paths, cluster), config, streams, quiet=not text_like)
        check_versions(desired, declared_profile(cluster))  # offline: before anything is judged online
        who = None
        if principals is not None:
            from kqplan.principals import read_principals

            who = read_principals(principals)
        live = ahead if ahead is not None else stack.enter_context(open_cluster(target))
        with streams.progress() as progress:
            progress("Describing the cluster")
            actual = live.describe() if who is not None else None
            result = compute_plan(desired, live, config, entry=cluster,
                                  record_state=out is not None or fmt is Format.JSON, actual=actual)
    refused = guardrail_problem(result, desired, config, guardrails)
    warnings = lint_warnings(desired, result)
    if text_like and warnings:
        streams.warn(render_text(warnings))
    saved = replace(result, notes=_notes(result, warnings))
    # Nothing below reads the manifests: their text and compiled state (~100 MiB at 100k
    # entities) are let go before the plan's JSON is built in the memory they free.
    del desired
    encoded: str | None = None
    if out is not None and refused is None:  # a plan apply would refuse is not saved
        encoded = dumps_plan(saved)
        write_atomically(out, encoded)
    if fmt is Format.TEXT:
        from kqplan.render import render_text as render_plan_text

        streams.print(render_plan_text(result, color=color), end="")
    elif github:
        from kqplan.render_github import render_plan_github

        # lint warnings become annotations of their own, not notes as well
        streams.print(render_plan_github(replace(result, notes=_notes(result, ())), warnings), end="")
    elif fmt is Format.MARKDOWN:
        from kqplan.render import render_markdown

        streams.print(render_markdown(saved, max_chars=markdown_limit, impact=_impact(result, actual, who),
                                      artifact=str(out) if out is not None else None), end="")
    elif fmt is Format.JSON and encoded is not None:
        streams.print(encoded, end="")  # the same bytes as the file: encoded once
    else:
        streams.print(RENDERERS[fmt](saved), end="")
    if text_like:
        _blast_radius(result, actual, who, streams)
    if refused is not None:
        raise refused
    if out is not None and text_like:
        streams.print("\n" + apply_hint(out, given, cluster, config_flag))
    problem = unmanaged_problem(result, config, guardrails)
    if problem is not None:
        raise problem
    keep(result, saved)  # the state: compute_plan keeps it
    return ExitCode.CHANGES if detailed_exitcode and result.has_changes else ExitCode.OK


def describing_ahead(target: Target, stack: ExitStack) -> Cluster | None:
    """A live cluster (a bootstrap server) already reading its identity and state in a thread
    while the manifests load: the broker's work (0.8-1.45 s of CPU for 100k entities on real
    Kafka) overlaps kqplan's. Reads only, and nothing it finds is judged (guard, version, errors)
    before the manifests are valid; a target that cannot be opened is reported in its usual
    place, after them. So a describe is sent even when the manifests turn out invalid, or
    refused by the cluster's version rules; its answer is then never read. None for a snapshot
    or the in-process sandbox (same process: no gain)."""
    if target.state is not None or target.sandbox:
        return None
    try:
        live = stack.enter_context(open_cluster(target))
    except KqplanError:
        return None  # opened again after the manifests load, which raises it in order
    from kqplan.cluster.kafka import KafkaCluster

    if isinstance(live, KafkaCluster):
        live.describe_ahead()
    return live


def _impact(plan: Plan, actual: QuotaState | None, principals: Sequence[Principal] | None) -> Impact | None:
    if principals is None or actual is None:
        return None
    from kqplan.impact import blast_radius
    from kqplan.plan import apply_ops

    return blast_radius(actual, apply_ops(actual, plan.changes), principals)


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
