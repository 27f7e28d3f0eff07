"""The apply protocol (DESIGN §3.5): pre-flight, alter, verify, report — per entity.

1. The caller refreshes (one describe) and, for a saved plan, :func:`check_stale` refuses a
   plan whose ``before`` no longer holds.
2. ``validateOnly`` for every entry: any entity error → report them all, change nothing.
3. The planned entities are described once more: one moved since the plan (another writer; Kafka
   has no compare-and-set) stops the apply, nothing sent. Then the real alter. Kafka answers per
   entity.
   Requests are split only where one would pass Kafka's 10 000-record cap. The first batch whose
   answer is lost (timeout, dropped connection) or that cannot be sent stops the apply: the
   batches after it are ``not sent``. (A KRaft controller writes one request as one atomic
   batch of records, so a lost batch landed whole or not at all; a ZooKeeper-mode broker writes
   one znode per entity, so its entities are checked one by one. On KRaft, one entity of the
   lost batch seen at its new value says the whole batch landed.)
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
    landed_whole,
    matches,
    poll,
    stored_differently,
)
from kqplan.console import Progress
from kqplan.core.cluster import Alteration, AlterNotSent, AlterOutcomeUnknown, Cluster, EntityResult
from kqplan.core.entity import Entity
from kqplan.core.errors import KqplanError
from kqplan.core.plan import Change, Plan
from kqplan.core.report import ApplyReport, Outcome, RunStatus, Status
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
    check_unmoved(plan, actual, "plan is stale: ", "since the plan was made")


def check_unmoved(plan: Plan, actual: QuotaState, lead: str, since: str) -> None:
    """Refuse to go on when an entity the plan changes is no longer at its ``before``: another
    writer changed it (Kafka has no compare-and-set for quotas, so this is checked by describing)."""
    moved = [c.display for c in plan.changes if not matches(actual.get(c.entity), c.before)]
    if moved:
        shown = ", ".join(moved[:5]) + (f" and {len(moved) - 5} more" if len(moved) > 5 else "")
        raise KqplanError(
            f"{lead}{len(moved)} entit{'y' if len(moved) == 1 else 'ies'} changed on the "
            f"cluster {since} ({shown}); nothing was changed",
            hint="another writer changed them (another apply, kafka-configs.sh, an operator): "
                 "run `kqplan plan` again and review the new plan")


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


class Journal:
    """What an apply has done so far: which batches went out, what the broker answered, which
    answer was lost. Whatever stops the apply (an error, Ctrl-C), :meth:`report` gives an outcome
    per entity from it: acknowledged ones ``unverified``, the batch in flight ``unknown``, the
    rest ``not sent``."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.requests = {"describe": 0, "alter_validate": 0, "alter": 0}
        self.notes: list[str] = []
        self.batches = 0
        self.answered: dict[Entity, EntityResult] = {}
        self.in_flight: set[Entity] = set()
        """Sent, answer not (yet) read: lost when the apply stops."""
        self.late: set[Entity] = set()
        """Of ``in_flight``, those whose alter timed out: the broker may still apply them."""

    def report(self, status: RunStatus, error: str | None = None) -> ApplyReport:
        """The outcomes known now, nothing verified."""
        outcomes = tuple(self._unverified(c) for c in self.plan.changes)
        return ApplyReport(self.plan.cluster, outcomes, False, self.batches, dict(self.requests),
                           self.plan.unchanged, tuple(self.notes), status=status, error=error)

    def _unverified(self, change: Change) -> Outcome:
        result = self.answered.get(change.entity)
        if result is not None:
            return (Outcome(change, Status.UNVERIFIED) if result.ok else
                    Outcome(change, Status.FAILED, result.error_code, result.error_message))
        return Outcome(change, Status.UNKNOWN if change.entity in self.in_flight else Status.NOT_SENT)


def apply(cluster: Cluster, plan: Plan, *, verify: VerifyPolicy | None = None,
          progress: Progress = _quiet, cap: int | None = None,
          journal: Journal | None = None) -> ApplyReport:
    """Run steps 2–4 for a plan the caller has shown, confirmed and checked for staleness.
    ``journal``: the caller's, to report what is known if this raises (Ctrl-C, a bug)."""
    journal = journal if journal is not None else Journal(plan)
    verify = verify if verify is not None else DEFAULT_VERIFY
    cap = cap if cap is not None else MAX_RECORDS_PER_REQUEST  # read now: a test may lower it
    if plan.cluster.mode == "zookeeper":
        cap = min(cap, ZOOKEEPER_RECORDS_PER_REQUEST)
    groups = batches(plan.changes, cap)
    journal.batches = len(groups)
    journal.notes.extend(_batch_notes(plan, groups, cap))
    requests = journal.requests

    # 2. pre-flight: validateOnly for every entry, in the same batches as the real alter
    failures = _preflight(cluster, groups, requests, progress)
    if failures:
        outcomes = tuple(
            Outcome(c, Status.FAILED, failures[c.entity].error_code, failures[c.entity].error_message)
            if c.entity in failures else Outcome(c, Status.SKIPPED)
            for c in plan.changes)
        return ApplyReport(plan.cluster, outcomes, True, len(groups), requests, plan.unchanged,
                           tuple(journal.notes))

    # 3. the planned entities described again right before the first change (a plan may have
    # waited for its confirmation), then the real alter, batch after batch; the first lost answer
    # or failure stops it
    progress("Checking that the plan still holds")
    requests["describe"] += 1
    check_unmoved(plan, cluster.describe(), "", "since the plan was made")
    stopped = _alter(cluster, groups, journal, progress)

    # 4. verify with describe, polling with a bound for read-after-write lag
    started, polls = time.monotonic(), requests["describe"]
    outcomes = _verify(cluster, plan, journal, verify, progress=progress, stopped=stopped)
    return ApplyReport(plan.cluster, outcomes, False, len(groups), requests, plan.unchanged,
                       tuple(journal.notes), requests["describe"] - polls,
                       time.monotonic() - started if requests["describe"] > polls else 0.0)


def _verify(cluster: Cluster, plan: Plan, journal: Journal, verify: VerifyPolicy, *,
            progress: Progress, stopped: str | None) -> tuple[Outcome, ...]:
    """Describe what was sent (acknowledged, or in the batch whose answer was lost) until it
    shows; an outcome per change. On a KRaft cluster the lost batch is one atomic batch of
    records: one of its entities seen at its new value says the whole batch landed."""
    answered, lost = journal.answered, journal.in_flight
    to_check = [c for c in plan.changes if c.entity in lost or (
        c.entity in answered and answered[c.entity].ok)]
    whole = [c for c in plan.changes if c.entity in lost] if plan.cluster.mode == "kraft" else []
    observed: QuotaState | None = {}
    if to_check:
        try:
            observed = poll(cluster, to_check, verify, journal.requests, progress, whole=whole)
        except KqplanError as exc:  # the alter went out: an outcome per entity, and the report, still
            journal.notes.append(f"Verify failed ({exc.message}): the entities sent could not be "
                                 "checked (acknowledged ones are unverified, the lost batch's unknown).")
            observed = None
    elif stopped is not None:
        journal.notes.append("Nothing was changed.")
    landed = observed is not None and bool(whole) and landed_whole(observed, whole)
    if landed:
        journal.notes.append("The lost batch's outcome was resolved by describing: it landed (one of "
                             "its entities shows its new value, and a KRaft controller writes one "
                             "request as one batch, whole or not at all).")
    elif lost and observed is not None:
        journal.notes.append("The lost batch's outcome was resolved by describing.")
    return tuple(_outcome(change, answered.get(change.entity), observed, lost, journal.late,
                          landed=landed)
                 for change in plan.changes)


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


def _alter(cluster: Cluster, groups: Sequence[Sequence[Change]], journal: Journal,
           progress: Progress) -> str | None:
    """The real alter of every batch, into ``journal``, until one fails: then nothing more is
    sent (a broker that lost one answer, or that cannot be reached, is not sent the next batch)
    and what stopped it is returned, in words."""
    for i, group in enumerate(groups, 1):
        progress(f"Applying batch {i}/{len(groups)} ({len(group)} entities)")
        journal.requests["alter"] += 1
        journal.in_flight = {c.entity for c in group}
        started = time.monotonic()
        try:
            results = _results(cluster.alter(_alterations(group), validate_only=False))
            _check_complete(group, results)
        except AlterOutcomeUnknown as exc:
            if exc.timed_out:
                journal.late = set(journal.in_flight)
                what = (f"timed out after {_seconds(time.monotonic() - started)} "
                        "(it may still be applied)")
            else:
                what = f"lost its answer ({exc.message})"
            return _stop(journal, i, len(groups), what)
        except AlterNotSent as exc:  # refused before the request was written: nothing landed
            journal.in_flight = set()
            journal.requests["alter"] -= 1
            return _stop(journal, i, len(groups), f"could not be sent ({exc.message})", sent=False)
        except KqplanError as exc:  # anything else came after the broker had the request
            return _stop(journal, i, len(groups), f"failed ({exc.message}): its outcome is unknown")
        journal.answered.update(results)
        journal.in_flight = set()
    return None


def _seconds(elapsed: float) -> str:
    return f"{elapsed:.0f} s" if elapsed >= 10 else f"{elapsed:.1f} s"


def _stop(journal: Journal, i: int, n: int, what: str, *, sent: bool = True) -> str:
    """Note why the apply stopped at batch ``i`` of ``n``, and which batches were never sent."""
    first = i + 1 if sent else i
    rest = ("" if first > n else f"; batch {n} not sent" if first == n
            else f"; batches {first}–{n} not sent")
    message = f"batch {i} of {n} {what}{rest}"
    journal.notes.append(message[0].upper() + message[1:] + ".")
    return message


def _outcome(change: Change, result: EntityResult | None, observed: QuotaState | None,
             lost: set[Entity], late: set[Entity], *, landed: bool) -> Outcome:
    """One change's outcome from the broker's answer (None: lost, or never sent) and what
    describe showed (None: nothing could be seen); ``landed``: the lost batch is known to have
    landed whole (KRaft)."""
    if result is not None and not result.ok:
        return Outcome(change, Status.FAILED, result.error_code, result.error_message)
    if result is None and change.entity not in lost:
        return Outcome(change, Status.NOT_SENT)
    if observed is None:  # nothing could be seen: acknowledged ones are unverified, lost unknown
        return Outcome(change, Status.UNKNOWN if change.entity in lost else Status.UNVERIFIED)
    now = observed.get(change.entity)
    if matches(now, change.after):
        status = Status.APPLIED
    elif stored_differently(now, change):
        return Outcome(change, Status.STORED_DIFFERENTLY, stored=now)
    elif change.entity in lost and landed:
        # its batch landed whole, yet it shows another value: another writer's, since
        return Outcome(change, Status.CHANGED_UNDERNEATH, stored=now or {})
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
