"""The metrics tests' scenario: quotas some buckets exceed and others not, the clients that
exceed them, and the buckets Kafka must therefore throttle (predicted before the run). The plan
also makes the three most common quota changes, which ``apply --verify-enforcement`` must judge
on Kafka's own sensors: it raises a throttled client's quota (raiser), adds a ``{user=U}`` quota
that a fourth client joins by Kafka's precedence (joiner), and lowers a bucket into throttling
(lowered)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kqplan.core.entity import Entity
from tests.kafka.broker import DEFAULT_USERS, KafkaBroker, KafkaSpec
from tests.metrics.stack import PrometheusServer
from tests.metrics.traffic import Client

CLUSTER = "metrics-test"
TOPIC = "traffic"
SHARED = "shared app:v2"  # a client-id JMX quotes ("shared app:v2"): kqplan must unquote it
PASSWORDS = {**DEFAULT_USERS, "alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret",
             "dave": "dave-secret", "erin$ro": "erin-secret", "frank": "frank-secret",
             "gina": "gina-secret", "raiser": "raiser-secret", "joiner": "joiner-secret",
             "lowered": "lowered-secret"}
# erin$ro: Kafka writes a user tag URL-encoded (erin%24ro): kqplan must decode it.

BASELINE = """\
entities:
  - user: <default>
    client-id: <default>
    quotas:
      producer_byte_rate: 100MiB
      consumer_byte_rate: 100MiB
  - user: raiser
    quotas:
      producer_byte_rate: 5KiB
  - user: <default>
    client-id: calm
    quotas:
      producer_byte_rate: 100KiB
  - user: lowered
    quotas:
      producer_byte_rate: 100KiB
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
  - user: raiser
    quotas:
      producer_byte_rate: 1MiB
  - user: joiner
    quotas:
      producer_byte_rate: 30KiB
  - user: lowered
    quotas:
      producer_byte_rate: 25KiB
"""
# raiser: {user=raiser} 5 KiB, throttled before the plan, raised to 1 MiB (the most common change).
# joiner: three clients were each their own {user=joiner, client-id=jN} bucket under the 100 MiB
# default pair, and calm its {user=joiner, client-id=calm} bucket under {user=<default>,
# client-id=calm} (not managed here, it stays); the new {user=joiner} quota is level 3, which beats
# both, so all four join one {user=joiner} bucket. lowered: 100 KiB, never reached, lowered to
# 25 KiB under 45 KB/s.
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
    # {user=frank}): consumers reading a topic that grows by ~330 KB/s
    Client("erin$ro", "reader-1"), Client("frank", "frank-1"),
    # {user=raiser} 5 KiB -> 1 MiB: 40 KB/s, held at 5 KiB before the plan, free after it
    Client("raiser", "raiser-1", 40_000),
    # {user=joiner} 30 KiB: three clients at 15 KB/s and calm at 10 KB/s, 55 KB/s in one bucket
    *(Client("joiner", f"j{n}", 15_000) for n in (1, 2, 3)), Client("joiner", "calm", 10_000),
    # {user=lowered} 100 KiB -> 25 KiB: 45 KB/s
    Client("lowered", "low-1", 45_000),
)
BEFORE_SECONDS = 18.0
"""Traffic under BASELINE before the plan, from the moment every client is connected."""
RAMP_SECONDS = 12.0
"""The first seconds of it, left out of the forecast: Kafka's byte-rate of a new bucket averages
over its quota window (11 s), so it reaches a client's rate only then."""

P, C = "producer_byte_rate", "consumer_byte_rate"
FORECAST: dict[tuple[str, Entity], Entity | None] = {
    # (key, bucket) -> the entity that supplies the bucket's quota
    (P, Entity.user("alice")): Entity.user("alice"),
    (P, Entity.client(SHARED)): Entity.client(SHARED),
    (P, Entity.user("gina")): Entity.user("gina"),
    (C, Entity.user_client("erin$ro", "reader-1")): Entity.user_client("erin$ro", "reader-1"),
    (C, Entity.user("frank")): Entity.user(None),
    (P, Entity.user("joiner")): Entity.user("joiner"),
    (P, Entity.user("lowered")): Entity.user("lowered"),
}
"""The buckets the traffic exceeds after the plan: Kafka must throttle exactly these then."""
RAISED = (P, Entity.user("raiser"))
"""Throttled before the plan only (its quota raised far above its usage)."""
PREDICTED: dict[tuple[str, Entity], Entity | None] = {**FORECAST, RAISED: Entity.user("raiser")}
"""Every bucket Kafka throttles in the run: before the plan or after it."""
CALM = {(P, Entity.user("dave")), (P, Entity.client("calm-app"))}
"""Buckets with traffic well under their quota: never throttled."""
MUTED_AFTER = {(C, Entity.user_client("erin$ro", "reader-1"))}
"""The changed bucket whose quota falls far under its usage (a reader at ~230 KB/s, its bucket
kept, lowered to 16 KiB): Kafka delays its next response by what that usage asks at the new quota
(~150 s, ``QuotaUtils.throttleTime``), and it reads nothing meanwhile: ``confirmed`` as muted."""
HELD_AFTER = set(FORECAST) - {(P, Entity.user("gina"))} - MUTED_AFTER
"""The changed buckets Kafka holds at their new quota: ``confirmed`` as held."""
DEMAND = {(P, Entity.user("alice")): 60_000.0, (P, Entity.client(SHARED)): 60_000.0,
          (P, Entity.user("joiner")): 55_000.0, (P, Entity.user("lowered")): 45_000.0}
"""The producer buckets of HELD_AFTER: what their clients ask together (B/s, from CLIENTS)."""
UNDER_AFTER = {*CALM, RAISED}
"""The changed buckets under their new quota, not throttled: ``confirmed`` as under."""


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
    report: dict[str, Any]
    """The apply's ``--report`` document (its ``enforcement`` object: the verdicts)."""

    @property
    def changed(self) -> float:
        """When the alter ended, as the report says (seconds since the epoch)."""
        from datetime import datetime

        at = self.report["enforcement"]["changed_at"]
        return datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()
