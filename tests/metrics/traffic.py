"""Real Kafka clients (kafka-python) at controlled rates, over SASL/PLAIN, with fixed client-ids:
the traffic whose throttling the metrics tests watch Kafka measure.

The clients run in a process of their own (:class:`Traffic`), so that they share no interpreter
lock with the test and the kqplan commands it runs in-process: on two cores, a dozen producer
threads in the test's own process fell behind their rates. The child says ``ready`` once every
client is connected (rates are measured from then), and stops on SIGTERM, printing the bytes each
client moved as JSON."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

MESSAGE = b"x" * 2000


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


def _produce(client: Client, settings: dict[str, object], topic: str, ready: threading.Barrier,
             stop: threading.Event) -> int:
    from kafka import KafkaProducer

    producer = KafkaProducer(client_id=client.client_id, acks=1, linger_ms=0, **settings)
    producer.partitions_for(topic)  # connected: metadata fetched
    ready.wait()
    sent, began = 0, time.monotonic()
    try:
        while not stop.is_set():
            # one message at a time, acknowledged: a throttled client slows down instead of
            # piling up a backlog that closing would have to drain at the quota's rate
            producer.send(topic, MESSAGE).get(timeout=30)
            sent += 1
            stop.wait(max(0.0, began + sent * len(MESSAGE) / client.rate - time.monotonic()))
    finally:
        producer.close(timeout=5)
    return sent * len(MESSAGE)


def _consume(client: Client, settings: dict[str, object], topic: str, ready: threading.Barrier,
             stop: threading.Event) -> int:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(client_id=client.client_id, group_id=None, **settings)
    got = 0
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        ready.wait()
        while not stop.is_set():
            for records in consumer.poll(timeout_ms=300).values():
                got += sum(len(r.value) for r in records)
    finally:
        consumer.close()
    return got


def run(clients: Sequence[Client], bootstrap: str, passwords: Mapping[str, str], topic: str,
        stop: threading.Event, on_ready: threading.Event) -> dict[Client, int]:
    """Run every client at once until ``stop`` is set (``on_ready`` set once all are connected):
    the bytes each sent or read. A client that failed fails the run (with its error)."""
    done: dict[Client, int] = {}
    failed: list[tuple[Client, BaseException]] = []
    ready = threading.Barrier(len(clients), action=on_ready.set)

    def one(client: Client) -> None:
        try:
            work = _consume if client.consumer else _produce
            done[client] = work(client, _security(bootstrap, client.user, passwords[client.user]),
                                topic, ready, stop)
        except BaseException as exc:  # reported by the caller's thread
            failed.append((client, exc))
            ready.abort()

    threads = [threading.Thread(target=one, args=(c,), name=f"{c.user}/{c.client_id}") for c in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failed:
        client, exc = failed[0]
        raise AssertionError(f"client {client} failed: {type(exc).__name__}: {exc}") from exc
    return done


class Traffic:
    """The clients in a child process: :meth:`start` returns once they are all connected,
    :meth:`stop` ends them and returns the bytes each moved."""

    def __init__(self, clients: Sequence[Client], bootstrap: str, passwords: Mapping[str, str],
                 topic: str) -> None:
        self.clients = tuple(clients)
        self.spec = {"clients": [asdict(c) for c in clients], "bootstrap": bootstrap,
                     "passwords": dict(passwords), "topic": topic}
        self.process: subprocess.Popen[str] | None = None

    def start(self, timeout: float = 120.0) -> Traffic:
        from tests.kafka.broker import die_with_parent

        root = Path(__file__).resolve().parents[2]
        command = [*die_with_parent(), sys.executable, "-m", "tests.metrics.traffic", json.dumps(self.spec)]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                        cwd=root)
        assert self.process.stdout is not None
        ready = threading.Event()
        lines: list[str] = []

        def read() -> None:
            assert self.process is not None
            assert self.process.stdout is not None
            first = self.process.stdout.readline()
            lines.append(first)
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(timeout) or lines[0].strip() != "ready":
            error = self.stop_now()
            raise AssertionError(f"the clients did not connect within {timeout:.0f} s: {error}")
        return self

    def stop(self) -> dict[Client, int]:
        """SIGTERM, then the bytes moved per client (the child's JSON line)."""
        process, self.process = self.process, None
        assert process is not None
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=120)
        if process.returncode != 0:
            raise AssertionError(f"the clients failed (exit {process.returncode}): {err[-2000:]}")
        moved = json.loads(out.strip().splitlines()[-1])
        return {client: moved[i] for i, client in enumerate(self.clients)}

    def stop_now(self) -> str:
        """Kill the child unless :meth:`stop` ended it (a failed test): its stderr, for a message."""
        process, self.process = self.process, None
        if process is None:
            return ""
        if process.poll() is None:
            process.kill()
        _, err = process.communicate(timeout=30)
        return err[-2000:]


def main(argv: Sequence[str]) -> None:
    spec = json.loads(argv[0])
    clients = [Client(**c) for c in spec["clients"]]
    stop, ready = threading.Event(), threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def announce() -> None:
        ready.wait()
        print("ready", flush=True)

    threading.Thread(target=announce, daemon=True).start()
    moved = run(clients, spec["bootstrap"], spec["passwords"], spec["topic"], stop, ready)
    print(json.dumps([moved[c] for c in clients]), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
