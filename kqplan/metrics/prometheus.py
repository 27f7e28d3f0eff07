"""A Prometheus HTTP API client: ``/api/v1/query`` and ``/api/v1/query_range``.

Every wait is bounded: each request by :data:`REQUEST_TIMEOUT` and by what is left of the
command's ``--timeout`` (:mod:`kqplan.deadline`), which is also sent as the query's own
``timeout`` so that Prometheus stops the work it would answer too late. The bound is the whole
exchange's, the body's last byte included (:func:`kqplan.http.exchange`), not one ``recv``'s. A
range query is cut into chunks of at most :data:`MAX_POINTS` points per series, the server's
limit (it refuses a range of more with "exceeded maximum resolution of 11,000 points per
timeseries"). A server that is down or overloaded (connection refused or reset, HTTP 429, 502,
503, 504) is asked again a bounded number of times; nothing else is retried.

Whatever goes wrong is a :class:`~kqplan.core.errors.KqplanError` naming the server: down
(cannot connect), slow (no answer in time), garbage (not JSON, or JSON of another shape), an
HTTP error (with Prometheus's own ``error`` text when it sent one), or an answer over the size
bound. No request follows a redirect: the credentials would go along to wherever it points.
"""

from __future__ import annotations

import json
import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.client import HTTPException
from typing import Any
from urllib.parse import urlencode

from kqplan import deadline
from kqplan.core.entity import visible
from kqplan.core.errors import KqplanError
from kqplan.http import TimedOut, TooLarge, exchange
from kqplan.metrics.source import Endpoint, safe_url

MAX_POINTS = 11_000
"""Prometheus refuses a range query of more points per series than this."""
REQUEST_TIMEOUT = 30.0
"""Seconds one request may take (``--timeout`` may cut it shorter)."""
ATTEMPTS = 3
BACKOFF = (0.5, 1.0)
ANSWER_LIMIT = 64 * 1024 * 1024
"""Bytes of one answer, at most: a selector that matches millions of series is a mistake."""
_RETRIED = frozenset({429, 502, 503, 504})
Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Sample:
    """One series of an instant query: its labels (sorted) and value."""

    labels: Labels
    value: float


@dataclass(frozen=True, slots=True)
class Series:
    """One series of a range query: its labels (sorted) and (time, value) points in order."""

    labels: Labels
    points: tuple[tuple[float, float], ...]


@dataclass
class Prometheus:
    """The HTTP API of one server; :attr:`warnings` collects the warnings its answers carried."""

    endpoint: Endpoint
    request_timeout: float = REQUEST_TIMEOUT
    limit: int = ANSWER_LIMIT
    sleep: Callable[[float], None] = time.sleep
    warnings: list[str] = field(default_factory=list)
    requests: int = 0

    @property
    def shown(self) -> str:
        return self.endpoint.shown

    def query(self, expr: str, at: float) -> list[Sample]:
        """``/api/v1/query``: the instant vector ``expr`` at ``at`` (seconds since the epoch)."""
        data = self._call("query", {"query": expr, "time": _stamp(at)}, expr)
        return [Sample(labels, _value(item.get("value"), f"data.result[{i}].value", self, expr))
                for i, (labels, item) in enumerate(_results(data, "vector", self, expr))]

    def query_samples(self, expr: str, at: float) -> list[Series]:
        """``/api/v1/query`` of a range vector (``selector[5m]``) at ``at``: each series' raw
        samples, at the times the server scraped them."""
        data = self._call("query", {"query": expr, "time": _stamp(at)}, expr)
        found = []
        for i, (labels, item) in enumerate(_results(data, "matrix", self, expr)):
            values = item.get("values")
            if not isinstance(values, list):
                raise self._garbage(f"data.result[{i}].values is not a list", expr)
            found.append(Series(labels, tuple(sorted(_point(v, f"data.result[{i}].values[{j}]", self, expr)
                                                     for j, v in enumerate(values)))))
        return found

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[Series]:
        """``/api/v1/query_range`` from ``start`` to ``end`` every ``step`` seconds, in chunks of
        at most :data:`MAX_POINTS` points; the chunks' series joined by their labels."""
        if step <= 0 or end < start:
            raise ValueError(f"bad range: {start}..{end} step {step}")
        joined: dict[Labels, list[tuple[float, float]]] = {}
        span = step * (MAX_POINTS - 1)
        chunk_start = start
        while chunk_start <= end:
            chunk_end = min(end, chunk_start + span)
            params = {"query": expr, "start": _stamp(chunk_start), "end": _stamp(chunk_end),
                      "step": _stamp(step)}
            data = self._call("query_range", params, expr)
            for i, (labels, item) in enumerate(_results(data, "matrix", self, expr)):
                values = item.get("values")
                if not isinstance(values, list):
                    raise self._garbage(f"data.result[{i}].values is not a list", expr)
                points = joined.setdefault(labels, [])
                points.extend(_point(v, f"data.result[{i}].values[{j}]", self, expr)
                              for j, v in enumerate(values))
            chunk_start = chunk_end + step
        return [Series(labels, tuple(sorted(points))) for labels, points in joined.items()]

    # -- one request --------------------------------------------------------------------------

    def _call(self, api: str, params: Mapping[str, str], expr: str) -> Any:
        """POST ``params`` to ``/api/v1/<api>`` (retrying what may pass); the answer's ``data``."""
        url = f"{self.endpoint.base}/api/v1/{api}"
        for attempt in range(1, ATTEMPTS + 1):
            timeout = self._timeout()
            body = urlencode({**params, "timeout": _stamp(timeout)}).encode()
            request = urllib.request.Request(url, data=body, method="POST", headers={
                **dict(self.endpoint.headers), "Accept": "application/json",
                "Content-Type": "application/x-www-form-urlencoded", "User-Agent": "kqplan"})
            try:
                self.requests += 1
                status, raw = self._send(request, timeout)
            except _Retry as again:
                left = deadline.remaining()
                if attempt == ATTEMPTS or (left is not None and left <= BACKOFF[attempt - 1]):
                    raise again.error from None
                self.sleep(BACKOFF[attempt - 1])
                continue
            return self._data(status, raw, expr)
        raise AssertionError("unreachable")  # pragma: no cover - the last attempt raises or returns

    def _timeout(self) -> float:
        left = deadline.remaining()
        if left is None:
            return self.request_timeout
        if left <= 0:
            current = deadline.current()
            raise KqplanError(f"the command's time ran out before Prometheus at {self.shown} was asked",
                              hint=f"raise {current.text if current else '--timeout'}")
        return min(self.request_timeout, left)

    def _send(self, request: urllib.request.Request, timeout: float) -> tuple[int, bytes]:
        """One exchange, ``timeout`` seconds in all (:func:`kqplan.http.exchange`: connecting,
        the headers and every byte of the body)."""
        try:
            reply = exchange(request, seconds=timeout, limit=self.limit)
        except TimedOut:
            raise self._slow(timeout) from None
        except TooLarge:
            raise KqplanError(f"Prometheus at {self.shown} answered more than {self.limit // 2**20} "
                              "MiB", hint="narrow --selector or --since (or raise --step)") from None
        except urllib.error.URLError as exc:
            raise self._unreachable(exc.reason) from None
        except (OSError, HTTPException) as exc:
            raise self._unreachable(exc) from None
        if not 200 <= reply.status < 300:
            problem = self._http_error(reply.status, reply.reason, reply.headers, reply.body)
            if reply.status in _RETRIED:
                raise _Retry(problem)
            raise problem
        return reply.status, reply.body

    def _unreachable(self, reason: object) -> KqplanError | _Retry:
        if isinstance(reason, ssl.SSLError | ssl.CertificateError):
            return KqplanError(f"TLS with Prometheus at {self.shown} failed: {visible(str(reason))}",
                               hint="check the URL's scheme and the server's certificate (the CA "
                               "file in SSL_CERT_FILE)")
        if isinstance(reason, socket.gaierror):
            return KqplanError(f"cannot reach Prometheus at {self.shown}: the host name does not "
                               "resolve", hint="check --prometheus URL")
        why = reason.strerror if isinstance(reason, OSError) and reason.strerror else str(reason)
        return _Retry(KqplanError(f"cannot reach Prometheus at {self.shown}: {visible(why)}",
                                  hint="is Prometheus running there? check --prometheus URL"))

    def _slow(self, timeout: float) -> KqplanError:
        current = deadline.current()
        if current is not None and timeout < self.request_timeout:
            within = f"before the command's {current.text} ran out"
        else:
            within = f"within {deadline.seconds_text(timeout)} (the limit of one request)"
        return KqplanError(f"Prometheus at {self.shown} did not answer {within}",
                           hint="narrow --selector or --since (or raise --step, or --timeout)")

    def _http_error(self, code: int, reason: str, headers: Any, raw: bytes) -> KqplanError:
        said = _error_text(raw)
        text = f"Prometheus at {self.shown} answered HTTP {code} {visible(str(reason))}".rstrip()
        if said:
            text += f": {said}"
        if 300 <= code < 400:
            where = _location(headers)
            return KqplanError(f"{text} (redirected{' to ' + where if where else ''})",
                               hint="give the URL it redirects to (kqplan does not follow "
                               "redirects: the credentials would go along)")
        hints = {401: "give credentials: $KQPLAN_PROMETHEUS_TOKEN, --prometheus-headers FILE, or "
                      "user:password@ in the URL",
                 403: "the credentials given may not read this server's data",
                 404: "give the server's base URL (kqplan adds /api/v1/query itself)"}
        return KqplanError(text, hint=hints.get(code, "see the server's log" if code >= 500
                                                else "check --selector and the metric names (--metric)"))

    def _data(self, status: int, raw: bytes, expr: str) -> Any:
        try:
            answer = json.loads(raw)
        except (UnicodeDecodeError, ValueError):
            head = raw[:60].decode("utf-8", "replace")
            raise KqplanError(f"Prometheus at {self.shown} answered something that is not JSON "
                              f"(HTTP {status}, starting '{visible(head)}')",
                              hint="is the URL Prometheus's API (not a login page or a proxy's)?"
                              ) from None
        if not isinstance(answer, dict) or answer.get("status") not in ("success", "error"):
            raise self._garbage("no \"status\" of success or error", expr)
        if answer["status"] == "error":
            raise KqplanError(f"Prometheus at {self.shown} refused the query: "
                              f"{_error_text(raw) or 'no reason given'}\n  query: {visible(expr)}",
                              hint="check --selector and the metric names (--metric)")
        warnings = answer.get("warnings")
        if isinstance(warnings, list):
            self.warnings.extend(visible(str(w)) for w in warnings)
        if "data" not in answer:
            raise self._garbage("no \"data\"", expr)
        return answer["data"]

    def _garbage(self, what: str, expr: str) -> KqplanError:
        return KqplanError(f"Prometheus at {self.shown} answered JSON that is not a Prometheus API "
                           f"answer: {what}\n  query: {visible(expr)}",
                           hint="is the URL Prometheus's HTTP API (or a compatible one)?")


class _Retry(Exception):
    """A failure worth asking again; ``error`` is what the last attempt reports."""

    def __init__(self, error: KqplanError) -> None:
        super().__init__(error.message)
        self.error = error


def _results(data: Any, kind: str, prom: Prometheus, expr: str) -> list[tuple[Labels, dict[str, Any]]]:
    """``data.result`` of a ``kind`` answer: each item with its labels, checked."""
    if not isinstance(data, dict) or data.get("resultType") != kind \
            or not isinstance(data.get("result"), list):
        raise prom._garbage(f"data is not a {kind} result", expr)
    out = []
    for i, item in enumerate(data["result"]):
        metric = item.get("metric") if isinstance(item, dict) else None
        if not isinstance(metric, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                   for k, v in metric.items()):
            raise prom._garbage(f"data.result[{i}].metric is not a map of label names to strings", expr)
        out.append((tuple(sorted(metric.items())), item))
    return out


def _point(raw: Any, where: str, prom: Prometheus, expr: str) -> tuple[float, float]:
    if not isinstance(raw, list) or len(raw) != 2 or not isinstance(raw[0], int | float) \
            or isinstance(raw[0], bool):
        raise prom._garbage(f"{where} is not [time, \"value\"]", expr)
    return float(raw[0]), _number(raw[1], where, prom, expr)


def _value(raw: Any, where: str, prom: Prometheus, expr: str) -> float:
    return _point(raw, where, prom, expr)[1]


def _number(raw: Any, where: str, prom: Prometheus, expr: str) -> float:
    """A sample value: Prometheus sends it as a string (``"12.5"``, ``"NaN"``, ``"+Inf"``)."""
    if isinstance(raw, str):
        try:
            return float(raw)
        except ValueError:
            pass
    raise prom._garbage(f"{where} holds no number as a string", expr)


def _error_text(raw: bytes) -> str:
    """Prometheus's ``errorType: error`` from an error answer's JSON (one line, visible)."""
    try:
        answer = json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        return ""
    if not isinstance(answer, dict) or not isinstance(answer.get("error"), str):
        return ""
    kind = answer.get("errorType")
    return visible(f"{kind}: {answer['error']}" if isinstance(kind, str) and kind else answer["error"])


def _location(headers: Any) -> str:
    where = headers.get("Location") if headers is not None else None
    return safe_url(where) if isinstance(where, str) else ""


def _stamp(seconds: float) -> str:
    """A time or duration as Prometheus takes it: seconds, up to milliseconds."""
    return f"{seconds:.3f}".rstrip("0").rstrip(".")


def describe_series(labels: Sequence[tuple[str, str]]) -> str:
    """``{a="b", c="d"}``: labels as PromQL writes them, for messages."""
    return "{" + ", ".join(f'{k}="{visible(v)}"' for k, v in labels) + "}"
