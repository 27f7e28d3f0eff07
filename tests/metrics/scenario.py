"""The metrics tests' scenario: quotas some buckets exceed and others not, the clients that
exceed them, and the buckets Kafka must therefore throttle (predicted before the run)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kqplan.core.entity import Entity
from tests.kafka.broker import DEFAULT_USERS, KafkaBroker, KafkaSpec
from tests.metrics.stack import PrometheusServer
from tests.metrics.traffic import Client

CLUSTER = "metrics-test"
TOPIC = "traffic"
SHARED = "shared app:v2"  # a client-id JMX quotes ("shared app:v2"): kqplan must unquote it
PASSWORDS = {**DEFAULT_USERS, "alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret",
             "dave": "dave-secret", "erin$ro": "erin-secret", "frank": "frank-secret",
             "gina": "gina-secret"}
# erin$ro: Kafka writes a user tag URL-encoded (erin%24ro): kqplan must decode it.

BASELINE = """\
entities:
  - user: <default>
    client-id: <default>
    quotas:
      producer_byte_rate: 100MiB
      consumer_byte_rate: 100MiB
"""
# Before the plan: a quota no client reaches at the {user=<default>, client-id=<default>} level
# makes Kafka measure every (user, client-id) pair on its own (docs/observability.md), so the plan's
# forecast rests on each principal's own usage. The plan deletes it (ownership scope, prune).

MANIFEST = f"""\
ownership:
  prune: true
  scope:
    - {{user: "<default>", client-id: "<default>"}}
entities:
  - user: alice
    quotas:
      producer_byte_rate: 40KiB
  - client-id: "{SHARED}"
    quotas:
      producer_byte_rate: 40KiB
  - user: erin$ro
    client-id: reader-1
    quotas:
      consumer_byte_rate: 16KiB
  - user: <default>
    quotas:
      consumer_byte_rate: 10KiB
  - user: dave
    quotas:
      producer_byte_rate: 200KiB
      request_percentage: 400
      controller_mutation_rate: 100
  - client-id: calm-app
    quotas:
      producer_byte_rate: 100KiB
"""
# Set on the cluster, in no manifest the tests plan with: kqplan throttled says "not managed".
UNMANAGED = """\
entities:
  - user: gina
    quotas:
      producer_byte_rate: 8KiB
"""

CLIENTS = (
    # {user=alice} 40 KiB: three instances of 20 KB/s, each alone half of it, 60 KB/s together
    *(Client("alice", f"alice-{n}", 20_000) for n in (1, 2, 3)),
    # {client-id=shared app:v2} 40 KiB: two users, 30 KB/s each
    Client("bob", SHARED, 30_000), Client("carol", SHARED, 30_000),
    # {user=gina} 8 KiB (not managed): 20 KB/s
    Client("gina", "gina-1", 20_000),
    # {user=dave} 200 KiB: 2 x 15 KB/s; {client-id=calm-app} 100 KiB: 10 KB/s. Neither exceeds.
    Client("dave", "dave-1", 15_000), Client("dave", "dave-2", 15_000), Client("bob", "calm-app", 10_000),
    # {user=erin$ro, client-id=reader-1} 16 KiB and {user=<default>} 10 KiB (frank's bucket
    # {user=frank}): consumers reading a topic that grows by ~190 KB/s
    Client("erin$ro", "reader-1"), Client("frank", "frank-1"),
)
BEFORE_SECONDS = 14.0
"""Traffic under BASELINE before the plan: the usage the forecast reads."""
VERIFY_WINDOW = 40
"""apply --verify-enforcement's window, in seconds (it stops once every bucket is settled)."""
TRAFFIC_SECONDS = BEFORE_SECONDS + 8.0 + VERIFY_WINDOW
"""All the traffic: before the plan, while kqplan plans and applies, and while it verifies."""

P, C = "producer_byte_rate", "consumer_byte_rate"
PREDICTED: dict[tuple[str, Entity], Entity | None] = {
    # (key, bucket) -> the entity that supplies the bucket's quota
    (P, Entity.user("alice")): Entity.user("alice"),
    (P, Entity.client(SHARED)): Entity.client(SHARED),
    (P, Entity.user("gina")): Entity.user("gina"),
    (C, Entity.user_client("erin$ro", "reader-1")): Entity.user_client("erin$ro", "reader-1"),
    (C, Entity.user("frank")): Entity.user(None),
}
"""The buckets the traffic exceeds: Kafka must throttle exactly these."""
CALM = {(P, Entity.user("dave")), (P, Entity.client("calm-app"))}
"""Buckets with traffic well under their quota: never throttled."""


@dataclass(frozen=True, order=True)
class MetricsSpec(KafkaSpec):
    """The matrix entry of the metrics tests: the pinned KRaft release with the exporter attached.
    Not equal to any matrix entry, so the plugin orders these tests after all of them."""

    exporter: str = "jmx_prometheus_javaagent"


@dataclass
class Stack:
    broker: KafkaBroker
    exporter_port: int
    prometheus: PrometheusServer

    @property
    def exporter_url(self) -> str:
        return f"http://127.0.0.1:{self.exporter_port}/metrics"


@dataclass(frozen=True)
class Scenario:
    stack: Stack
    manifests: Path
    start: float
    end: float
    moved: dict[Client, int]
    applied: float
    """When the apply began (the alter a moment after)."""
    forecast: dict[str, object]
    """``plan --usage-from-metrics --format json``'s ``usage`` object."""
    plan_out: str
    apply_out: str
    apply_code: int
