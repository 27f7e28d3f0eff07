"""The core's buckets are Kafka's: the broker's own ClientQuotaManager (from the jars the suite
downloads; tests/fleet/QuotaBuckets.java drives it) gives every connection of hundreds of random
quota states the same limit as kqplan's resolution, and metric tags naming the bucket
kqplan.core.buckets names."""

from __future__ import annotations

import random
import subprocess

import pytest

from kqplan.core.buckets import bucket_of, recording_shapes, sensor_of
from kqplan.core.entity import CLIENT_ID, USER, Entity
from kqplan.core.resolve import QuotaIndex, resolve
from tests.kafka.oracle import CLIENTS, KEY, USERS, compile_oracle, random_state

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """``java … QuotaBuckets`` against the pinned Kafka release's jars, compiled here."""
    return compile_oracle(tmp_path_factory.mktemp("oracle"))


def test_limits_and_buckets_match_kafkas_client_quota_manager(oracle):
    rng = random.Random(546)
    cases = [random_state(rng) for _ in range(300)]
    probes = [(u, c) for u in USERS for c in ["", *CLIENTS]]
    lines = []
    for state in cases:
        lines.append("CASE")
        for entity, quotas in state.items():
            user = "~" if USER not in entity else entity.name(USER) or "*"
            client = "~" if CLIENT_ID not in entity else entity.name(CLIENT_ID) or "*"
            lines.append(f"Q\t{user}\t{client}\t{quotas[KEY]}")
        lines += [f"P\t{u}\t{c}" for u, c in probes]
    done = subprocess.run(oracle, input="\n".join(lines) + "\n", capture_output=True, text=True, check=True,
                          timeout=300)
    answers = iter(line.split("\t") for line in done.stdout.splitlines())
    shared = unlimited = 0
    for state in cases:
        buckets: dict[Entity, int] = {}
        for user, client in probes:
            kafka_user, kafka_client, tag_user, tag_client, limit = next(answers)
            assert (kafka_user, kafka_client) == (user, client)
            resolved = resolve(state, user, client)[KEY]
            assert (resolved.value if resolved.value is not None else "unlimited") == (
                "unlimited" if limit == "unlimited" else float(limit)), (state, user, client)
            tags = Entity(tuple((t, n) for t, n in ((USER, tag_user), (CLIENT_ID, tag_client)) if n))
            # where Kafka records the connection, limited or not (apply --verify-enforcement
            # watches a released principal there)
            shapes = recording_shapes(state.items(), KEY)
            recorded = sensor_of(QuotaIndex.of(state), KEY, user, client, shapes)
            assert recorded == (tags or None), (state, user, client, tag_user, tag_client)
            if resolved.source is None:
                unlimited += 1
                continue  # unlimited: kqplan names no bucket
            mine = bucket_of(resolved.source, user, client)
            assert mine == tags, (state, user, client, tag_user, tag_client)
            buckets[mine] = buckets.get(mine, 0) + 1
        shared += sum(n > 1 for n in buckets.values())
    assert next(answers, None) is None
    assert shared > 100  # the states put several connections in one bucket, many times over
    assert unlimited > 100  # and leave many connections unlimited, recorded in Kafka's fallback buckets
