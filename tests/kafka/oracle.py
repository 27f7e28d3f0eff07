"""Kafka's own answer to "which limit does this connection get": tests/fleet/QuotaBuckets.java drives
the broker's ClientQuotaManager (from the jars the suite downloads) for ``producer_byte_rate``."""

from __future__ import annotations

import random
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path

from kqplan.core.entity import CLIENT_ID, USER, Entity
from tests.helpers import REPO
from tests.kafka.broker import ensure_kafka_libs, pinned_kafka_version

KEY = "producer_byte_rate"
USERS = ["alice", "bob", "carol"]
CLIENTS = ["a1", "a2", "shared"]


def random_state(rng: random.Random) -> dict[Entity, dict[str, float]]:
    """One to eight entities of :data:`USERS` and :data:`CLIENTS` (names, defaults, absent parts),
    each with a ``producer_byte_rate`` of 10 to 50."""
    parts = [(u, c) for u in [None, "*", *USERS] for c in [None, "*", *CLIENTS] if (u, c) != (None, None)]
    state = {}
    for user, client in rng.sample(parts, rng.randint(1, 8)):
        named = [(t, None if n == "*" else n) for t, n in ((USER, user), (CLIENT_ID, client))
                 if n is not None]
        state[Entity(tuple(named))] = {KEY: float(rng.choice([10, 20, 30, 40, 50]))}
    return state


def compile_oracle(classes: Path) -> list[str]:
    """``java … QuotaBuckets`` against the pinned Kafka release's jars, compiled into ``classes``."""
    libs = ensure_kafka_libs(pinned_kafka_version())
    subprocess.run(["javac", "-d", str(classes), "-cp", str(libs / "*"),
                    str(REPO / "tests" / "fleet" / "QuotaBuckets.java")], check=True, capture_output=True,
                   timeout=300)
    return ["java", "-cp", f"{libs / '*'}:{classes}", "QuotaBuckets"]


Case = tuple[dict[Entity, dict[str, float]], Sequence[tuple[str, str]]]


def ask(oracle: Sequence[str], cases: Iterable[Case]) -> list[list[list[str]]]:
    """For each (state of ``producer_byte_rate`` quotas, connections): Kafka's answer per connection,
    ``[user, client-id, user tag, client-id tag, limit or "unlimited"]``, in one JVM."""
    lines = []
    shape = []
    for state, probes in cases:
        lines.append("CASE")
        for entity, quotas in state.items():
            user = "~" if USER not in entity else entity.name(USER) or "*"
            client = "~" if CLIENT_ID not in entity else entity.name(CLIENT_ID) or "*"
            lines.append(f"Q\t{user}\t{client}\t{quotas[KEY]}")
        lines += [f"P\t{u}\t{c}" for u, c in probes]
        shape.append(len(probes))
    done = subprocess.run(list(oracle), input="\n".join(lines) + "\n", capture_output=True, text=True,
                          check=True, timeout=300)
    answers = iter(line.split("\t") for line in done.stdout.splitlines())
    out = [[next(answers) for _ in range(n)] for n in shape]
    assert next(answers, None) is None
    return out
