"""The apply protocol (DESIGN §3.5): pre-flight, alter, verify, report — per entity.

1. The caller refreshes (one describe) and, for a saved plan, :func:`check_stale` refuses a
   plan whose ``before`` no longer holds.
2. ``validateOnly`` for every entry: any entity error → report them all, change nothing.
3. The real alter. Kafka makes each entity atomic, not the request: results are per entity.
   Requests are split only where one would pass Kafka's 10 000-record cap.
4. One describe (polled with a bound, for read-after-write lag) verifies every change; an
   alter whose outcome was lost (timeout, dropped connection) is resolved by it. A value that
   is neither the one sent nor what the broker makes of it was written by another writer
   meanwhile (``changed underneath``): a fresh plan is needed.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from kqplan.apply.verify import (
    DEFAULT_VERIFY,
    VerifyPolicy,
    changed_underneath,
    matches,
    poll,
    stored_differently,
)
from kqplan.console import Progress
from kqplan.core.cluster import Alteration, AlterOutcomeUnknown, Cluster, EntityResult
from kqplan.core.entity import Entity
from kqplan.core.errors import KqplanError
from kqplan.core.plan import Change, Plan
from kqplan.core.report import ApplyReport, Outcome, Status
from kqplan.core.state import QuotaState

MAX_RECORDS_PER_REQUEST = 10_000  # QuorumController.MAX_RECORDS_PER_USER_OP
ZOOKEEPER_RECORDS_PER_REQUEST = 1_000
"""A ZooKeeper-mode broker has no cap, but writes one znode per entity before it answers: 5 000
entities took 20-35 s on the test machine, against a 30 s request.timeout.ms (the alter's outcome
then unknown). A thousand per request keeps each answer to a few seconds."""


def _quiet(_: str) -> None:
    return None


def check_stale(plan: Plan, actual: QuotaState, cluster_id: str | None) -> None:
    """Refuse a saved plan computed for another cluster or whose ``before`` moved."""
    if plan.cluster.id is None:
        raise KqplanError("the plan records no cluster id (it was made from a snapshot without "
                          "cluster_id), so it could be applied to any cluster: refused",
                          hint="plan against the cluster itself (or a snapshot that records its id)")
    if cluster_id != plan.cluster.id:
        raise KqplanError(f"the plan was made for cluster {plan.cluster.id}, not {cluster_id}",
                          hint="plan again against this cluster")
    moved = [c.display for c in plan.changes if not matches(actual.get(c.entity), c.before)]
    if moved:
        shown = ", ".join(moved[:5]) + (f" and {len(moved) - 5} more" if len(moved) > 5 else "")
        raise KqplanError(
            f"plan is stale: {len(moved)} entit{'y' if len(moved) == 1 else 'ies'} changed on the "
            f"cluster since the plan was made ({shown}); nothing was changed",
            hint="run `kqplan plan` again and review the new plan")


def records(change: Change) -> int:
    """Records the controller writes for this change: one per op (ops are all real changes)."""
    return len(change.ops)


def batches(changes: Sequence[Change], cap: int = MAX_RECORDS_PER_REQUEST) -> list[list[Change]]:
    """Split into requests of at most ``cap`` records; one request when it fits."""
    out: list[list[Change]] = [[]]
    size = 0
    for change in changes:
        n = records(change)
        if size + n > cap and out[-1]:
            out.append([])
            size = 0
        out[-1].append(change)
        size += n
    return out if out[0] else []


def _alterations(changes: Sequence[Change]) -> list[Alteration]:
    return [Alteration(c.entity, c.ops) for c in changes]


def _results(results: Sequence[EntityResult]) -> dict[Entity, EntityResult]:
    return {r.entity: r for r in results}


def apply(cluster: Cluster, plan: Plan, *, verify: VerifyPolicy = DEFAULT_VERIFY,
          progress: Progress = _quiet, cap: int = MAX_RECORDS_PER_REQUEST) -> ApplyReport:
    """Run steps 2–4 for a plan the caller has shown, confirmed and checked for staleness."""
    requests = {"describe": 0, "alter_validate": 0, "alter": 0}
    if plan.cluster.mode == "zookeeper":
        cap = min(cap, ZOOKEEPER_RECORDS_PER_REQUEST)
    groups = batches(plan.changes, cap)
    notes = _batch_notes(plan, groups, cap)

    # 2. pre-flight: validateOnly for every entry, in the same batches as the real alter
    failures = _preflight(cluster, groups, requests, progress)
    if failures:
        outcomes = tuple(
            Outcome(c, Status.FAILED, failures[c.entity].error_code, failures[c.entity].error_message)
            if c.entity in failures else Outcome(c, Status.SKIPPED)
            for c in plan.changes)
        return ApplyReport(plan.cluster, outcomes, True, len(groups), requests, plan.unchanged,
                           tuple(notes))

    # 3. the real alter
    answered, lost, late = _alter(cluster, groups, requests, progress, notes)

    # 4. verify with describe, polling with a bound for read-after-write lag
    to_check = [c for c in plan.changes if c.entity not in answered or answered[c.entity].ok]
    observed: QuotaState | None = {}
    polls = requests["describe"]
    started = time.monotonic()
    if to_check:
        try:
            observed = poll(cluster, to_check, verify, requests, progress)
        except KqplanError as exc:  # the alter went out: an outcome per entity, and the report, still
            notes.append(f"Verify failed ({exc.message}): the entities sent could not be checked.")
            observed = None
    lost_set = {c.entity for c in lost}
    outcomes_list = [_outcome(change, answered.get(change.entity), observed, lost_set, late)
                     for change in plan.changes]
    return ApplyReport(plan.cluster, tuple(outcomes_list), False, len(groups), requests,
                       plan.unchanged, tuple(notes), requests["describe"] - polls,
                       time.monotonic() - started if to_check else 0.0)


def _batch_notes(plan: Plan, groups: Sequence[Sequence[Change]], cap: int) -> list[str]:
    """Why the changes go out as several requests, when they do."""
    if len(groups) > 1 and cap == ZOOKEEPER_RECORDS_PER_REQUEST:
        return [f"The changes need {sum(map(records, plan.changes))} records: sent as {len(groups)} "
                f"requests of at most {cap} (a ZooKeeper-mode broker writes every entity to "
                "ZooKeeper before it answers)."]
    if len(groups) > 1:
        return [f"The changes need {sum(map(records, plan.changes))} records, more than Kafka's "
                f"{cap} per request: sent as {len(groups)} requests."]
    return []


def _preflight(cluster: Cluster, groups: Sequence[Sequence[Change]], requests: dict[str, int],
               progress: Progress) -> dict[Entity, EntityResult]:
    """validateOnly of every batch; the entities the broker refuses."""
    failures: dict[Entity, EntityResult] = {}
    for i, group in enumerate(groups, 1):
        progress(f"Validating batch {i}/{len(groups)} ({len(group)} entities)")
        requests["alter_validate"] += 1
        results = _results(cluster.alter(_alterations(group), validate_only=True))
        failures.update({e: r for e, r in results.items() if not r.ok})
        _check_complete(group, results)
    return failures


def _alter(cluster: Cluster, groups: Sequence[Sequence[Change]], requests: dict[str, int],
           progress: Progress, notes: list[str]
           ) -> tuple[dict[Entity, EntityResult], list[Change], set[Entity]]:
    """The real alter of every batch: the broker's answers, the changes whose answer was lost,
    and those of them that timed out (the broker may still apply them after we look)."""
    answered: dict[Entity, EntityResult] = {}
    lost: list[Change] = []
    late: set[Entity] = set()
    for i, group in enumerate(groups, 1):
        progress(f"Applying batch {i}/{len(groups)} ({len(group)} entities)")
        requests["alter"] += 1
        try:
            results = _results(cluster.alter(_alterations(group), validate_only=False))
        except AlterOutcomeUnknown as exc:
            notes.append(f"Batch {i}: {exc.message}; its outcome was resolved by describing.")
            lost.extend(group)
            if exc.timed_out:
                late.update(c.entity for c in group)
            continue
        _check_complete(group, results)
        answered.update(results)
    return answered, lost, late


def _outcome(change: Change, result: EntityResult | None, observed: QuotaState | None,
             lost: set[Entity], late: set[Entity]) -> Outcome:
    """One change's outcome from the broker's answer (None: lost) and what describe showed
    (None: nothing could be seen)."""
    if result is not None and not result.ok:
        return Outcome(change, Status.FAILED, result.error_code, result.error_message)
    if observed is None:  # nothing could be seen: acknowledged ones are unverified, lost unknown
        return Outcome(change, Status.UNKNOWN if change.entity in lost else Status.UNVERIFIED)
    now = observed.get(change.entity)
    if matches(now, change.after):
        status = Status.APPLIED
    elif stored_differently(now, change):
        return Outcome(change, Status.STORED_DIFFERENTLY, stored=now)
    elif change.entity in lost:
        # an alter that timed out may still land: "before" proves nothing then
        unchanged_yet = matches(now, change.before) and change.entity not in late
        status = Status.NOT_APPLIED if unchanged_yet else Status.UNKNOWN
    elif changed_underneath(now, change):
        # the broker took the alter; describe shows a third value: another writer's
        return Outcome(change, Status.CHANGED_UNDERNEATH, stored=now or {})
    else:
        status = Status.UNVERIFIED
    return Outcome(change, status)


def _check_complete(group: Sequence[Change], results: Mapping[Entity, EntityResult]) -> None:
    missing = [c.display for c in group if c.entity not in results]
    if missing:
        raise KqplanError(f"the broker answered without {len(missing)} of the entities sent "
                          f"(e.g. {missing[0]}); their outcome is unknown",
                          hint="run `kqplan plan` to see the cluster's state")
