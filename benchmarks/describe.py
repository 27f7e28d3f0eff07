"""Describe cost on the client: decoding N entities, and a whole describe over loopback TCP.

Run: .venv/bin/python benchmarks/describe.py [N ...]   (default 1000 10000 100000)

1. Decode + conversion to a quota state, in-process, on identical v1 response bytes:
   kafka-python's generated classes (collector on, then paused) against kqplan's decoder
   (kqplan/cluster/decode.py), which is what ``KafkaCluster.describe`` uses.
2. ``KafkaCluster`` over TCP against a broker in another process that answers from a
   pre-encoded response, so the time is the client's: connect (ApiVersions) and describe.
Prints Markdown tables; best of several runs (this is a noisy 2-core VM).
"""

from __future__ import annotations

import gc
import multiprocessing
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafka.protocol.admin import DescribeClientQuotasResponse as Response

from kqplan.cluster.connection import config_from_properties
from kqplan.cluster.decode import decode_describe_response
from kqplan.cluster.kafka import KafkaCluster
from kqplan.core.entity import Entity
from kqplan.perf import paused_gc

RUNS = 5


def quota_rows(n: int) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    """Two thirds {user}, one third {user, client-id} (in Kafka's order), 2-3 keys each."""
    rnd = random.Random(7)
    rows = {}
    for i in range(n):
        entity = ((("client-id", f"client-{i}"), ("user", f"user-{i // 3}")) if i % 3 == 2
                  else (("user", f"user-{i}"),))
        quotas = {"producer_byte_rate": float(rnd.randrange(1, 10**8)), "consumer_byte_rate": 2e6}
        if i % 2:
            quotas["request_percentage"] = 25.0
        rows[entity] = quotas
    return rows


def encoded(n: int) -> bytes:
    E = Response.EntryData
    entries = [E(entity=[E.EntityData(entity_type=t, entity_name=name) for t, name in entity],
                 values=[E.ValueData(key=k, value=v) for k, v in quotas.items()])
               for entity, quotas in quota_rows(n).items()]
    return bytes(Response(version=1, throttle_time_ms=0, error_code=0, error_message="",
                          entries=entries).encode())


def generated(body: bytes) -> dict[Entity, dict[str, float]]:
    """The best conversion found for generated objects (Kafka's client-id-first order put in
    Entity's order up front, which keeps Entity's constructor on its fast path)."""
    state = {}
    for entry in Response.decode(body, version=1).entries:
        parts = tuple([(c.entity_type, c.entity_name) for c in entry.entity])
        if len(parts) == 2 and parts[0][0] == "client-id":
            parts = (parts[1], parts[0])
        state[Entity(parts)] = {v.key: v.value for v in entry.values}
    return state


def best(fn, *, paused: bool) -> float:
    times = []
    for _ in range(RUNS):
        gc.collect()
        if paused:
            with paused_gc():
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return min(times)


def serve(n: int, queue: multiprocessing.Queue) -> None:
    from tests.cluster.fakebroker import FakeBroker

    with FakeBroker(state=dict(quota_rows(n))).running() as broker:
        queue.put(broker.bootstrap)
        time.sleep(3600)


def over_tcp(n: int) -> tuple[float, float, str]:
    queue: multiprocessing.Queue = multiprocessing.Queue()
    server = multiprocessing.Process(target=serve, args=(n, queue), daemon=True)
    server.start()
    try:
        config = config_from_properties("", bootstrap=queue.get(timeout=120), source="(bench)", env={})
        with KafkaCluster(config) as warm:  # the broker encodes its answer once
            warm.describe()
        connects, describes = [], []
        for _ in range(RUNS):
            with KafkaCluster(config) as cluster:
                t0 = time.perf_counter()
                cluster.transport.connect()
                t1 = time.perf_counter()
                state = cluster.describe()
                describes.append(time.perf_counter() - t1)
                connects.append(t1 - t0)
                assert len(state) == n
                sent = ", ".join(f"{k} {v}" for k, v in sorted(cluster.transport.sent.items()))
        return min(connects), min(describes), f"{cluster.transport.connections} connection; {sent}"
    finally:
        server.terminate()
        server.join()


def main(sizes: list[int]) -> None:
    print("| N | response MB | generated, GC on ms | generated, GC paused ms "
          "| kqplan decoder, GC on ms | kqplan decoder, GC paused ms |")
    print("|---|---|---|---|---|---|")
    for n in sizes:
        body = encoded(n)
        a = decode_describe_response(body, 1).state
        assert a == generated(body)
        cells = [best(lambda b=body: generated(b), paused=False),
                 best(lambda b=body: generated(b), paused=True),
                 best(lambda b=body: decode_describe_response(b, 1), paused=False),
                 best(lambda b=body: decode_describe_response(b, 1), paused=True)]
        print(f"| {n:,} | {len(body) / 1e6:.1f} | " + " | ".join(f"{c * 1000:.0f}" for c in cells) + " |")
    print()
    print("| N | connect (TCP + ApiVersions) ms | describe over TCP ms | requests |")
    print("|---|---|---|---|")
    for n in sizes:
        connect, describe, requests = over_tcp(n)
        print(f"| {n:,} | {connect * 1000:.1f} | {describe * 1000:.0f} | {requests} |")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1000, 10000, 100000])
