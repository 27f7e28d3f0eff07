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
    points) its throttle range query returns, and the usage (labels, peak) its usage range query
    returns at every step of the range; ``count`` answers the series-count query."""

    throttled: dict[str, list[tuple[dict[str, str], list[tuple[float, float]]]]] = field(default_factory=dict)
    usage: dict[str, list[tuple[dict[str, str], float]]] = field(default_factory=dict)
    count: int = 0

    def __call__(self, request: Request) -> Answer:
        query = request.params.get("query", "")
        resource = next((r for r in ("Produce", "Fetch", "Request", "ControllerMutation")
                         if f'resource="{r}"' in query), "")
        if request.path == "/api/v1/query_range" and "throttle_time" not in query:
            start, end, step = (float(request.params[k]) for k in ("start", "end", "step"))
            # at every step of the range, and when the scripted throttling was
            steps = {start + i * step for i in range(int((end - start) // step) + 1)} | {
                t for _, points in self.throttled.get(resource, []) for t, _ in points}
            return matrix(*[(labels, [(t, peak) for t in sorted(steps)])
                            for labels, peak in self.usage.get(resource, [])])
        if request.path == "/api/v1/query_range":
            return matrix(*self.throttled.get(resource, []))
        if query.startswith("count("):
            return vector(({}, self.count)) if self.count else vector()
        return vector(*self.usage.get(resource, []))


def steady(labels: dict[str, str], usage: float, *, throttle: float = float("nan"),
           resource: str = "Produce", broker: str = "b1", fail_samples: bool = False) -> Script:
    """A Prometheus whose one bucket (``labels``) reads ``usage`` and ``throttle`` every second, at
    whatever time it is asked about: the usage range queries (``fleet usage``, the forecast, the
    watch list) and the raw samples of ``apply --verify-enforcement``'s watch (``SERIES[Ns]`` at a
    time: the readings of the seconds before it). ``fail_samples``: the watch's queries get HTTP 500."""
    import math
    import re

    def points(start: float, end: float, step: float, value: float) -> list[tuple[float, float]]:
        return [(start + i * step, value) for i in range(int((end - start) // step) + 1)]

    def script(request: Request) -> Answer:
        query = request.params.get("query", "")
        mine = f'resource="{resource}"' in query
        if request.path == "/api/v1/query_range":
            if mine and "byte_rate" in query:
                start, end, step = (float(request.params[k]) for k in ("start", "end", "step"))
                return matrix((labels, points(start, end, step, usage)))
            return matrix()
        found = re.search(r"\[(\d+)s\]$", query)
        if found and mine:
            if fail_samples:
                return Answer.json({"status": "error", "errorType": "internal", "error": "down"}, 500)
            at, span = float(request.params["time"]), int(found.group(1))
            value = usage if "byte_rate" in query else throttle
            return matrix(({**labels, "resource": resource, "instance": broker},
                           points(math.floor(at - span) + 1, at, 1.0, value)))
        return vector()

    return script
