"""The issue's test that matters, on the real broker (tests/metrics/conftest.py's scenario): with
every bucket a pair before the plan, ``plan --usage-from-metrics`` forecasts which buckets the
plan would throttle — a ``{user=U}`` shared by three client instances, a ``{client-id=C}`` shared
by two users, a pair, a ``{user=<default>}`` bucket, and an unmanaged bucket Kafka already
throttles — ``apply --verify-enforcement`` applies it while the clients run, Kafka's own
throttle-time becomes > 0 for exactly the forecast buckets after the apply, and the
verification confirms each changed bucket, throttled or not."""

from __future__ import annotations

import math
import time

from kqplan.core.entity import Entity
from kqplan.metrics.buckets import bucket_of_labels
from kqplan.metrics.names import DEFAULT_KEYS
from tests.metrics.scenario import CALM, PREDICTED, Scenario

KEYS = {metrics.resource: metrics.key for metrics in DEFAULT_KEYS}
ALREADY = {("producer_byte_rate", Entity.user("gina"))}
"""Throttled before the plan too (gina's quota is another team's, unchanged by the plan)."""


def _shown(pairs) -> set[tuple[str, str]]:
    return {(key, bucket.display) for key, bucket in pairs}


def test_the_plan_forecasts_exactly_the_buckets_kafka_then_throttles(scenario: Scenario):
    forecast = scenario.forecast
    predicted = {(b["key"], b["bucket"]) for b in forecast["throttled"]}
    assert predicted == _shown(PREDICTED), scenario.plan_out
    newly = {(b["key"], b["bucket"]) for b in forecast["throttled"] if b["newly"]}
    assert newly == _shown(set(PREDICTED) - ALREADY)
    assert forecast["split_unknown"] == []  # every bucket was measured per pair: nothing guessed
    assert (forecast["would_throttle"], forecast["newly"]) == (len(PREDICTED), len(PREDICTED) - 1)


def test_kafka_throttles_after_the_apply_exactly_the_forecast_buckets(scenario: Scenario):
    prometheus = scenario.stack.prometheus
    window = f"[{math.ceil(time.time() - scenario.applied)}s]"
    observed = {(KEYS[s["metric"]["resource"]], bucket_of_labels(s["metric"], "user", "client_id"))
                for s in prometheus.query(f"max_over_time(kafka_server_quota_throttle_time{window}) > 0")}
    assert _shown(observed) == {(b["key"], b["bucket"]) for b in scenario.forecast["throttled"]}


def test_verify_enforcement_confirms_each_changed_bucket(scenario: Scenario):
    out = scenario.apply_out
    assert scenario.apply_code == 0, out
    assert "contradicted" not in out, out
    for key, bucket in set(PREDICTED) - ALREADY:
        assert f"✓ {bucket.display} {key}: confirmed (expected throttled: Kafka throttles it)" in out, out
    for key, bucket in CALM:
        assert f"✓ {bucket.display} {key}: confirmed (expected not throttled: traffic, and no throttling)" \
            in out, out
    assert "{user=gina} producer_byte_rate" not in out.split("Enforcement after")[1]  # not changed
