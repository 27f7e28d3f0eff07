"""Verifying an alter: describe until every change shows (read-after-write lag), within a bound."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from kqplan.console import Progress
from kqplan.core.cluster import Cluster
from kqplan.core.plan import Change, same_value
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


def stored_differently(now: Quotas | None, change: Change) -> bool:
    """The entity moved away from ``before``, has the keys asked, but other values: the broker
    stored something else (a ZooKeeper-mode broker truncates 1235.0000001 to 1235)."""
    return (now is not None and change.after is not None and not matches(now, change.before)
            and now.keys() == change.after.keys())


def poll(cluster: Cluster, changes: Sequence[Change], policy: VerifyPolicy,
          requests: dict[str, int], progress: Progress) -> QuotaState:
    """Describe until every change shows (or shows as stored differently: waiting would not change
    it), or the deadline passes; the last state seen."""
    deadline = time.monotonic() + policy.timeout_s
    delay = policy.first_delay_s
    while True:
        progress("Verifying")
        requests["describe"] += 1
        state = cluster.describe()
        if all(matches(state.get(c.entity), c.after) or stored_differently(state.get(c.entity), c)
               for c in changes):
            return state
        if time.monotonic() + delay > deadline:
            return state
        time.sleep(delay)
        delay = min(delay * policy.growth, policy.max_delay_s)
