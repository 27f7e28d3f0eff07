"""Prometheus answers recorded from the real stack (tests/metrics/conftest.py's scenario, and the
quota-callback broker of tests/metrics/callback_real_test.py), with the broker settings they came
from: the judge of ``apply --verify-enforcement`` replays them in milliseconds
(tests/metrics/enforcement_test.py), and the real stack confirms the rules.

A recording is written by the real-stack tests when ``$KQPLAN_RECORD_METRICS`` names a file
(``KQPLAN_RECORD_METRICS=/tmp/x.json pytest tests/metrics``): the changed buckets' raw usage and
throttle-time samples around the apply, the watches and verdicts of the apply's report, and each
broker's settings as kqplan read them (DescribeConfigs)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kqplan.core.enforcement import Readings, Watch
from kqplan.core.entity import Entity
from kqplan.core.sensors import BrokerRead, BrokerSettings, ClusterSettings
from kqplan.metrics.buckets import bucket_of_labels

HERE = Path(__file__).parent


def record(scenario: Any, path: Path, *, before: float = 30.0) -> None:
    """Write ``scenario``'s recording (see the module doc) to ``path``."""
    from datetime import datetime

    from kqplan.cluster.kafka import KafkaCluster

    enforcement = scenario.report["enforcement"]
    changed = datetime.fromisoformat(enforcement["changed_at"].replace("Z", "+00:00")).timestamp()
    with KafkaCluster.connect(scenario.stack.broker.bootstrap, None) as cluster:
        cluster.describe()
        settings = cluster.broker_settings()
    prometheus = scenario.stack.prometheus
    span = math.ceil(scenario.end - changed + before)
    series: dict[str, list[Any]] = {}
    wanted = {(b["key"], Entity.from_json(b["bucket"])) for b in enforcement["buckets"]}
    keys = {"Produce": "producer_byte_rate", "Fetch": "consumer_byte_rate"}
    for role, name in (("usage", "kafka_server_quota_byte_rate"),
                       ("throttle", "kafka_server_quota_throttle_time")):
        found = prometheus.query(f"{name}[{span}s]", at=scenario.end)
        series[role] = [s for s in found if (keys.get(s["metric"].get("resource", "")),
                                             bucket_of_labels(s["metric"], "user", "client_id")) in wanted]
    doc = {"kafka": scenario.stack.broker.version, "changed": changed,
           "window": enforcement["window_seconds"],
           "brokers": {str(b.node): dict(b.settings.raw) for b in settings.brokers if b.settings is not None},
           "buckets": enforcement["buckets"], "series": series}
    path.write_text(json.dumps(doc, indent=1) + "\n")


@dataclass(frozen=True)
class Recording:
    name: str
    changed: float
    window: float
    settings: ClusterSettings
    buckets: list[dict[str, Any]]
    series: dict[str, list[dict[str, Any]]]

    def watch(self, display: str) -> Watch:
        found = next(b for b in self.buckets if b["display"] == display)
        return Watch(Entity.from_json(found["bucket"]), found["key"], found["quota"], found["quota_before"],
                     found["expected_throttled"], found["usage_before"],
                     tuple(Entity.from_json(j) for j in found["joined"]))

    def verdict(self, display: str) -> dict[str, Any]:
        return next(b for b in self.buckets if b["display"] == display)

    def readings(self, watch: Watch, *, until: float, scale: float = 1.0) -> Readings:
        """The recorded readings of ``watch``'s bucket up to ``until``; ``scale`` multiplies usage."""
        resource = {"producer_byte_rate": "Produce", "consumer_byte_rate": "Fetch"}[watch.key]
        found: dict[str, dict[str, tuple[tuple[float, float], ...]]] = {"usage": {}, "throttle": {}}
        for role in ("usage", "throttle"):
            for s in self.series[role]:
                labels = s["metric"]
                if labels.get("resource") != resource \
                        or bucket_of_labels(labels, "user", "client_id") != watch.bucket:
                    continue
                factor = scale if role == "usage" else 1.0
                found[role][labels.get("instance", "")] = tuple(
                    (float(t), float(v) * factor) for t, v in s["values"] if float(t) <= until)
        return Readings(found["usage"], found["throttle"])


def load(name: str) -> Recording:
    doc = json.loads((HERE / f"{name}.json").read_text())
    settings = ClusterSettings(tuple(BrokerRead(int(node), "recorded", BrokerSettings.of(values))
                                     for node, values in sorted(doc["brokers"].items())))
    return Recording(name, doc["changed"], doc["window"], settings, doc["buckets"], doc["series"])
