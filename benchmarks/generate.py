"""Synthetic manifests and cluster states for the benchmarks (deterministic for a given N)."""

from __future__ import annotations

from pathlib import Path

from kqplan.core.entity import Entity
from kqplan.snapshot.file import write_snapshot


def manifest_text(n: int) -> str:
    """N entities: 2/3 ``{user}`` with byte units, 1/3 ``{user, client-id}`` with 3 keys."""
    lines = ["apiVersion: kqplan/v1", "kind: ClientQuotas", "entities:"]
    for i in range(n):
        if i % 3 == 2:
            lines.append(f"  - user: user-{i // 3}\n    client-id: client-{i}\n    quotas:\n"
                         "      producer_byte_rate: 10MiB\n      consumer_byte_rate: 20971520\n"
                         "      request_percentage: 25.5")
        else:
            lines.append(f"  - user: user-{i}\n    quotas:\n      producer_byte_rate: 1048576\n"
                         "      consumer_byte_rate: 2MiB")
    return "\n".join(lines) + "\n"


def desired_state(n: int) -> dict[Entity, dict[str, float]]:
    """The state ``manifest_text(n)`` compiles to."""
    state: dict[Entity, dict[str, float]] = {}
    for i in range(n):
        if i % 3 == 2:
            state[Entity.user_client(f"user-{i // 3}", f"client-{i}")] = {
                "producer_byte_rate": 10485760.0, "consumer_byte_rate": 20971520.0,
                "request_percentage": 25.5}
        else:
            state[Entity.user(f"user-{i}")] = {"producer_byte_rate": 1048576.0,
                                               "consumer_byte_rate": 2097152.0}
    return state


def drifted_state(n: int, *, every: int = 10) -> dict[Entity, dict[str, float]]:
    """The desired state with every ``every``-th entity changed, missing or extra."""
    state = desired_state(n)
    for i, entity in enumerate(list(state)):
        if i % every == 0:
            state[entity] = {**state[entity], "producer_byte_rate": 1.0}
        elif i % every == 1:
            del state[entity]
    return state


def write_fixture(directory: Path, n: int, *, cluster_id: str = "bench") -> tuple[Path, Path]:
    """A manifest file and a drifted snapshot for N entities."""
    directory.mkdir(parents=True, exist_ok=True)
    manifest = directory / f"quotas-{n}.yaml"
    manifest.write_text(manifest_text(n))
    snapshot = directory / f"snapshot-{n}.json"
    write_snapshot(snapshot, drifted_state(n), cluster_id)
    return manifest, snapshot
