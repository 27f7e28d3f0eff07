"""What the JMX exporter publishes for a real broker's quota buckets, read off the exporter itself:
the names and labels kqplan's defaults (kqplan/metrics/names.py) are, checked here rather than
written from memory."""

from __future__ import annotations

import re

from kqplan.metrics.buckets import bucket_of_labels
from kqplan.metrics.names import DEFAULT_KEYS, MetricNames, parse_selector
from tests.metrics.scenario import SHARED, Scenario
from tests.metrics.stack import get

_LINE = re.compile(r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?')


def _unescape(value: str) -> str:
    """The text exposition format's label escapes: \\\\, \\" and \\n."""
    return re.sub(r'\\(.)', lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), value)


def exposition(text: str) -> list[tuple[str, dict[str, str], str]]:
    """(name, labels, value) of every sample line of a /metrics page."""
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        found = _LINE.match(line)
        assert found is not None, line
        labels = {k: _unescape(v) for k, v in _LABEL.findall(found.group("labels") or "")}
        samples.append((found.group("name"), labels, found.group("value")))
    return samples


def _quota_samples(scenario: Scenario) -> list[tuple[str, dict[str, str], str]]:
    page = get(scenario.stack.exporter_url).decode()
    return [s for s in exposition(page) if s[0].startswith("kafka_server_quota_")]


def test_the_exporter_publishes_the_names_and_labels_kqplan_reads_by_default(scenario):
    samples = _quota_samples(scenario)
    seen = {(name, labels.get("resource")) for name, labels, _ in samples}
    for metrics in DEFAULT_KEYS:
        for series in (metrics.throttle, metrics.usage):
            name, matchers = parse_selector(series, metric=True)
            assert matchers == f'resource="{metrics.resource}"'
            assert (name, metrics.resource) in seen, (series, sorted(seen))
    # every quota series carries resource, and the bucket's tags as user / client_id, nothing else
    assert {frozenset(labels) for _, labels, _ in samples} <= {
        frozenset({"resource", "user"}), frozenset({"resource", "client_id"}),
        frozenset({"resource", "user", "client_id"})}


def test_a_bucket_tag_kafka_leaves_empty_is_no_label(scenario):
    by_bucket = {(name, labels["resource"], tuple(sorted(labels.items())))
                 for name, labels, _ in _quota_samples(scenario)}
    throttle = "kafka_server_quota_throttle_time"
    # {user=alice}: no client_id label; {client-id=C}: no user label; (U, C): both
    assert (throttle, "Produce", (("resource", "Produce"), ("user", "alice"))) in by_bucket
    assert (throttle, "Produce", (("client_id", f'"{SHARED}"'), ("resource", "Produce"))) in by_bucket
    erin = (("client_id", "reader-1"), ("resource", "Fetch"), ("user", "erin%24ro"))
    assert (throttle, "Fetch", erin) in by_bucket


def test_kqplan_reads_the_bucket_back_from_the_labels_kafka_encoded(scenario):
    """JMX quotes a client-id with reserved characters, Kafka URL-encodes the user tag: the
    bucket is the names as the manifests write them."""
    names = MetricNames()
    buckets = {bucket_of_labels(labels, names.user_label, names.client_id_label).display
               for name, labels, _ in _quota_samples(scenario) if name == "kafka_server_quota_byte_rate"}
    assert {"{user=alice}", f"{{client-id={SHARED}}}", "{user=erin$ro, client-id=reader-1}",
            "{user=frank}", "{user=dave}", "{client-id=calm-app}", "{user=gina}"} <= buckets


def test_throttle_time_is_nan_where_nothing_was_throttled(scenario):
    values = {(labels.get("user"), labels.get("client_id")): value
              for name, labels, value in _quota_samples(scenario)
              if name == "kafka_server_quota_throttle_time" and labels["resource"] == "Produce"}
    assert values[("dave", None)] == "NaN"
    assert values[(None, "calm-app")] == "NaN"
