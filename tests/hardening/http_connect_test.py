"""One deadline for the whole HTTP exchange, connect included (a review of issue 41): a resolver
that does not answer, and several addresses that each leave a connect hanging, end at the deadline
— not at the deadline once per address. A real listening socket whose accept queue is full stands
for a host that drops SYNs; only the resolver (the C library's getaddrinfo, no client library) is
replaced to name it."""

from __future__ import annotations

import socket
import time
import urllib.request
from collections.abc import Iterator

import pytest

from kqplan.http import TimedOut, exchange


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "*")


@pytest.fixture
def full_listener() -> Iterator[tuple[str, int]]:
    """A listener that accepts nothing, its queue filled: a further connect waits for ever."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    address = server.getsockname()
    fillers = []
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(address)
        fillers.append(filler)
    time.sleep(0.2)
    probe = socket.socket()
    probe.settimeout(0.5)
    try:
        probe.connect(address)
        pytest.fail("the listener's queue is not full: this kernel accepts the connect")  # pragma: no cover
    except TimeoutError:
        pass
    finally:
        probe.close()
    yield address
    for sock in (*fillers, server):
        sock.close()


def test_a_resolver_that_does_not_answer_ends_at_the_deadline(monkeypatch):
    def slow(*args, **kwargs):
        time.sleep(5)
        raise OSError("never")
    monkeypatch.setattr(socket, "getaddrinfo", slow)
    started = time.monotonic()
    with pytest.raises(TimedOut):
        exchange(urllib.request.Request("http://prometheus.invalid:9090/"), seconds=1.0, limit=1024)
    assert time.monotonic() - started < 2.0


def test_three_hanging_addresses_share_one_deadline(monkeypatch, full_listener):
    host, port = full_listener
    entry = (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (host, port))
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: [entry, entry, entry])
    started = time.monotonic()
    with pytest.raises(TimedOut):
        exchange(urllib.request.Request(f"http://three.invalid:{port}/"), seconds=1.0, limit=1024)
    assert time.monotonic() - started < 2.0
