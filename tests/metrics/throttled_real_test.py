"""The test that matters: real clients exceed some quota buckets and not others on a real broker,
Kafka throttles exactly the buckets that exceed (its own throttle-time, read straight from
Prometheus), and ``kqplan throttled`` lists exactly those, each with the entity that supplies its
quota and the manifest line that declares it."""

from __future__ import annotations

import math
import time
import urllib.error

import pytest

import kqplan.cli.throttled  # noqa: F401  (registers the command, whatever kqplan.cli.main lists)
from kqplan.core.entity import Entity
from kqplan.metrics.buckets import bucket_of_labels
from kqplan.metrics.names import DEFAULT_KEYS, MetricNames
from kqplan.metrics.prometheus import MAX_POINTS, Prometheus
from kqplan.metrics.source import PrometheusSource, endpoint
from tests.helpers import run_cli
from tests.metrics.scenario import CALM, CLUSTER, MANIFEST, PREDICTED, RAISED, Scenario
from tests.metrics.stack import get

KEYS = {metrics.resource: metrics.key for metrics in DEFAULT_KEYS}


def _since(scenario: Scenario) -> str:
    return f"{math.ceil(time.time() - scenario.start) + 5}s"


def _line_of(entity: Entity) -> int:
    """The manifest line of ``entity``'s entry (its first key's line)."""
    first = {"user": "user", "client-id": "client-id"}[entity.types[0]]
    name = entity.parts[0][1]
    shown = "<default>" if name is None else (f'"{name}"' if " " in name else name)
    lines = MANIFEST.splitlines()
    for number, line in enumerate(lines, start=1):
        following = lines[number] if number < len(lines) else ""
        if line == f"  - {first}: {shown}" and (len(entity.parts) == 1) == ("client-id:" not in following):
            return number + 2  # write_manifest puts apiVersion and kind above
    raise AssertionError(f"{entity.display} is not in the manifest")


def test_kafka_throttles_exactly_the_buckets_that_exceed_their_quota(scenario):
    """Kafka's own measurement, with no kqplan code in between: throttle-time > 0 somewhere in
    the run for the predicted buckets, and never for the calm ones (whose series exist)."""
    prometheus = scenario.stack.prometheus
    names = MetricNames()
    window = f"[{_since(scenario)}]"
    throttled = {(KEYS[s["metric"]["resource"]], bucket_of_labels(s["metric"], "user", "client_id"))
                 for s in prometheus.query(f"max_over_time(kafka_server_quota_throttle_time{window}) > 0")}
    assert throttled == set(PREDICTED), throttled
    traffic = {(KEYS[s["metric"]["resource"]], bucket_of_labels(s["metric"], names.user_label,
                                                                 names.client_id_label))
               for s in prometheus.query(f"max_over_time(kafka_server_quota_byte_rate{window})")}
    assert traffic >= CALM  # measured, and not throttled


def test_kqplan_throttled_lists_exactly_those_buckets_with_entity_and_manifest_line(scenario):
    stack = scenario.stack
    result = run_cli("throttled", scenario.manifests, "--bootstrap-server", stack.broker.bootstrap,
                     "--prometheus", stack.prometheus.url, "--selector", f'{{kafka_cluster="{CLUSTER}"}}',
                     "--since", _since(scenario), "--step", "1s", "--format", "json", "--detailed-exitcode")
    assert result.exit_code == 2, result.stderr
    report = result.json
    found = {(row["key"], Entity.from_json(row["bucket"])): row for row in report["throttled"]}
    assert set(found) == set(PREDICTED)
    quota_file = scenario.manifests / "quotas.yaml"
    for (key, bucket), row in found.items():
        source = PREDICTED[key, bucket]
        assert Entity.from_json(row["source"]) == source
        if source == Entity.user("gina"):
            assert row["declared"] is None  # set on the cluster, in no manifest given
        else:
            assert row["declared"] == f"{quota_file}:{_line_of(source)}:5"
        assert row["peak_throttle_ms"] > 0
        assert row["throttled_steps"] >= 1
        assert row["brokers"] == [f"127.0.0.1:{stack.exporter_port}"]
        assert row["peak_usage"] is not None
        assert row["peak_usage"] > 0
        # held at its quota while throttled: only the raised bucket's quota is above its usage then
        assert row["usage_under_quota_now"] is ((key, bucket) == RAISED), row
    # worst first
    peaks = [row["peak_throttle_ms"] for row in report["throttled"]]
    assert peaks == sorted(peaks, reverse=True)


def test_throttling_ends_when_kafkas_sensor_says(scenario):
    """raiser's quota was raised at the alter: its throttle-time stayed above 0 for another 60 s
    (metrics.num.samples × metrics.sample.window.ms, read from the broker), but its throttling ended
    at the alter — and the row says why its usage then is far under its quota now."""
    from datetime import UTC, datetime

    stack = scenario.stack
    changed = datetime.fromtimestamp(scenario.changed, UTC)
    result = run_cli("throttled", scenario.manifests, "--bootstrap-server", stack.broker.bootstrap,
                     "--prometheus", stack.prometheus.url, "--since", _since(scenario), "--step", "1s",
                     "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert result.json["throttle_memory_seconds"] == 60.0
    rows = {(row["key"], Entity.from_json(row["bucket"])): row for row in result.json["throttled"]}
    raiser = rows[RAISED]
    assert raiser["ongoing"] is False
    ended = datetime.fromisoformat(raiser["ended"].replace("Z", "+00:00"))
    last_step = datetime.fromisoformat(raiser["last_throttled_step"].replace("Z", "+00:00"))
    assert abs((ended - changed).total_seconds()) <= 5, (raiser, changed)
    assert (last_step - ended).total_seconds() == 60  # the echo, not throttling
    assert "the quota was lower then and changed since" in raiser["note"]
    text = run_cli("throttled", scenario.manifests, "--bootstrap-server", stack.broker.bootstrap,
                   "--prometheus", stack.prometheus.url, "--since", _since(scenario), "--step", "1s")
    assert "stays above 0 for 1 min after the last throttled response" in text.stdout


def test_the_text_form_says_which_entity_and_line(scenario):
    stack = scenario.stack
    result = run_cli("throttled", scenario.manifests, "--bootstrap-server", stack.broker.bootstrap,
                     "--prometheus", stack.prometheus.url, "--since", _since(scenario), "--step", "1s")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert out.startswith(f"Kafka throttled {len(PREDICTED)} quota buckets of cluster ")
    assert "{user=frank}  consumer_byte_rate" in out
    assert "from {user=<default>}" in out
    assert f"quotas.yaml:{_line_of(Entity.user(None))}:5" in out
    assert "{user=gina}  producer_byte_rate" in out
    assert "declared   not managed" in out
    assert "{user=dave}" not in out
    assert "calm-app" not in out


def test_a_selector_for_another_cluster_finds_no_metrics(scenario):
    """Nothing found is not "nobody throttled": the cluster sets quotas, so metrics were expected."""
    stack = scenario.stack
    result = run_cli("throttled", scenario.manifests, "--bootstrap-server", stack.broker.bootstrap,
                     "--prometheus", stack.prometheus.url, "--selector", '{kafka_cluster="elsewhere"}',
                     "--since", _since(scenario))
    assert result.exit_code == 1
    assert "has no throttle-time series" in result.stderr
    assert "throttled no" not in result.stdout


def test_a_range_over_the_servers_points_limit_is_asked_in_chunks(scenario):
    prometheus = scenario.stack.prometheus
    end = time.time()
    start, step = end - 12, 0.001  # 12,001 points: more than one request may hold
    with pytest.raises(urllib.error.HTTPError) as refused:  # the limit is the server's own
        get(f"{prometheus.url}/api/v1/query_range",
            {"query": "up", "start": f"{start:.3f}", "end": f"{end:.3f}", "step": str(step)})
    assert refused.value.code == 400
    assert b"11,000 points" in refused.value.read()
    client = Prometheus(endpoint(PrometheusSource(prometheus.url)))
    (series,) = client.query_range(f'up{{kafka_cluster="{CLUSTER}"}}', start, end, step)
    assert client.requests == 2
    assert MAX_POINTS < len(series.points) <= 12_001
    times = [t for t, _ in series.points]
    assert times == sorted(set(times))  # no point twice at the seam
