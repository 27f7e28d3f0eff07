"""Verifying an alter: describe until every change shows (read-after-write lag), within a bound;
what describe shows instead is either the value as the broker stores it (``stored_differently``)
or another writer's (``changed_underneath``)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from kqplan import deadline
from kqplan.console import Progress
from kqplan.core.cluster import Cluster
from kqplan.core.plan import Change, same_value
from kqplan.core.quotas import QUOTA_KEYS, ValueType, zookeeper_whole
from kqplan.core.state import Quotas, QuotaState


@dataclass(frozen=True, slots=True)
class VerifyPolicy:
    """How long to poll describe for changes to show (read-after-write lag)."""

    timeout_s: float = 15.0
    # A real broker's read-after-write lag is usually tens of ms (its metadata log applies the
    # alter asynchronously): look again soon, then back off.
    first_delay_s: float = 0.02
    growth: float = 1.5
    max_delay_s: float = 1.0


DEFAULT_VERIFY = VerifyPolicy()


def matches(have: Quotas | None, want: Quotas | None) -> bool:
    if not have or not want:
        return not have and not want
    return have.keys() == want.keys() and all(same_value(have[k], want[k]) for k in have)


def kept_as(key: str, stored: float, sent: float) -> bool:
    """Whether a broker keeps ``sent`` as ``stored``: the same value (KRaft keeps the double), or
    for a LONG/INT key the whole number a ZooKeeper-mode broker stores (``zookeeper_whole``,
    docs/zk-rules.md §A4: 1235.0000001 and 1234.9999999 become 1235, NaN becomes 0)."""
    if same_value(stored, sent):
        return True
    spec = QUOTA_KEYS.get(key)
    if spec is None or spec.type is ValueType.DOUBLE:
        return False
    return zookeeper_whole(sent, spec.type.value) == stored


def stored_differently(now: Quotas | None, change: Change) -> bool:
    """The entity moved away from ``before`` to the keys asked, each value the one sent or what the
    broker makes of it (``kept_as``): the broker stores something else than asked, and re-running
    cannot change that."""
    after = change.after
    return (now is not None and after is not None and not matches(now, change.before)
            and now.keys() == after.keys() and all(kept_as(k, now[k], after[k]) for k in now))


def changed_underneath(now: Quotas | None, change: Change) -> bool:
    """Describe shows neither ``before`` nor the change nor what a broker stores of it: another
    writer changed the entity between the alter and this describe (a fresh plan is needed)."""
    return not matches(now, change.before) and not matches(now, change.after) and not (
        stored_differently(now, change))


def settled(now: Quotas | None, change: Change) -> bool:
    """Describe shows a final answer for this change: waiting longer would not change it."""
    return matches(now, change.after) or not matches(now, change.before)


def landed_whole(state: QuotaState, whole: Sequence[Change]) -> bool:
    """Whether the atomic batch ``whole`` (one KRaft request) landed: one of its entities shows
    its new value (then all of it was written, in one batch of records)."""
    return any(matches(state.get(c.entity), c.after) for c in whole)


def poll(cluster: Cluster, changes: Sequence[Change], policy: VerifyPolicy,
         requests: dict[str, int], progress: Progress, *, whole: Sequence[Change] = ()) -> QuotaState:
    """Describe until every change shows (or shows as stored differently, or as changed by another
    writer: waiting would not change it), or the deadline passes; the last state seen. ``whole``:
    changes sent as one atomic request whose answer was lost: once one of them shows, the rest
    are final too (a value other than the new one is another writer's)."""
    left = deadline.remaining()  # --timeout bounds the polls too
    give_up = time.monotonic() + (policy.timeout_s if left is None else min(policy.timeout_s, left))
    delay = policy.first_delay_s
    atomic = {c.entity for c in whole}
    while True:
        progress("Verifying")
        requests["describe"] += 1
        state = cluster.describe()
        landed = bool(whole) and landed_whole(state, whole)
        if all((landed and c.entity in atomic) or settled(state.get(c.entity), c) for c in changes):
            return state
        if time.monotonic() + delay > give_up:
            return state
        time.sleep(delay)
        delay = min(delay * policy.growth, policy.max_delay_s)
