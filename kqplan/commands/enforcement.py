"""``apply --verify-enforcement[=WINDOW]``: after the alter, watch the brokers' metrics until Kafka
enforces what the plan changed, and say so per quota bucket.

Before the alter, the expectation: the last :data:`BASELINE` of usage from Prometheus against the
quotas before and after the plan, as ``plan --usage-from-metrics`` judges it
(:func:`kqplan.commands.forecast.verdicts`), for the buckets whose quota the plan changes (an
after-bucket with another quota, or none, before) and the buckets throttled before that no
quota limits after. Then, polling Prometheus until WINDOW has passed (or every bucket is
settled):

- a bucket expected over its quota is **confirmed** once Kafka's throttle-time for it is above 0
  after the alter; **contradicted** when, :data:`SETTLE` after the alter, its usage passes the new
  quota by :data:`MARGIN` and Kafka has not throttled it; else **not yet observed**;
- a bucket expected within its quota (a raised, removed or new quota it does not reach) is
  **confirmed** when it has traffic :data:`SETTLE` after the alter and Kafka throttles it no more;
  **contradicted** when Kafka still throttles it then; **not yet observed** without traffic.

:data:`SETTLE` covers Kafka's quota window (``quota.window.num`` 11 × ``quota.window.size.seconds``
1 by default): throttle-time and byte-rate are means over it, so the old quota's samples fade
out only then.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from kqplan.commands.forecast import Metrics, metrics_of, pulled_samples, throttled_in, verdicts
from kqplan.config.model import ClusterEntry
from kqplan.core.buckets import OTHERS_SHOWN, shown
from kqplan.core.errors import KqplanError
from kqplan.core.state import QuotaState
from kqplan.fleet.impact import impact_rows
from kqplan.metrics.source import PrometheusSource
from kqplan.metrics.throttled import Window

BASELINE = 300.0
"""Seconds of usage before the alter that the expectation rests on."""
SETTLE = 15.0
"""Seconds after the alter before usage and throttling speak for the new quota."""
MARGIN = 1.1
"""A bucket's usage this far over its new quota, unthrottled, contradicts it."""
POLL = 2.0
DEFAULT_WINDOW = 120.0


class Outcome(StrEnum):
    CONFIRMED = "confirmed"
    NOT_YET = "not yet observed"
    CONTRADICTED = "contradicted"


@dataclass(frozen=True, slots=True)
class Expected:
    bucket: str
    key: str
    throttle: bool
    quota: float | None
    """The bucket's quota after the plan (None: no quota)."""


@dataclass(frozen=True, slots=True)
class Verified:
    expected: Expected
    outcome: Outcome
    detail: str


@dataclass(frozen=True, slots=True)
class Verification:
    results: tuple[Verified, ...]
    waited: float

    @property
    def contradicted(self) -> int:
        return sum(v.outcome is Outcome.CONTRADICTED for v in self.results)


def expectations(metrics: Metrics, before: QuotaState, after: QuotaState, name: str,
                 end: float) -> list[Expected]:
    """What the plan should make Kafka do to the buckets whose quota it changes."""
    window = Window(end, BASELINE, 10.0)
    samples = pulled_samples(metrics, window, name)
    censored = throttled_in(metrics, window)
    impact = impact_rows({name: (before, after)}, samples, None)
    judged = verdicts(impact, name, censored)
    was = {(b.bucket, b.key): b for b in impact.buckets if b.side == "before"}
    found = []
    for (bucket, key), (row, throttle) in sorted(judged.items()):
        old = was.get((bucket, key))
        if throttle is None or OTHERS_SHOWN in bucket or (
                old is not None and old.value == row.value):
            continue
        if not throttle and not (row.usage_max or row.usage):
            continue  # no usage: nothing Kafka could show
        found.append(Expected(bucket, key, throttle, row.value))
    for (bucket, key), old in sorted(was.items()):
        throttled_before = old.throttled is True or (bucket, key) in censored
        if throttled_before and (bucket, key) not in judged and OTHERS_SHOWN not in bucket:
            found.append(Expected(bucket, key, False, None))
    return found


def verify(flags: PrometheusSource, cluster: ClusterEntry | None, expected: list[Expected], *,
           since: float, window: float, progress: Callable[[str], None],
           metrics: Metrics | None = None) -> Verification:
    """Poll until ``window`` seconds after ``since`` (the alter) or until every bucket is settled."""
    if not expected:
        return Verification((), 0.0)
    metrics = metrics or metrics_of(flags, cluster)
    while True:
        now = time.time()
        results = _judged(expected, metrics, since, now)
        confirmed = sum(v.outcome is Outcome.CONFIRMED for v in results)
        progress(f"Verifying enforcement: {confirmed} of {len(expected)} buckets confirmed "
                 f"({now - since:.0f} s of {window:.0f} s)")
        settled = now >= since + SETTLE + 2 * POLL and all(v.outcome is not Outcome.NOT_YET for v in results)
        if settled or now >= since + window:
            return Verification(tuple(results), now - since)
        time.sleep(POLL)


def _judged(expected: list[Expected], metrics: Metrics, since: float, now: float) -> list[Verified]:
    """Each bucket's outcome, from what Prometheus holds at ``now``: one query per key for the
    throttling since the alter, one for the throttling after :data:`SETTLE`, one for the usage."""
    span = max(now - since, 1.0)
    after = throttled_in(metrics, Window(now, span, span))
    settled_for = now - (since + SETTLE)
    late = throttled_in(metrics, Window(now, settled_for, settled_for)) if settled_for >= 1 else frozenset()
    peaks = _peaks(metrics, now, settled_for) if settled_for >= 1 else {}
    return [_judge(e, (e.bucket, e.key) in after, (e.bucket, e.key) in late, peaks.get((e.bucket, e.key)))
            for e in expected]


def _judge(e: Expected, throttled: bool, still: bool, usage: float | None) -> Verified:
    if e.throttle:
        if throttled:
            return Verified(e, Outcome.CONFIRMED, "Kafka throttles it")
        if usage is not None and e.quota is not None and usage > e.quota * MARGIN:
            return Verified(e, Outcome.CONTRADICTED, f"its usage reached {usage:.0f}, over the quota "
                            f"{e.quota:g}, and Kafka did not throttle it")
        return Verified(e, Outcome.NOT_YET, "no throttling seen yet")
    if still:
        return Verified(e, Outcome.CONTRADICTED, f"Kafka still throttles it {SETTLE:g} s after the alter")
    if usage is not None:
        return Verified(e, Outcome.CONFIRMED, "traffic, and no throttling")
    return Verified(e, Outcome.NOT_YET, "no traffic since the alter")


def _peaks(metrics: Metrics, now: float, seconds: float) -> dict[tuple[str, str], float]:
    """Each bucket's highest usage on one broker in the last ``seconds``, by (bucket, key)."""
    from kqplan.metrics.throttled import peak_usage

    return {(shown(bucket), m.key): value for m in metrics.names.keys
            for bucket, value in peak_usage(metrics.server, m, metrics.names, metrics.extra,
                                            seconds=seconds, at=now).items()}


def check_window(text: str | None) -> float:
    """``--verify-enforcement[=WINDOW]``: the window in seconds (longer than :data:`SETTLE`)."""
    from kqplan.core.units import UnitError, parse_duration

    if text is None or text == "":
        return DEFAULT_WINDOW
    try:
        seconds = parse_duration(text)
    except UnitError as exc:
        raise KqplanError(f"--verify-enforcement: {exc}", hint=exc.hint) from None
    if seconds <= SETTLE:
        raise KqplanError(f"--verify-enforcement {text}: Kafka's quota window takes {SETTLE:g} s to "
                          "show a new quota", hint=f"give more than {SETTLE:g}s, e.g. 1m (the default 2m)")
    return seconds
