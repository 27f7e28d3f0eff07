"""``apply --verify-enforcement[=WINDOW]``: after the alter, watch the brokers' metrics until Kafka
is seen to enforce what the plan changed, bucket by bucket, and say so with the numbers.

Before the alter: which buckets to watch — each bucket *as the plan leaves it* whose quota or
members the plan changes (:func:`kqplan.core.enforcement.watch_list`, Kafka's precedence moving
connections between buckets included), among those with usage in the last :data:`BASELINE` —
and, beside each, the forecast ``plan --usage-from-metrics`` makes from that usage
(:func:`kqplan.commands.forecast.verdicts`). A Prometheus that cannot answer stops the apply
there, nothing sent.

After the alter: every :data:`POLL` seconds, each watched bucket's readings since the change
(:func:`kqplan.metrics.readings.bucket_readings`) go to the judge
(:func:`kqplan.core.enforcement.judge`), with the sensor windows of the cluster's brokers
(:mod:`kqplan.core.sensors`, read with DescribeConfigs before the alter). The watch ends when every
bucket is decided or WINDOW has passed since the alter.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from kqplan.commands.forecast import Metrics, pulled_samples, throttled_in, verdicts
from kqplan.core.buckets import shown
from kqplan.core.enforcement import Outcome, Sensors, Verdict, Watch, judge, watch_list
from kqplan.core.errors import KqplanError
from kqplan.core.sensors import CONTROLLER_KEY, ClusterSettings, seconds
from kqplan.core.state import QuotaState
from kqplan.fleet.impact import impact_rows, measured_bucket
from kqplan.metrics.readings import bucket_readings
from kqplan.metrics.throttled import Window

BASELINE = 300.0
"""Seconds of usage before the alter that the watch list and the forecast rest on."""
CLOCKS = 2.0
"""Seconds added to the alter's end before readings count as after it: the brokers apply a new
quota a moment after the controller commits it, and Prometheus's clock is not this machine's."""
POLL = 2.0
DEFAULT_WINDOW = 120.0
MARGIN = 30.0
"""Seconds the default window leaves after the slowest sensor's memory."""


@dataclass(frozen=True, slots=True)
class Verification:
    verdicts: tuple[Verdict, ...]
    waited: float
    window: float
    sensors: dict[str, Sensors]
    """Per key watched: the sensors the verdicts rest on."""

    @property
    def contradicted(self) -> int:
        return sum(v.outcome is Outcome.CONTRADICTED for v in self.verdicts)


def sensors_of(settings: ClusterSettings, key: str) -> Sensors:
    """The sensors of ``key`` on the brokers that remember longest."""
    usage = settings.usage(key)
    burst = settings.token_bucket / usage.memory if key == CONTROLLER_KEY else 0.0
    return Sensors(usage, settings.throttle, burst)


def expectations(metrics: Metrics, before: QuotaState, after: QuotaState, name: str,
                 end: float) -> list[Watch]:
    """What to watch: the buckets as the plan leaves them whose quota or members it changes, among
    those with usage in the last :data:`BASELINE` s, each with the forecast from that usage."""
    window = Window(end, BASELINE, 10.0)
    samples = pulled_samples(metrics, window, name)
    measured = {(measured_bucket(s.user, s.client_id, s.bucket), s.key) for s in samples if s.value > 0}
    watches = watch_list(before, after, measured)
    if not watches:
        return []
    impact = impact_rows({name: (before, after)}, samples, None)
    judged = verdicts(impact, name, throttled_in(metrics, window))
    found = []
    for watch in watches:
        row, throttle = judged.get((shown(watch.bucket), watch.key), (None, None))
        found.append(replace(watch, expect=throttle if row is not None else None,
                             demand=row.usage if row is not None else None))
    return found


def default_window(settings: ClusterSettings, keys: Sequence[str]) -> float:
    """The default ``--verify-enforcement`` window: time for the slowest sensor to forget what came
    before the change, and for a few readings after; at least :data:`DEFAULT_WINDOW`."""
    longest = max((s.throttle.memory + s.usage.clean for s in (sensors_of(settings, k) for k in keys)),
                  default=0.0)
    return max(DEFAULT_WINDOW, longest + MARGIN)


def check_watchable(window: float, settings: ClusterSettings, keys: Sequence[str], given: str | None) -> None:
    """Refuse a window in which no watched bucket can be judged (before the alter: nothing sent)."""
    if not keys:
        return
    shortest = min(sensors_of(settings, k).usage.clean for k in keys)
    if window > shortest + 3 * POLL:
        return
    usage = sensors_of(settings, keys[0]).usage
    raise KqplanError(
        f"--verify-enforcement {given or ''}: the brokers' usage readings hold only records after a "
        f"change {seconds(shortest)} after it ({usage.settings[0]} {usage.samples} + 1 samples of "
        f"{usage.settings[1]} {usage.window:g} s): a window of {seconds(window)} cannot show one",
        hint=f"give more than {math.ceil(shortest + 3 * POLL)}s, or leave the window out (the default "
             "waits for the throttle sensor too)")


def verify(metrics: Metrics, watches: Sequence[Watch], *, changed: float, window: float,
           settings: ClusterSettings, progress: Callable[[str], None],
           clock: Callable[[], float] = time.time,
           sleep: Callable[[float], None] = time.sleep) -> Verification:
    """Poll until ``window`` seconds after ``changed`` (the alter's end) or until every bucket is
    decided."""
    keys = sorted({w.key for w in watches})
    sensors = {k: sensors_of(settings, k) for k in keys}
    if not watches:
        return Verification((), 0.0, window, sensors)
    since = changed + CLOCKS
    decided: dict[int, Verdict] = {}  # a decided bucket stays decided (a muted one reads 0 later)
    while True:
        now = clock()
        waiting = [(i, w) for i, w in enumerate(watches) if i not in decided]
        watched = {k: [w.bucket for _, w in waiting if w.key == k] for k in keys}
        found = bucket_readings(metrics.server, metrics.names, metrics.extra, watched, since=since, at=now)
        latest = {i: judge(w, found[w.bucket, w.key], changed=since, sensors=sensors[w.key])
                  for i, w in waiting}
        decided.update((i, replace(v, decided_at=now)) for i, v in latest.items()
                       if v.outcome is not Outcome.NOT_YET)
        progress(f"Verifying enforcement: {len(decided)} of {len(watches)} buckets decided "
                 f"({now - changed:.0f} s of {window:.0f} s)")
        if len(decided) == len(watches) or now >= changed + window:
            results = tuple(decided.get(i) or latest[i] for i in range(len(watches)))
            return Verification(results, now - changed, window, sensors)
        sleep(min(POLL, max(0.0, changed + window - now)))


def check_window(text: str | None) -> float | None:
    """``--verify-enforcement[=WINDOW]``: the window in seconds; None: the default, which depends
    on the brokers' settings (:func:`default_window`)."""
    from kqplan.core.units import duration_option

    if text is None or text == "":
        return None
    return duration_option(text, "--verify-enforcement")

