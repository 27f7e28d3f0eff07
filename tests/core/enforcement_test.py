"""The judge of ``apply --verify-enforcement`` (kqplan.core.enforcement) on readings shaped as a real
broker gives them (tests/metrics/recorded/ holds real ones: tests/metrics/enforcement_test.py), and
the watch list: which buckets, as the plan leaves them, a plan changes.

Kafka's sensors, as on the real broker with its defaults: usage readings clean 12 s after a change
(quota.window.num 11 + 1 samples of 1 s), throttle-time remembering 60 s (metrics.num.samples 2 ×
metrics.sample.window.ms 30000)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kqplan.core.enforcement import (
    Finding,
    Outcome,
    Readings,
    Sensors,
    Watch,
    judge,
    watch_list,
)
from kqplan.core.entity import Entity
from kqplan.core.sensors import BrokerSettings

P = "producer_byte_rate"
NAN = math.nan
T0 = 1_700_000_000.0
"""The change (the alter's end)."""
Q = 25_600.0
DEFAULTS = Sensors(BrokerSettings().usage(P), BrokerSettings().throttle)
SHORT = Sensors(BrokerSettings.of({"quota.window.num": "5", "metrics.sample.window.ms": "5000"}).usage(P),
                BrokerSettings.of({"metrics.sample.window.ms": "5000"}).throttle)


def series(start: float, end: float, value, step: float = 1.0) -> tuple[tuple[float, float], ...]:
    """Readings every ``step`` s from T0+start to T0+end; ``value`` a number or f(seconds after T0)."""
    count = round((end - start) / step) + 1
    return tuple((T0 + start + i * step, value(start + i * step) if callable(value) else value)
                 for i in range(count))


def verdict(usage, throttle, *, quota: float | None = Q, before: float | None = None, at: float,
            sensors: Sensors = DEFAULTS, broker: str = "b1") -> tuple[Outcome, Finding]:
    """The judge's verdict at T0+``at``, from readings up to then; ``before``: the bucket's quota
    before the change (None: none, nothing could throttle it then)."""
    cut = T0 + at
    readings = Readings({broker: tuple(p for p in usage if p[0] <= cut)},
                        {broker: tuple(p for p in throttle if p[0] <= cut)})
    found = judge(Watch(Entity.user("u"), P, quota, before), readings, changed=T0, sensors=sensors)
    return found.outcome, found.finding


def test_a_lowered_quota_kafka_holds_is_confirmed_once_its_throttling_is_certain():
    usage = series(-30, 90, lambda t: 50_000 if t < 0 else 25_700)
    throttle = series(-30, 90, lambda t: NAN if t < 1 else 140.0)  # not throttled before the change
    assert verdict(usage, throttle, at=10) == (Outcome.NOT_YET, Finding.TOO_SOON)  # quota window
    assert verdict(usage, throttle, at=20) == (Outcome.CONFIRMED, Finding.HELD)


def test_throttle_time_left_over_from_the_old_quota_confirms_nothing():
    """The issue's third row: usage stays 80 % over the new quota while throttle-time is still
    above 0 from the old one: Kafka does not enforce the new value."""
    usage = series(-30, 90, 1.8 * Q)
    throttle = series(-30, 90, lambda t: 900.0 if t < 40 else NAN)  # the echo of the old quota
    assert verdict(usage, throttle, at=20) == (Outcome.CONTRADICTED, Finding.OVER)


def test_a_raise_waits_for_the_throttle_sensor_to_forget_then_is_confirmed():
    """The issue's first row: raised 5 KiB -> 1 MiB; throttle-time stays at its last value for the
    sensor's memory after the last throttled response (at the change), then reads NaN."""
    usage = series(-30, 90, lambda t: 5_500 if t < 0 else 40_000)
    throttle = series(-30, 90, lambda t: 891.8 if t < 60 else NAN)
    raised = {"quota": 1024 * 1024, "before": 5120}
    for at in (15, 30, 59):
        assert verdict(usage, throttle, at=at, **raised) == (Outcome.NOT_YET, Finding.ECHO)
    assert verdict(usage, throttle, at=62, **raised) == (Outcome.CONFIRMED, Finding.UNDER)


def test_the_sensor_windows_are_the_brokers():
    """The same echo on a broker remembering 10 s (metrics.sample.window.ms 5000): decided then;
    with Kafka's defaults it would still be an echo. And usage is clean after 6 s, not 12."""
    usage = series(-30, 90, lambda t: 5_500 if t < 0 else 40_000)
    throttle = series(-30, 90, lambda t: 891.8 if t < 10 else NAN)
    raised = {"quota": 1024 * 1024, "before": 5120}
    assert verdict(usage, throttle, at=13, sensors=SHORT, **raised) == (Outcome.CONFIRMED, Finding.UNDER)
    assert verdict(usage, throttle, at=13, **raised)[1] is Finding.TOO_SOON
    assert verdict(usage, throttle, at=30, **raised)[1] is Finding.UNDER  # NaN: clear anyway
    held = series(-30, 90, lambda t: 891.8 if t < 10 else 300.0)  # throttled again after forgetting
    assert verdict(usage, held, at=20, sensors=SHORT, **raised)[0] is Outcome.CONTRADICTED
    assert verdict(usage, held, at=20, **raised)[1] is Finding.ECHO


def test_a_raise_kafka_ignores_is_contradicted_once_its_throttling_is_certain():
    """Still held at the old 5 KiB long after a raise to 1 MiB: throttled after the change for sure
    (past the sensor's memory), every reading of that memory far under the new quota."""
    usage = series(-30, 150, 5_500)
    throttle = series(-30, 150, 891.8)
    assert verdict(usage, throttle, quota=1024 * 1024, before=5120, at=50) == (Outcome.NOT_YET, Finding.ECHO)
    assert verdict(usage, throttle, quota=1024 * 1024, before=5120, at=80) == (Outcome.CONTRADICTED,
                                                                                Finding.THROTTLED_UNDER)


def test_sparse_scrapes_cannot_rule_out_a_burst_so_throttling_under_the_quota_is_not_judged():
    usage = series(-30, 150, 5_500, step=15)
    throttle = series(-30, 150, 891.8, step=15)
    assert verdict(usage, throttle, quota=1024 * 1024, before=5120, at=150) == (Outcome.NOT_YET,
                                                                                 Finding.BELOW_HELD)


def test_over_its_quota_without_any_throttling_is_contradicted():
    usage = series(-30, 60, 1.1 * Q)
    throttle = series(-30, 60, NAN)
    assert verdict(usage, throttle, at=20) == (Outcome.CONTRADICTED, Finding.OVER_UNTHROTTLED)
    assert verdict(series(-30, 60, 1.03 * Q), throttle, at=20) == (Outcome.CONFIRMED, Finding.UNDER)


def test_held_readings_up_to_a_bit_over_the_quota_are_held():
    """A real broker's held bucket reads 0.92-1.13 × its quota, second by second."""
    pattern = [1.01, 1.13, 0.92, 1.0, 1.05, 1.1, 0.95]
    usage = series(-30, 60, lambda t: Q * pattern[int(t) % len(pattern)])
    throttle = series(-30, 60, lambda t: NAN if t < 2 else 240.0)
    for at in range(15, 60, 5):
        assert verdict(usage, throttle, at=at) == (Outcome.CONFIRMED, Finding.HELD)


def test_throttled_without_a_quota_is_contradicted():
    usage = series(-30, 90, 20_000)
    throttle = series(-30, 90, lambda t: NAN if t < 2 else 500.0)
    assert verdict(usage, throttle, quota=None, at=20) == (Outcome.CONTRADICTED, Finding.THROTTLED_UNLIMITED)
    assert verdict(usage, series(-30, 90, NAN), quota=None, at=20) == (Outcome.CONFIRMED, Finding.UNDER)


def test_no_traffic_and_no_throttle_series_are_not_yet_observed():
    assert verdict(series(-30, 60, 0.0), series(-30, 60, NAN), at=30) == (Outcome.NOT_YET, Finding.NO_TRAFFIC)
    assert verdict(series(-30, 60, 10_000), (), at=30) == (Outcome.NOT_YET, Finding.NO_THROTTLE_SERIES)
    assert verdict((), (), at=30) == (Outcome.NOT_YET, Finding.TOO_SOON)


def test_one_broker_that_does_not_hold_the_bucket_contradicts_it():
    readings = Readings({"b1": series(-30, 40, 20_000), "b2": series(-30, 40, 2 * Q)},
                        {"b1": series(-30, 40, NAN), "b2": series(-30, 40, NAN)})
    found = judge(Watch(Entity.user("u"), P, Q), readings, changed=T0, sensors=DEFAULTS)
    assert (found.outcome, found.finding, found.broker) == (Outcome.CONTRADICTED, Finding.OVER, "b2")
    calm = Readings({"b1": series(-30, 40, 20_000), "b2": series(-30, 40, 0.0)},
                    {"b1": series(-30, 40, NAN), "b2": series(-30, 40, NAN)})
    found = judge(Watch(Entity.user("u"), P, Q), calm, changed=T0, sensors=DEFAULTS)
    assert (found.outcome, found.broker) == (Outcome.CONFIRMED, "b1")  # b2 has no traffic: no finding


def test_the_verdict_carries_its_numbers():
    usage = series(-30, 40, lambda t: 50_000 if t < 0 else 25_700)
    throttle = series(-30, 40, lambda t: NAN if t < 1 else 140.0)
    found = judge(Watch(Entity.user("u"), P, Q), Readings({"b1": usage}, {"b1": throttle}), changed=T0,
                  sensors=DEFAULTS)
    assert found.usage == 25_700
    assert found.readings == 40 - 12 + 1
    assert found.since == T0 + 12
    assert found.throttle_ms == 140.0
    assert found.throttled_since == T0 + 1
    assert found.echo_until == T0 + 60


# -- the watch list ------------------------------------------------------------------------------------

def _e(user=..., client=...) -> Entity:
    parts = []
    if user is not ...:
        parts.append(("user", user))
    if client is not ...:
        parts.append(("client-id", client))
    return Entity(tuple(parts))


BEFORE = {_e(None, None): {P: 100 * 2**20}, _e("raiser"): {P: 5120.0}, _e(None, "calm"): {P: 102_400.0},
          _e("lowered"): {P: 102_400.0}, _e("steady"): {P: 50_000.0}}
MEASURED = [(_e("raiser"), P), (_e("lowered"), P), (_e("steady"), P),
            *((_e("joiner", c), P) for c in ("j1", "j2", "j3", "calm"))]


def test_the_buckets_as_the_plan_leaves_them():
    after = {**BEFORE, _e("raiser"): {P: 1024 * 1024.0}, _e("lowered"): {P: 25_600.0},
             _e("joiner"): {P: 30_720.0}}
    found = {w.bucket: w for w in watch_list(BEFORE, after, MEASURED)}
    assert set(found) == {_e("raiser"), _e("lowered"), _e("joiner")}  # steady unchanged, no old pair
    joiner = found[_e("joiner")]
    assert (joiner.quota, joiner.before) == (30_720.0, None)
    assert set(joiner.joined) == {_e("joiner", c) for c in ("j1", "j2", "j3", "calm")}
    assert (found[_e("raiser")].quota, found[_e("raiser")].before) == (1024 * 1024.0, 5120.0)
    assert not any(w.split for w in found.values())


def test_a_member_moving_out_changes_the_bucket_it_leaves():
    """A measured {user=shared} bucket: which client-ids its usage came from no metric says. A new
    {user=shared, client-id=a} quota takes a's connections out of it: both buckets are watched,
    marked as reached by a split (a bucket that stays without traffic is then no finding)."""
    before = {**BEFORE, _e("shared"): {P: 50_000.0}}
    after = {**before, _e("shared", "a"): {P: 10_000.0}}
    found = {w.bucket: w for w in watch_list(before, after, [(_e("shared"), P)])}
    assert set(found) == {_e("shared", "a"), _e("shared")}
    assert (found[_e("shared", "a")].quota, found[_e("shared", "a")].before) == (10_000.0, 100 * 2**20)
    assert found[_e("shared")].quota == found[_e("shared")].before == 50_000.0  # same quota, fewer members
    assert all(w.split for w in found.values())


def test_a_removed_quota_is_watched_where_kafka_records_the_connections_then():
    after = {k: v for k, v in BEFORE.items() if k != _e("raiser")}
    found = {w.bucket: w for w in watch_list(BEFORE, after, [(_e("raiser"), P)])}
    # {user=<default>, client-id=<default>} applies now, a bucket per client-id: calm's (named) is
    # watched; the client-ids no entity names are (others), which no query can name
    assert set(found) == {_e("raiser", "calm")}
    only_users = {_e("raiser"): {P: 5120.0}, _e("other"): {P: 1.0}}
    found = watch_list(only_users, {_e("other"): {P: 1.0}}, [(_e("raiser"), P)])
    # with user quotas only, Kafka records every connection as {user=U}, limited or not
    assert [(w.bucket, w.quota, w.before) for w in found] == [(_e("raiser"), None, 5120.0)]


@pytest.mark.parametrize("unchanged", [BEFORE, {**BEFORE, _e("nobody"): {P: 1.0}}])
def test_a_plan_that_changes_nothing_measured_watches_nothing(unchanged):
    assert watch_list(BEFORE, unchanged, MEASURED) == []


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(["(others)", "qa(others)", "others", "\\x00others", "{user=(others)}"])
       | st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12)
       .map(lambda t: t + "(others)"))
def test_a_name_that_reads_like_others_is_watched_like_any_other(name):
    """``(others)`` is a class of unnamed connections, known by identity (core.buckets.OTHERS), not
    by how it is shown: a user called ``qa(others)`` (or ``(others)``) is a bucket like any other."""
    before = {Entity.user(name): {P: 50_000.0}, Entity.user(None): {P: 1e9}}
    after = {**before, Entity.user(name): {P: 10_000.0}}
    found = watch_list(before, after, [(Entity.user(name), P)])
    assert [(w.bucket, w.quota, w.before) for w in found] == [(Entity.user(name), 10_000.0, 50_000.0)]
