"""One HTTP exchange under one deadline: connecting, the TLS handshake, sending, the status line
and headers, and the body all end within the seconds given — not within that much per ``recv``
(a server that answers a byte a second would otherwise hold a request for as long as it likes).
Used by the Prometheus client (:mod:`kqplan.metrics.prometheus`) and the OAuth token request
(:mod:`kqplan.cluster.oauth`); each caller passes what is left of the command's ``--timeout``
(:mod:`kqplan.deadline`), else its own bound.

A watchdog shuts the connection's socket down when the time is up, whatever the exchange waits
for at that moment; the body is read in chunks, the clock checked between them, and never past
``limit`` bytes. No redirect is followed (the credentials would go along): a 3xx comes back as
the reply, like any other status. Proxies set in the environment (``HTTPS_PROXY``, …) apply, as
with urllib.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from email.message import Message
from typing import Any

CHUNK = 64 * 1024


@dataclass(frozen=True, slots=True)
class Reply:
    """What the server answered, whatever the status (a 3xx included: it is not followed)."""

    status: int
    reason: str
    headers: Message
    body: bytes


class TimedOut(TimeoutError):
    """The exchange's time ran out, whatever it was waiting for."""


class TooLarge(Exception):
    """The body passed the limit."""


def exchange(request: urllib.request.Request, *, seconds: float, limit: int) -> Reply:
    """Send ``request`` and read the whole answer within ``seconds`` in all.

    Raises :class:`TimedOut` when the time runs out (or a socket times out), :class:`TooLarge`
    past ``limit`` bytes of body, and urllib's ``URLError`` (the server unreachable), ``OSError``
    or ``http.client.HTTPException`` (the connection broken, the answer not HTTP) otherwise."""
    with _Watch(time.monotonic() + seconds) as watch:
        opener = urllib.request.build_opener(_NoRedirect(), _PlainHandler(watch), _TLSHandler(watch))
        try:
            try:
                answer = opener.open(request, timeout=seconds)
            except urllib.error.HTTPError as failed:  # any status but 2xx, a 3xx not followed
                with failed:
                    body = _body(failed, watch, limit) if failed.fp is not None else b""
                return Reply(failed.code, str(failed.reason), failed.headers, body)
            with answer:
                return Reply(answer.status, str(answer.reason), answer.headers, _body(answer, watch, limit))
        except (TimedOut, TooLarge):
            raise
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            if watch.fired or isinstance(reason, TimeoutError):
                raise TimedOut() from None
            raise


def _body(answer: Any, watch: _Watch, limit: int) -> bytes:
    """The body, a chunk at a time (each read returns what one ``recv`` brought), the clock
    checked between chunks."""
    chunks: list[bytes] = []
    size = 0
    while True:
        if watch.left() <= 0:
            raise TimedOut()
        chunk = answer.read1(CHUNK)
        if watch.fired:
            raise TimedOut()
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise TooLarge()
        chunks.append(chunk)


class _Watch:
    """Shuts down the socket it holds at ``at`` (``time.monotonic()``): a blocked ``recv``,
    ``send`` or handshake then returns at once."""

    def __init__(self, at: float) -> None:
        self.at = at
        self.fired = False
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(0.0, self.left()), self._fire)
        self._timer.daemon = True

    def __enter__(self) -> _Watch:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def left(self) -> float:
        return self.at - time.monotonic()

    def hold(self, sock: socket.socket) -> None:
        with self._lock:
            self._sock = sock
            if self.fired:
                _shut(sock)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            if self._sock is not None:
                _shut(self._sock)


def _shut(sock: socket.socket) -> None:
    # the plain socket's shutdown, also under TLS (the TLS layer's state is the reader's); an
    # error: it is closed already
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


def _resolved(host: str, port: int, watch: _Watch) -> list[Any]:
    """``getaddrinfo`` within what is left (it has no timeout of its own: a resolver that does not
    answer would otherwise hold the exchange), in a daemon thread left behind when time is up."""
    found: list[Any] = []
    failed: list[BaseException] = []

    def resolve() -> None:
        try:
            found.extend(socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM))
        except (OSError, UnicodeError) as exc:  # raised in the caller's thread
            failed.append(exc)

    thread = threading.Thread(target=resolve, name="kqplan-resolve", daemon=True)
    thread.start()
    thread.join(max(0.0, watch.left()))
    if thread.is_alive():
        raise TimedOut()
    if failed:
        raise failed[0]
    return found


def _connector(watch: _Watch) -> Callable[..., socket.socket]:
    """``socket.create_connection`` within what is left, as a whole: the name resolved under the
    deadline, then each address tried with what remains (never the whole time again for the next
    one), every socket held by ``watch`` before it connects."""
    def create(address: tuple[str, int], timeout: Any = None,
               source_address: tuple[str, int] | None = None) -> socket.socket:
        host, port = address
        error: OSError | None = None
        for family, kind, proto, _, target in _resolved(host, port, watch):
            left = watch.left()
            if left <= 0:
                raise TimedOut()
            sock = socket.socket(family, kind, proto)
            try:
                watch.hold(sock)
                sock.settimeout(min(timeout, left) if isinstance(timeout, int | float) else left)
                if source_address is not None:
                    sock.bind(source_address)
                sock.connect(target)
                return sock
            except OSError as exc:
                error = exc
                sock.close()
        if watch.fired or watch.left() <= 0:
            raise TimedOut()
        raise error if error is not None else OSError(f"no address for {host}")
    return create


class _PlainConnection(http.client.HTTPConnection):
    def __init__(self, host: str, *, watch: _Watch, **kwargs: Any) -> None:
        super().__init__(host, **kwargs)
        self._create_connection = _connector(watch)  # how http.client opens its socket


class _TLSConnection(http.client.HTTPSConnection):
    def __init__(self, host: str, *, watch: _Watch, **kwargs: Any) -> None:
        super().__init__(host, **kwargs)
        self.watch = watch
        self._create_connection = _connector(watch)  # the plain socket: the handshake is watched

    def connect(self) -> None:
        super().connect()
        self.watch.hold(self.sock)  # the TLS socket that replaced it


class _PlainHandler(urllib.request.HTTPHandler):
    def __init__(self, watch: _Watch) -> None:
        super().__init__()
        self.watch = watch

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_PlainConnection, watch=self.watch), req)


class _TLSHandler(urllib.request.HTTPSHandler):
    def __init__(self, watch: _Watch) -> None:
        super().__init__()
        self.watch = watch

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_TLSConnection, watch=self.watch), req)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # the 3xx answer comes back as an HTTPError, reported with its Location
