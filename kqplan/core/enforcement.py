"""Does Kafka enforce a changed quota? The judge of ``apply --verify-enforcement``, on what the
brokers measured of one quota bucket after the change (:mod:`kqplan.core.sensors` says what a
reading covers).

Usage is what Kafka enforces: on each record it compares the bucket's rate over its quota window
with the quota and throttles what would pass it, so an enforced bucket's usage is held at its
quota (measured on a real broker: 0.92–1.13 × the quota, median 1.01), and a bucket whose usage
stays well over its quota is not enforced. Throttle-time only corroborates: a reading above 0
says Kafka throttled the bucket in the throttle sensor's memory before it (60 s by default), so
it says "throttled after the change" only once that memory has passed since the change, or after
a reading of no throttling that no throttling before the change can follow (taken since the
change, or taken before it while the bucket's usage could not pass its old quota).

A quota lowered far under a bucket's usage makes Kafka delay its next response by what that usage
asks (``(usage / quota − 1) ×`` the quota window, ``QuotaUtils.throttleTime``: 152 s for a
consumer reading 226 KiB/s lowered to 16 KiB/s, on the real broker): its clients wait, and its
usage reads 0 meanwhile. Such a delay, as long as the new quota asks (within × 2), confirms it.

Per broker (each broker enforces its quota on its own), with the readings taken once the quota
window has passed since the change (:attr:`~kqplan.core.sensors.Sensor.clean`):

- **contradicted**: usage over the quota × :data:`OVER` (median of every such reading) — Kafka
  does not hold it; or usage over the quota × :data:`AT_QUOTA` while Kafka throttles nothing;
  or Kafka throttles it, after the change for sure, while every reading in the throttle sensor's
  memory, dense enough that no burst over the quota hides between two, stays under the quota ×
  :data:`FAR_UNDER` (it enforces some lower limit), or while no quota applies;
- **confirmed**: throttled after the change and held near the quota (the recent readings within
  :data:`HELD` and :data:`OVER` × the quota), or muted for as long as the new quota asks; or not
  throttled and under the quota;
- **not yet observed**: too few readings since the quota window passed, no traffic, or a
  throttle-time that may still be the echo of throttling before the change.

A bucket is contradicted when one broker contradicts it, confirmed when every broker with
traffic confirms it. The expectation (whether the usage before the change passes the new quota)
is shown beside the verdict; the verdict is Kafka's behaviour against the quota, so clients that
ask for less, or more, than before do not make a verdict wrong.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from kqplan.core.buckets import OTHERS, bucket_quota, classes, members, recording_shapes, sensor_of
from kqplan.core.entity import CLIENT_ID, USER, Entity
from kqplan.core.resolve import QuotaIndex, resolve
from kqplan.core.sensors import Sensor
from kqplan.core.state import QuotaState

OVER = 1.2
"""A bucket's usage this far over its quota (the median of the readings since the quota window
passed) is not held by Kafka: held buckets read at most 1.13 × their quota on a real broker."""
AT_QUOTA = 1.05
"""Usage this far over the quota with no throttling at all: Kafka would have throttled it."""
HELD = 0.8
"""A throttled bucket's recent usage at least this share of its quota: held at the quota."""
FAR_UNDER = 0.5
"""Throttled while every reading stays under this share of the quota: another limit applies."""
RECENT = 3
"""Readings that make a bucket's recent usage (their median), and the fewest to judge on."""

Points = tuple[tuple[float, float], ...]
"""(time, value) readings in time order; a throttle-time value may be NaN (nothing throttled)."""


class Outcome(StrEnum):
    CONFIRMED = "confirmed"
    NOT_YET = "not yet observed"
    CONTRADICTED = "contradicted"


class Finding(StrEnum):
    """What the readings show; each finding has one outcome."""

    HELD = "held"
    """Throttled after the change, usage held near the quota (confirmed)."""
    UNDER = "under"
    """Not throttled, usage under the quota or no quota (confirmed)."""
    OVER = "over"
    """Usage over the quota × OVER (contradicted)."""
    OVER_UNTHROTTLED = "over, not throttled"
    """Usage over the quota × AT_QUOTA and nothing throttled (contradicted)."""
    THROTTLED_UNDER = "throttled under its quota"
    """Throttled after the change while far under the quota (contradicted)."""
    THROTTLED_UNLIMITED = "throttled without a quota"
    """Throttled after the change though no quota applies (contradicted)."""
    MUTED = "muted"
    """Throttled after the change by a delay as long as the new quota asks, its clients waiting
    (confirmed)."""
    TOO_SOON = "too soon"
    """Fewer than RECENT readings since the quota window passed (not yet)."""
    NO_TRAFFIC = "no traffic"
    """No usage since the change (not yet)."""
    ECHO = "throttle-time from before"
    """Throttle-time above 0 that may be the echo of throttling before the change (not yet)."""
    NO_THROTTLE_SERIES = "no throttle-time"
    """No throttle-time readings since the change (not yet)."""
    BELOW_HELD = "throttled below its quota"
    """Throttled, usage under HELD × the quota, not far enough under to contradict (not yet)."""
    LATELY_OVER = "over its quota lately"
    """Throttled, the recent readings over OVER × the quota, the whole not (not yet)."""


OUTCOMES: Mapping[Finding, Outcome] = {
    Finding.HELD: Outcome.CONFIRMED, Finding.UNDER: Outcome.CONFIRMED, Finding.MUTED: Outcome.CONFIRMED,
    Finding.OVER: Outcome.CONTRADICTED, Finding.OVER_UNTHROTTLED: Outcome.CONTRADICTED,
    Finding.THROTTLED_UNDER: Outcome.CONTRADICTED, Finding.THROTTLED_UNLIMITED: Outcome.CONTRADICTED,
}


@dataclass(frozen=True, slots=True)
class Watch:
    """A bucket as the plan leaves it, whose quota or members the plan changes: what to watch."""

    bucket: Entity
    key: str
    quota: float | None
    """Its quota after the plan, per broker (None: no quota applies)."""
    before: float | None = None
    """The quota its connections had before (None: none, or several different ones)."""
    expect: bool | None = None
    """The forecast from the usage before the change: True over the new quota, False under it,
    None unknown (a measured bucket the plan splits)."""
    demand: float | None = None
    """The usage before the change the forecast rests on (its members' summed)."""
    joined: tuple[Entity, ...] = ()
    """Buckets (before the plan) whose connections Kafka's precedence moves into this one."""
    split: bool = False
    """Reached only by measured buckets the plan splits: which of their connections come here, if
    any, no metric said (a bucket that stays without traffic is then no finding)."""


@dataclass(frozen=True, slots=True)
class Readings:
    """What the brokers measured of one bucket since the change, per broker."""

    usage: Mapping[str, Points]
    throttle: Mapping[str, Points]


@dataclass(frozen=True, slots=True)
class Sensors:
    """The sensors of one key on the cluster's brokers."""

    usage: Sensor
    throttle: Sensor
    burst: float = 0.0
    """Share of the quota a token bucket lets through on top of the rate (controller mutations:
    ``controller.quota.window.*`` over the usage sensor's memory); added to :data:`OVER`."""


@dataclass(frozen=True, slots=True)
class Verdict:
    watch: Watch
    outcome: Outcome
    finding: Finding
    broker: str | None = None
    """The broker whose readings decide (None: no broker measured the bucket)."""
    usage: float | None = None
    """The recent usage (the median of the last RECENT readings) on that broker."""
    overall: float | None = None
    """The median of every reading since the quota window passed."""
    readings: int = 0
    """How many usage readings since the quota window passed."""
    since: float | None = None
    """The time of the first of them (the change + the quota window)."""
    throttle_ms: float | None = None
    """The latest throttle-time reading (ms; None: NaN, nothing throttled)."""
    throttled_since: float | None = None
    """When throttling after the change was first certain."""
    echo_until: float | None = None
    """Until when a throttle-time reading may be the echo of throttling before the change."""
    muted_until: float | None = None
    """Muted: when the delay Kafka gave ends."""
    asked_ms: float | None = None
    """Muted: the delay the new quota asks for the usage before the throttling (ms)."""
    decided_at: float | None = None
    """When the watch decided it (set by the watch, not the judge: the judge has no clock)."""


def judge(watch: Watch, readings: Readings, *, changed: float, sensors: Sensors) -> Verdict:
    """The verdict on ``watch`` from ``readings`` of the brokers since ``changed`` (when the new
    quota took effect, seconds since the epoch)."""
    brokers = sorted(set(readings.usage) | set(readings.throttle))
    found = [_on_broker(watch, b, readings.usage.get(b, ()), readings.throttle.get(b, ()),
                        changed=changed, sensors=sensors) for b in brokers]
    if not found:
        return Verdict(watch, Outcome.NOT_YET, Finding.NO_TRAFFIC)
    against = [v for v in found if v.outcome is Outcome.CONTRADICTED]
    if against:
        return max(against, key=lambda v: v.usage or 0.0)
    active = [v for v in found if v.finding is not Finding.NO_TRAFFIC]
    if not active:
        return max(found, key=lambda v: v.readings)
    waiting = [v for v in active if v.outcome is Outcome.NOT_YET]
    if waiting:
        return waiting[0]
    return max(active, key=lambda v: v.usage or 0.0)


def _on_broker(watch: Watch, broker: str, usage: Points, throttle: Points, *, changed: float,
               sensors: Sensors) -> Verdict:
    clean_from = changed + sensors.usage.clean
    rates = [(t, v) for t, v in usage if math.isfinite(v) and v >= 0]
    post = [(t, v) for t, v in rates if t >= clean_from]
    could = _could_throttle(rates, watch.before, changed, sensors)
    state = _throttle_state(throttle, changed, sensors, could)
    overall = statistics.median(v for _, v in post) if post else None
    recent = statistics.median(v for _, v in post[-RECENT:]) if post else None
    mute = _mute(state, rates, watch.quota, sensors)

    def verdict(finding: Finding) -> Verdict:
        muted = finding is Finding.MUTED and mute is not None
        return Verdict(watch, OUTCOMES.get(finding, Outcome.NOT_YET), finding, broker, recent, overall,
                       len(post), post[0][0] if post else None, state.latest_ms, state.certain_at,
                       changed + sensors.throttle.memory, mute[0] if muted and mute else None,
                       mute[1] if muted and mute else None)

    if len(post) < RECENT:
        return verdict(Finding.TOO_SOON)
    assert recent is not None
    assert overall is not None
    quota = watch.quota
    if quota is not None and overall > quota * (OVER + sensors.burst):
        return verdict(Finding.OVER)
    if state.kind is _State.THROTTLED:
        if quota is None:
            return verdict(Finding.THROTTLED_UNLIMITED)
        if recent > quota * (OVER + sensors.burst):
            return verdict(Finding.LATELY_OVER)
        if recent >= quota * HELD:
            return verdict(Finding.HELD)
        if mute is not None and recent < quota * FAR_UNDER:
            return verdict(Finding.MUTED)
        assert state.latest_at is not None
        if _far_under(post, quota, state.latest_at, clean_from, sensors):
            return verdict(Finding.THROTTLED_UNDER)
        return verdict(Finding.BELOW_HELD)
    if recent == 0:
        return verdict(Finding.NO_TRAFFIC)
    if state.kind is _State.CLEAR:
        if quota is None or recent <= quota * AT_QUOTA:
            return verdict(Finding.UNDER)
        return verdict(Finding.OVER_UNTHROTTLED)
    return verdict(Finding.ECHO if state.kind is _State.ECHO else Finding.NO_THROTTLE_SERIES)


class _State(StrEnum):
    CLEAR = "clear"  # the latest reading since the change: nothing throttled in the sensor's memory
    THROTTLED = "throttled"  # above 0, and certainly from a response throttled after the change
    ECHO = "echo"  # above 0, maybe only from before the change
    NONE = "none"  # no reading since the change


@dataclass(frozen=True, slots=True)
class _Throttle:
    kind: _State
    latest_ms: float | None = None
    latest_at: float | None = None
    certain_at: float | None = None


def _throttle_state(throttle: Points, changed: float, sensors: Sensors,
                    could_throttle: Callable[[float], bool]) -> _Throttle:
    """What the throttle-time readings say of the time since ``changed``. A reading above 0 at
    ``t`` means a throttled response in (t − memory, t]; so it is from after the change when no
    throttling before the change can be in that span: when ``t`` is at least ``memory`` past the
    change, or when ``could_throttle(start)`` is false from the later of ``t − memory`` and the
    latest reading of no throttling before ``t`` (one taken since the change: nothing before it
    counts)."""
    memory = sensors.throttle.memory
    if not any(t >= changed for t, _ in throttle):
        return _Throttle(_State.NONE)
    certain_at = None
    cleared = -math.inf  # the latest reading of no throttling
    for t, v in throttle:
        if not v > 0:  # NaN (no throttled response in the sensor's memory) or 0
            cleared = t
        elif certain_at is None and (t >= changed + memory or cleared >= changed
                                     or not could_throttle(max(cleared, t - memory))):
            certain_at = t
    t, v = throttle[-1]
    if not v > 0:
        return _Throttle(_State.CLEAR, None, t, certain_at)
    kind = _State.THROTTLED if certain_at is not None else _State.ECHO
    return _Throttle(kind, v, t, certain_at)


def _could_throttle(rates: Sequence[tuple[float, float]], before: float | None, changed: float,
                    sensors: Sensors) -> Callable[[float], bool]:
    """Whether Kafka could have throttled the bucket under its old quota ``before`` between a time
    and the change: its usage then (the readings up to half a quota window past the change, each an
    average that a passing rate would lift) passed the old quota. ``before`` None: the bucket's
    tags had no quota before, nothing could throttle them."""
    def could(start: float) -> bool:
        if before is None:
            return False
        end = changed + sensors.usage.memory / 2
        return any(v > before for t, v in rates if start < t <= end)
    return could


def _mute(state: _Throttle, rates: Sequence[tuple[float, float]], quota: float | None,
          sensors: Sensors) -> tuple[float, float] | None:
    """(until when, the delay the quota asks in ms) when the bucket is muted: throttled after the
    change for sure, by a delay that has not run out at the latest reading and that is as long
    as the new quota asks of the usage just before it (within a factor 2), else None."""
    if state.kind is not _State.THROTTLED or quota is None or not quota > 0:
        return None
    assert state.certain_at is not None
    assert state.latest_ms is not None
    assert state.latest_at is not None
    until = state.certain_at + state.latest_ms / 1000
    before = [v for t, v in rates if state.certain_at - sensors.usage.memory <= t <= state.certain_at]
    if not before or until <= state.latest_at:
        return None
    asked = (max(before) / quota - 1) * sensors.usage.memory * 1000
    if not asked > 0 or not 0.5 <= state.latest_ms / asked <= 2:
        return None
    return until, asked


def _far_under(post: Sequence[tuple[float, float]], quota: float, latest: float, clean_from: float,
               sensors: Sensors) -> bool:
    """Every usage reading in the throttle sensor's memory before ``latest`` (all of them clean)
    under ``quota`` × FAR_UNDER, taken close enough together (half the usage sensor's memory)
    that a burst over the quota would show in one."""
    start = latest - sensors.throttle.memory
    if start < clean_from:
        return False  # the throttling may have met usage from before the change
    span = [(t, v) for t, v in post if start < t <= latest]
    gap = sensors.usage.memory / 2
    times = [start, *(t for t, _ in span), latest]
    return (len(span) >= RECENT and all(v < quota * FAR_UNDER for _, v in span)
            and all(b - a <= gap for a, b in itertools.pairwise(times)))


# -- what a plan changes, bucket by bucket ---------------------------------------------------------

def watch_list(before: QuotaState, after: QuotaState, measured: Iterable[tuple[Entity, str]]) -> list[Watch]:
    """The buckets, as the plan leaves them, whose quota or members the plan changes, among those
    the ``measured`` (bucket, key) pairs reach: each measured bucket's members (the connections
    Kafka counted in it before the plan: :func:`~kqplan.core.buckets.members` of its
    :func:`~kqplan.core.buckets.classes`) go to the bucket Kafka records them in after the plan
    (:func:`~kqplan.core.buckets.sensor_of`: their quota's bucket, or where Kafka records a
    connection no quota limits). A bucket is watched when its quota is not the one Kafka applied
    to its tags before, when connections join it from other buckets, or when some of its own
    leave. A class standing for unnamed connections (``(others)``) is never a bucket to watch."""
    pairs = sorted(set(measured), key=lambda m: (m[1], m[0].sort_key()))
    named = [*before, *after, *(b for b, _ in pairs)]  # the default entity names no one
    users = {name for e in named if (name := e.get(USER)) is not None}
    client_ids = {name for e in named if (name := e.get(CLIENT_ID)) is not None}
    was, now = QuotaIndex.of(before), QuotaIndex.of(after)
    shapes = {key: recording_shapes(after.items(), key) for key in {k for _, k in pairs}}
    into: dict[tuple[Entity, str], set[Entity]] = {}
    out: dict[tuple[Entity, str], set[Entity | None]] = {}
    whole: set[tuple[Entity, str]] = set()  # reached by a measured bucket all of whose members go there
    for bucket, key in pairs:
        inside = members(bucket, classes(bucket, users, client_ids), _source(was, key))
        dests = {sensor_of(now, key, user, client_id, shapes[key]) for user, client_id in inside}
        out[bucket, key] = dests
        for dest in dests:
            if dest is not None and OTHERS not in (dest.get(USER), dest.get(CLIENT_ID)):
                into.setdefault((dest, key), set()).add(bucket)
                if len(dests) == 1:
                    whole.add((dest, key))
    found = []
    for (dest, key), came in sorted(into.items(), key=lambda g: (g[0][1], g[0][0].sort_key())):
        quota = bucket_quota(now, dest, key)
        old = bucket_quota(was, dest, key)
        value, old_value = (quota[0] if quota else None), (old[0] if old else None)
        if value == old_value and came == {dest} and out.get((dest, key), {dest}) == {dest}:
            continue  # the same quota on the same connections
        joined = tuple(sorted((b for b in came if b != dest), key=Entity.sort_key))
        found.append(Watch(dest, key, value, old_value, joined=joined, split=(dest, key) not in whole))
    return found


def _source(index: QuotaIndex, key: str) -> Callable[[str, str], Entity | None]:
    return lambda user, client_id: resolve(index, user, client_id, overridden=False)[key].source
