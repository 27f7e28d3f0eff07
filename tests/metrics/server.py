"""A tiny HTTP server on a loopback port that answers as the test scripts it: a Prometheus that is
slow, answers garbage or HTTP errors, or answers a scripted set of series. It records every
request (path, form parameters, headers) so tests can check what kqplan sent."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class Request:
    path: str
    params: dict[str, str]
    headers: dict[str, str]


@dataclass(frozen=True)
class Answer:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    delay: float = 0.0
    headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def json(cls, doc: Any, status: int = 200) -> Answer:
        return cls(status, json.dumps(doc).encode())


Script = Callable[[Request], Answer]


@dataclass
class Served:
    url: str
    requests: list[Request] = field(default_factory=list)


@contextmanager
def serve(script: Script) -> Iterator[Served]:
    """Serve ``script`` on 127.0.0.1 (a free port) until the block ends."""
    served = Served("")

    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            parts = urlsplit(self.path)
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
            params = {k: v[-1] for k, v in parse_qs(raw or parts.query).items()}
            request = Request(parts.path, params, {k.lower(): v for k, v in self.headers.items()})
            served.requests.append(request)
            answer = script(request)
            time.sleep(answer.delay)
            try:
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.content_type)
                self.send_header("Content-Length", str(len(answer.body)))
                for name, value in answer.headers:
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(answer.body)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout tests)
                pass

        do_GET = do_POST = _handle

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    served.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def vector(*series: tuple[dict[str, str], float]) -> Answer:
    return Answer.json({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": labels, "value": [1_700_000_000.0, repr(float(value))]} for labels, value in series]}})


def matrix(*series: tuple[dict[str, str], Sequence[tuple[float, float]]]) -> Answer:
    result = [{"metric": labels, "values": [[t, repr(float(v))] for t, v in points]}
              for labels, points in series]
    return Answer.json({"status": "success", "data": {"resultType": "matrix", "result": result}})


@dataclass
class Scripted:
    """A Prometheus with scripted series: per quota ``resource``, the throttle series (labels,
    points) its range query returns and the usage samples (labels, peak) its instant query does;
    ``count`` answers the series-count query."""

    throttled: dict[str, list[tuple[dict[str, str], list[tuple[float, float]]]]] = field(default_factory=dict)
    usage: dict[str, list[tuple[dict[str, str], float]]] = field(default_factory=dict)
    count: int = 0

    def __call__(self, request: Request) -> Answer:
        query = request.params.get("query", "")
        resource = next((r for r in ("Produce", "Fetch", "Request", "ControllerMutation")
                         if f'resource="{r}"' in query), "")
        if request.path == "/api/v1/query_range":
            return matrix(*self.throttled.get(resource, []))
        if query.startswith("count("):
            return vector(({}, self.count)) if self.count else vector()
        return vector(*self.usage.get(resource, []))
