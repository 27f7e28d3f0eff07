"""A fault-injecting TCP proxy for Kafka connections (tests only): it sits between kqplan and a
broker, reads each request frame's header (size, api_key, api_version, correlation_id), counts the
requests per API key over every connection, and at the N-th request of one API injects a fault:

- ``Kind.DROP``: close every connection without forwarding it, and refuse new connections (the
  broker killed before it read the request);
- ``Kind.DROP_AFTER``: forward it, then the same (killed after it acted, before it answered);
- ``Kind.BLACKHOLE``: hold every byte, both ways and on every connection, new ones included, for
  ``seconds``, then forward what was held (a broker stopped with SIGSTOP, then continued: the
  request lands late, after the client gave up);
- ``Kind.DELAY``: forward it at once, hold its answer ``seconds``;
- ``Kind.CUT``: close this connection without forwarding it; new connections pass (a connection
  lost in the network, the broker alive);
- ``Kind.CUT_AFTER``: forward it, then close this connection before its answer; new ones pass;
- ``Kind.CALL``: run ``rule.action`` (another writer acting at that moment), then forward it.

kqplan sends every request on the bootstrap connection (``cluster/transport.py``: it never
reconnects to the brokers Metadata advertises), so pointing ``--bootstrap-server`` at the proxy
puts it in the path of every request.
"""

from __future__ import annotations

import contextlib
import enum
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

ALTER_CLIENT_QUOTAS = 49
DESCRIBE_CLIENT_QUOTAS = 48


class Kind(enum.Enum):
    DROP = "drop"
    DROP_AFTER = "drop after forwarding"
    BLACKHOLE = "black-hole"
    DELAY = "delay the answer"
    CUT = "cut this connection"
    CUT_AFTER = "cut this connection after forwarding"
    CALL = "call an action, then forward"


@dataclass(frozen=True)
class Rule:
    api_key: int
    nth: int
    """1-based, counted over every connection."""
    kind: Kind
    seconds: float = 0.0
    action: Callable[[], None] | None = None
    """For ``Kind.CALL``."""


def _read_exactly(sock: socket.socket, n: int) -> bytes | None:
    data = bytearray()
    while len(data) < n:
        try:
            chunk = sock.recv(n - len(data))
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _frame(sock: socket.socket) -> bytes | None:
    """One Kafka frame (its 4-byte size included), or None at the end of the stream."""
    head = _read_exactly(sock, 4)
    if head is None:
        return None
    body = _read_exactly(sock, struct.unpack(">i", head)[0])
    return None if body is None else head + body


class FaultProxy:
    """``with FaultProxy(upstream_host, upstream_port) as proxy``: listen on ``proxy.bootstrap``."""

    def __init__(self, host: str, port: int, *, listen: int = 0) -> None:
        self.upstream = (host, port)
        self.counts: Counter[int] = Counter()
        self.rules: list[Rule] = []
        self.fired: list[Rule] = []
        self._lock = threading.Lock()
        self._held_until = 0.0
        self._refusing = False
        self._sockets: set[socket.socket] = set()
        self._listener = socket.create_server(("127.0.0.1", listen))
        self.port = self._listener.getsockname()[1]
        self._threads: list[threading.Thread] = []
        self._closed = False

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def add(self, rule: Rule) -> None:
        with self._lock:
            self.rules.append(rule)

    def __enter__(self) -> FaultProxy:
        self._spawn(self._accept)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._closed = True
        self._refuse()
        for thread in self._threads:
            thread.join(timeout=10)

    # -- faults ------------------------------------------------------------------------------------

    def _refuse(self) -> None:
        """Close the listener (new connections are refused) and every connection."""
        with self._lock:
            self._refusing = True
            sockets = [self._listener, *self._sockets]
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def _cut(self, client: socket.socket, server: socket.socket) -> None:
        """Close one proxied connection, both sides; the listener keeps accepting."""
        with self._lock:
            self._sockets.difference_update((client, server))
        for sock in (client, server):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def _hold(self) -> None:
        """While a black-hole lasts, nothing moves."""
        while (left := self._held_until - time.monotonic()) > 0:
            time.sleep(min(left, 0.05))

    def _rule_for(self, frame: bytes) -> Rule | None:
        api_key = struct.unpack_from(">h", frame, 4)[0]
        with self._lock:
            self.counts[api_key] += 1
            for rule in self.rules:
                if rule.api_key == api_key and rule.nth == self.counts[api_key]:
                    self.fired.append(rule)
                    if rule.kind is Kind.BLACKHOLE:
                        self._held_until = time.monotonic() + rule.seconds
                    return rule
        return None

    # -- the pumps ---------------------------------------------------------------------------------

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        thread.start()
        self._threads.append(thread)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._refusing:
                    client.close()
                    server.close()
                    return
                self._sockets.update((client, server))
            delayed: dict[int, float] = {}
            self._spawn(self._requests, client, server, delayed)
            self._spawn(self._answers, server, client, delayed)

    def _requests(self, client: socket.socket, server: socket.socket, delayed: dict[int, float]) -> None:
        """Client to broker, frame by frame: count, and inject the rule's fault."""
        while (frame := _frame(client)) is not None:
            rule = self._rule_for(frame)
            self._hold()
            if rule is not None and rule.kind is Kind.DROP:
                self._refuse()
                return
            if rule is not None and rule.kind is Kind.CUT:
                self._cut(client, server)
                return
            if rule is not None and rule.kind is Kind.CALL and rule.action is not None:
                rule.action()
            if rule is not None and rule.kind in (Kind.DELAY, Kind.DROP_AFTER, Kind.CUT_AFTER):
                # its answer waits, or is never delivered (-1: every connection, -2: this one)
                delayed[struct.unpack_from(">i", frame, 8)[0]] = (
                    rule.seconds if rule.kind is Kind.DELAY else
                    -1.0 if rule.kind is Kind.DROP_AFTER else -2.0)
            try:
                server.sendall(frame)
            except OSError:
                return
        # the client went away: let the broker finish what it was sent (as a real one does)
        with contextlib.suppress(OSError):
            server.shutdown(socket.SHUT_WR)

    def _answers(self, server: socket.socket, client: socket.socket, delayed: dict[int, float]) -> None:
        """Broker to client, frame by frame: a delayed answer waits its time."""
        while (frame := _frame(server)) is not None:
            self._hold()
            wait = delayed.pop(struct.unpack_from(">i", frame, 4)[0], 0.0)
            if wait == -2.0:
                self._cut(client, server)
                return
            if wait < 0:
                self._refuse()
                return
            if wait:
                time.sleep(wait)
            try:
                client.sendall(frame)
            except OSError:
                break
        for sock in (client, server):
            with contextlib.suppress(OSError):
                sock.close()


@contextlib.contextmanager
def proxied(bootstrap: str, *, listen: int = 0) -> Iterator[FaultProxy]:
    """A proxy to ``bootstrap``, listening on ``listen`` (0: a free port)."""
    host, port = bootstrap.rsplit(":", 1)
    with FaultProxy(host, int(port), listen=listen) as proxy:
        yield proxy
