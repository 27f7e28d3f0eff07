"""Real Kafka clients (kafka-python) at controlled rates, over SASL/PLAIN, with fixed client-ids:
the traffic whose throttling the metrics tests watch Kafka measure."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

MESSAGE = b"x" * 1000


@dataclass(frozen=True)
class Client:
    """One client instance: a producer sending ``rate`` bytes/s, or (``rate`` 0) a consumer
    reading the topic from the beginning as fast as the broker lets it."""

    user: str
    client_id: str
    rate: float = 0.0

    @property
    def consumer(self) -> bool:
        return self.rate == 0


def _security(bootstrap: str, user: str, password: str) -> dict[str, object]:
    return {"bootstrap_servers": bootstrap, "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN", "sasl_plain_username": user, "sasl_plain_password": password}


def _produce(client: Client, settings: dict[str, object], topic: str, until: float) -> int:
    from kafka import KafkaProducer

    producer = KafkaProducer(client_id=client.client_id, acks=1, linger_ms=0, **settings)
    sent, began = 0, time.monotonic()
    try:
        while time.monotonic() < until:
            # one message at a time, acknowledged: a throttled client slows down instead of
            # piling up a backlog that closing would have to drain at the quota's rate
            producer.send(topic, MESSAGE).get(timeout=30)
            sent += 1
            time.sleep(max(0.0, began + sent * len(MESSAGE) / client.rate - time.monotonic()))
    finally:
        producer.close(timeout=5)
    return sent * len(MESSAGE)


def _consume(client: Client, settings: dict[str, object], topic: str, until: float) -> int:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(client_id=client.client_id, group_id=None, **settings)
    got = 0
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        while time.monotonic() < until:
            for records in consumer.poll(timeout_ms=300).values():
                got += sum(len(r.value) for r in records)
    finally:
        consumer.close()
    return got


def run(clients: Sequence[Client], bootstrap: str, passwords: Mapping[str, str], topic: str,
        seconds: float) -> dict[Client, int]:
    """Run every client at once for ``seconds``: the bytes each sent or read. A client that
    failed fails the run (with its error)."""
    until = time.monotonic() + seconds
    done: dict[Client, int] = {}
    failed: list[tuple[Client, BaseException]] = []

    def one(client: Client) -> None:
        try:
            work = _consume if client.consumer else _produce
            done[client] = work(client, _security(bootstrap, client.user, passwords[client.user]),
                                topic, until)
        except BaseException as exc:  # reported by the caller's thread
            failed.append((client, exc))

    threads = [threading.Thread(target=one, args=(c,), name=f"{c.user}/{c.client_id}") for c in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 60)
    if failed:
        client, exc = failed[0]
        raise AssertionError(f"client {client} failed: {type(exc).__name__}: {exc}") from exc
    return done
