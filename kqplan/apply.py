"""The apply protocol (DESIGN §3.5): pre-flight, alter, verify, report — per entity.

1. The caller refreshes (one describe) and, for a saved plan, :func:`check_stale` refuses a
   plan whose ``before`` no longer holds.
2. ``validateOnly`` for every entry: any entity error → report them all, change nothing.
3. The real alter. Kafka makes each entity atomic, not the request: results are per entity.
   Requests are split only where one would pass Kafka's 10 000-record cap.
4. One describe (polled with a bound, for read-after-write lag) verifies every change; an
   alter whose outcome was lost (timeout, dropped connection) is resolved by it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from kqplan.cluster.base import Alteration, AlterOutcomeUnknown, Cluster, EntityResult, error_name
from kqplan.console import Progress
from kqplan.entity import Entity
from kqplan.errors import KqplanError
from kqplan.plan import Action, Change, ClusterRef, Plan, same_value
from kqplan.state import Quotas, QuotaState

MAX_RECORDS_PER_REQUEST = 10_000  # QuorumController.MAX_RECORDS_PER_USER_OP
ZOOKEEPER_RECORDS_PER_REQUEST = 1_000
"""A ZooKeeper-mode broker has no cap, but writes one znode per entity before it answers: 5 000
entities took 20-35 s on the test machine, against a 30 s request.timeout.ms (the alter's outcome
then unknown). A thousand per request keeps each answer to a few seconds."""


class Status(StrEnum):
    APPLIED = "applied"  # the broker said yes, and describe shows the change
    UNVERIFIED = "unverified"  # the broker said yes, but describe never showed it
    FAILED = "failed"  # the broker refused the entity
    NOT_APPLIED = "not applied"  # outcome lost in transit; describe shows the old state
    UNKNOWN = "unknown"  # outcome lost; describe shows neither state
    SKIPPED = "skipped"  # pre-flight failed for the batch: nothing was sent for real
    STORED_DIFFERENTLY = "stored differently"  # the broker keeps another value (ZooKeeper truncates)


@dataclass(frozen=True, slots=True)
class Outcome:
    change: Change
    status: Status
    error_code: int = 0
    error_message: str | None = None
    stored: Quotas | None = None
    """What describe showed, when the cluster holds something else than asked."""

    @property
    def ok(self) -> bool:
        return self.status is Status.APPLIED


@dataclass(frozen=True, slots=True)
class ApplyReport:
    cluster: ClusterRef
    outcomes: tuple[Outcome, ...]
    preflight_failed: bool
    batches: int
    requests: Mapping[str, int]
    """Requests sent by the protocol: ``describe``, ``alter_validate``, ``alter``."""
    unchanged: int = 0
    notes: tuple[str, ...] = field(default=())
    verify_polls: int = 0
    """Describes verify needed before every change showed (or its deadline passed)."""
    verify_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.preflight_failed and all(o.ok for o in self.outcomes)

    def count(self, status: Status) -> int:
        return sum(o.status is status for o in self.outcomes)


@dataclass(frozen=True, slots=True)
class VerifyPolicy:
    """How long to poll describe for changes to show (read-after-write lag)."""

    timeout_s: float = 15.0
    # A real broker's read-after-write lag is usually tens of ms (its metadata log applies the
    # alter asynchronously): look again soon, then back off.
    first_delay_s: float = 0.02
    growth: float = 1.5
    max_delay_s: float = 1.0


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
    moved = [c.display for c in plan.changes if not _matches(actual.get(c.entity), c.before)]
    if moved:
        shown = ", ".join(moved[:5]) + (f" and {len(moved) - 5} more" if len(moved) > 5 else "")
        raise KqplanError(
            f"plan is stale: {len(moved)} entit{'y' if len(moved) == 1 else 'ies'} changed on the "
            f"cluster since the plan was made ({shown}); nothing was changed",
            hint="run `kqplan plan` again and review the new plan")


def _matches(have: Quotas | None, want: Quotas | None) -> bool:
    if not have or not want:
        return not have and not want
    return have.keys() == want.keys() and all(same_value(have[k], want[k]) for k in have)


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


def apply(cluster: Cluster, plan: Plan, *, verify: VerifyPolicy = VerifyPolicy(),
          progress: Progress = _quiet, cap: int = MAX_RECORDS_PER_REQUEST) -> ApplyReport:
    """Run steps 2–4 for a plan the caller has shown, confirmed and checked for staleness."""
    requests = {"describe": 0, "alter_validate": 0, "alter": 0}
    if plan.cluster.mode == "zookeeper":
        cap = min(cap, ZOOKEEPER_RECORDS_PER_REQUEST)
    groups = batches(plan.changes, cap)
    notes: list[str] = []
    if len(groups) > 1 and cap == ZOOKEEPER_RECORDS_PER_REQUEST:
        notes.append(f"The changes need {sum(map(records, plan.changes))} records: sent as {len(groups)} "
                     f"requests of at most {cap} (a ZooKeeper-mode broker writes every entity to "
                     "ZooKeeper before it answers).")
    elif len(groups) > 1:
        notes.append(f"The changes need {sum(map(records, plan.changes))} records, more than Kafka's "
                     f"{cap} per request: sent as {len(groups)} requests.")

    # 2. pre-flight: validateOnly for every entry, in the same batches as the real alter
    failures: dict[Entity, EntityResult] = {}
    for i, group in enumerate(groups, 1):
        progress(f"Validating batch {i}/{len(groups)} ({len(group)} entities)")
        requests["alter_validate"] += 1
        results = _results(cluster.alter(_alterations(group), validate_only=True))
        failures.update({e: r for e, r in results.items() if not r.ok})
        _check_complete(group, results)
    if failures:
        outcomes = tuple(
            Outcome(c, Status.FAILED, failures[c.entity].error_code, failures[c.entity].error_message)
            if c.entity in failures else Outcome(c, Status.SKIPPED)
            for c in plan.changes)
        return ApplyReport(plan.cluster, outcomes, True, len(groups), requests, plan.unchanged,
                           tuple(notes))

    # 3. the real alter
    answered: dict[Entity, EntityResult] = {}
    lost: list[Change] = []
    late: set[Entity] = set()  # timed out: the broker may still apply them after we look
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

    # 4. verify with describe, polling with a bound for read-after-write lag
    to_check = [c for c in plan.changes if c.entity not in answered or answered[c.entity].ok]
    observed: QuotaState | None = {}
    polls = requests["describe"]
    started = time.monotonic()
    if to_check:
        try:
            observed = _poll(cluster, to_check, verify, requests, progress)
        except KqplanError as exc:  # the alter went out: an outcome per entity, and the report, still
            notes.append(f"Verify failed ({exc.message}): the entities sent could not be checked.")
            observed = None
    lost_set = {c.entity for c in lost}
    outcomes_list: list[Outcome] = []
    for change in plan.changes:
        result = answered.get(change.entity)
        if result is not None and not result.ok:
            outcomes_list.append(Outcome(change, Status.FAILED, result.error_code, result.error_message))
            continue
        if observed is None:  # nothing could be seen: acknowledged ones are unverified, lost unknown
            status = Status.UNKNOWN if change.entity in lost_set else Status.UNVERIFIED
            outcomes_list.append(Outcome(change, status))
            continue
        now = observed.get(change.entity)
        if _matches(now, change.after):
            status = Status.APPLIED
        elif _stored_differently(now, change):
            outcomes_list.append(Outcome(change, Status.STORED_DIFFERENTLY, stored=now))
            continue
        elif change.entity in lost_set:
            # an alter that timed out may still land: "before" proves nothing then
            unchanged_yet = _matches(now, change.before) and change.entity not in late
            status = Status.NOT_APPLIED if unchanged_yet else Status.UNKNOWN
        else:
            status = Status.UNVERIFIED
        outcomes_list.append(Outcome(change, status))
    return ApplyReport(plan.cluster, tuple(outcomes_list), False, len(groups), requests,
                       plan.unchanged, tuple(notes), requests["describe"] - polls,
                       time.monotonic() - started if to_check else 0.0)


def _check_complete(group: Sequence[Change], results: Mapping[Entity, EntityResult]) -> None:
    missing = [c.display for c in group if c.entity not in results]
    if missing:
        raise KqplanError(f"the broker answered without {len(missing)} of the entities sent "
                          f"(e.g. {missing[0]}); their outcome is unknown",
                          hint="run `kqplan plan` to see the cluster's state")


def _stored_differently(now: Quotas | None, change: Change) -> bool:
    """The entity moved away from ``before``, has the keys asked, but other values: the broker
    stored something else (a ZooKeeper-mode broker truncates 1235.0000001 to 1235)."""
    return (now is not None and change.after is not None and not _matches(now, change.before)
            and now.keys() == change.after.keys())


def _poll(cluster: Cluster, changes: Sequence[Change], policy: VerifyPolicy,
          requests: dict[str, int], progress: Progress) -> QuotaState:
    """Describe until every change shows (or shows as stored differently: waiting would not change
    it), or the deadline passes; the last state seen."""
    deadline = time.monotonic() + policy.timeout_s
    delay = policy.first_delay_s
    while True:
        progress("Verifying")
        requests["describe"] += 1
        state = cluster.describe()
        if all(_matches(state.get(c.entity), c.after) or _stored_differently(state.get(c.entity), c)
               for c in changes):
            return state
        if time.monotonic() + delay > deadline:
            return state
        time.sleep(delay)
        delay = min(delay * policy.growth, policy.max_delay_s)


def report_to_json(report: ApplyReport) -> dict[str, Any]:
    """The ``--report`` file."""
    return {
        "format_version": 1,
        "cluster": {"id": report.cluster.id, "bootstrap": report.cluster.address,
                    "version": report.cluster.version, "mode": report.cluster.mode},
        "ok": report.ok,
        "preflight_failed": report.preflight_failed,
        "summary": {s.value.replace(" ", "_"): report.count(s) for s in Status}
        | {"unchanged": report.unchanged},
        "batches": report.batches,
        "requests": dict(report.requests),
        # the describes verify took: Kafka shows an alter after a short read-after-write lag
        "verify": {"polls": report.verify_polls, "seconds": round(report.verify_seconds, 3)},
        "notes": list(report.notes),
        "entities": [
            {
                "entity": o.change.entity.to_json(),
                "display": o.change.display,
                "action": o.change.action.value,
                "status": o.status.value,
                "error": None if not o.error_code else {
                    "code": o.error_code, "name": error_name(o.error_code), "message": o.error_message},
                # what the cluster holds: the stored values when they differ from those asked
                "after": dict(o.stored) if o.stored is not None else
                dict(o.change.after) if o.change.after is not None else None,
            }
            for o in report.outcomes
        ],
    }


def iter_failures(report: ApplyReport) -> Iterator[Outcome]:
    return (o for o in report.outcomes if o.status is not Status.APPLIED)


__all__ = ["MAX_RECORDS_PER_REQUEST", "Action", "AlterOutcomeUnknown", "ApplyReport", "Outcome",
           "Status", "VerifyPolicy", "apply", "batches", "check_stale", "report_to_json"]
