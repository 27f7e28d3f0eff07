"""A guarded plan of one cluster, as ``kqplan plan``, ``apply`` and every fleet job compute it:
valid manifests, the cluster guard and the inventory id, the Kafka version rules, one describe,
the diff, notes on invalid cluster state, then the guardrails (deletion brake, protected
entities, unmanaged entities)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path

from kqplan.config.model import ClusterEntry, ProjectConfig, toml_string, toml_table
from kqplan.console import Streams
from kqplan.core.cluster import Cluster
from kqplan.core.desired import DesiredState
from kqplan.core.diagnostics import Diagnostic, DiagnosticsError, render_text
from kqplan.core.entity import Entity
from kqplan.core.errors import KqplanError
from kqplan.core.plan import ClusterRef, Plan, diff
from kqplan.core.state import QuotaState, fingerprint
from kqplan.core.versions import ClusterProfile
from kqplan.core.versions import diagnostics as version_diagnostics
from kqplan.manifest.compile import load_desired
from kqplan.perf import keep
from kqplan.pipeline.target import Target, open_cluster


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
        from kqplan.core.lint import name_warnings

        raise DiagnosticsError([*desired.diagnostics, *name_warnings(desired)])
    if desired.diagnostics and not quiet:
        streams.warn(render_text(desired.diagnostics))
    return desired


def config_refusal(problems: Sequence[Diagnostic], paths: Sequence[Path],
                   config: ProjectConfig) -> DiagnosticsError:
    """kqplan.toml's problems, with the manifests' (checked against the file as far as it is
    valid): a plan is refused on either, and one run shows every one of them."""
    from kqplan.core.lint import name_warnings

    desired = load_desired(paths, config)
    return DiagnosticsError([*problems, *desired.diagnostics, *name_warnings(desired)])


def lint_warnings(desired: DesiredState, plan: Plan) -> list[Diagnostic]:
    """validate's lint (shadowed keys, ``User:`` names) for the entries the plan changes: what a
    reviewer of this change should see (validate reports every entry)."""
    from kqplan.core.lint import lint

    changed = [c.entity for c in plan.changes if c.after is not None]
    return lint(desired, changed) if changed else []


def check_guard(desired: DesiredState, cluster_id: str | None, address: str,
                config: ProjectConfig, entry: ClusterEntry | None = None) -> None:
    """Refuse a cluster other than the one the manifests' ``cluster:`` names. The guard may name
    an inventory cluster or be a cluster id (an inventory ``id`` is the same guard as its name):
    a name with an ``id`` holds on that id; a name without one holds when that very cluster is
    being planned (``--cluster NAME``: its target is the inventory's); an id holds on that id."""
    guard = desired.cluster_guard
    if guard is None:
        return
    name = config.cluster_name_for(guard)
    named = config.clusters.get(name) if name is not None else None
    if named is not None and named.id is None:
        if entry is not None and entry.name == named.name:
            return
        raise KqplanError(
            f"the manifests are guarded to cluster '{named.name}', which has no id in "
            f"{config.source or 'kqplan.toml'}, so {address} (cluster {cluster_id or '(no id)'}) cannot "
            f"be checked to be it", hint=f"plan with --cluster {named.name}, or record its id: "
            f"id = {toml_string(cluster_id)} under {toml_table('clusters', named.name)}" if cluster_id else
            f"plan with --cluster {named.name}")
    wanted = named.id if named is not None and named.id is not None else guard
    if cluster_id is None:
        raise KqplanError(f"manifests are guarded to cluster '{guard}', but {address} did not "
                          "report a cluster id", hint="use a snapshot that records cluster_id")
    if cluster_id == wanted:
        return
    shown = f"'{guard}' (id {wanted})" if wanted != guard else f"'{guard}'"
    hint = ("point kqplan at the right cluster, or map the name to this id under [clusters] in "
            "kqplan.toml")
    if entry is not None and entry.id is None and named is None:
        hint = (f"if {address} is {entry.name}, write `cluster: {entry.name}` in the manifests, or "
                f"record its id: id = {toml_string(cluster_id)} under {toml_table('clusters', entry.name)}")
    raise KqplanError(f"wrong cluster: the manifests are guarded to {shown}, but {address} "
                      f"is cluster {cluster_id}", hint=hint)


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
    the state's fingerprint. Budgets are divided by the cluster's broker count first, expiries
    annotate the changes they cause, and protected principals are judged on the result
    (:mod:`kqplan.pipeline.rollout`)."""
    from kqplan.pipeline import rollout

    ident = cluster.identity()
    check_inventory_id(entry, ident.cluster_id, ident.address)
    check_guard(desired, ident.cluster_id, ident.address, config, entry)
    # before the describe is read (a describe sent ahead is left unread when this refuses)
    check_versions(desired, ClusterProfile.of(ident.version, ident.mode))
    brokers = rollout.broker_count(desired, ident, entry)
    wanted, budgets = rollout.divided(desired, brokers, config)
    if actual is None:
        actual = cluster.describe()
    ref = ClusterRef(ident.cluster_id, ident.address, ident.version, ident.mode, brokers,
                     entry.name if entry is not None else None)
    result = diff(wanted, actual, desired.ownership, cluster=ref,
                  fingerprint=fingerprint(actual) if record_state else None, absent=desired.absent,
                  origin=lambda e: o.display if (o := desired.origins.get(e)) is not None else None,
                  metadata=desired.metadata, released=desired.released)
    result = rollout.annotate(result, desired, budgets, entry, ident.brokers)
    result = rollout.breaches(result, actual, desired, config)
    result = rollout.quota_tests(result, actual, desired)
    result = rollout.releases(result, actual, desired)
    invalid = invalid_state_notes(actual, {c.entity for c in result.changes})
    keep(actual)
    callbacks = cluster_diagnostics(cluster, entry.name if entry is not None else ident.address, config)
    warned = [render_text([d]).splitlines()[0] for d in callbacks if not d.is_error]
    refused = tuple(d for d in callbacks if d.is_error)
    if invalid or warned or refused:
        result = replace(result, notes=(*result.notes, *invalid, *warned),
                         breaches=(*result.breaches, *refused))
    return result


def cluster_diagnostics(cluster: Cluster, where: str, config: ProjectConfig) -> list[Diagnostic]:
    """What the brokers' settings say of enforcement (KQP175, KQP176): a quota callback, settings
    that could not be read. Read after the describe (one more request per broker)."""
    from kqplan.core.policy import callback_diagnostics

    return callback_diagnostics(cluster.broker_settings(), where, config.policy)


def invalid_state_notes(actual: QuotaState, changed: Collection[Entity]) -> list[str]:
    """Values on the cluster Kafka's KRaft rules refuse (0, negative, NaN: a ZooKeeper cluster
    stores them): reported, never silently kept; listing the entity in a manifest repairs them."""
    import itertools
    import math
    import operator

    from kqplan.core.quotas import QUOTA_KEYS, value_error

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
    """The deletion brake, ``protect: true`` and protected principals (KQP157, judged when the
    plan was computed; saved plans: the brake only)."""
    from kqplan.core.policy import deletion_problem

    found = deletion_problem(plan, config.policy, desired.protected if desired else (),
                             allow_mass_delete=guardrails.allow_mass_delete)
    if found is None and plan.breaches:
        return DiagnosticsError(plan.breaches)
    return found


def unmanaged_problem(plan: Plan, config: ProjectConfig, guardrails: Guardrails) -> KqplanError | None:
    """With --fail-on-unmanaged (or ``allow-unmanaged = false``), unmanaged entities are an error."""
    if not plan.unmanaged or not (guardrails.fail_on_unmanaged or not config.policy.allow_unmanaged):
        return None
    n = len(plan.unmanaged)
    return KqplanError(f"{n} entit{'y' if n == 1 else 'ies'} on the cluster {'is' if n == 1 else 'are'} not "
                       "managed by these manifests",
                       hint="adopt them with `kqplan import --all-unmanaged DIR`, or cover them with an "
                       "ownership scope")


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
