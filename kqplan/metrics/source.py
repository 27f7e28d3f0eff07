"""Where a cluster's metrics are: the Prometheus URL, the selector that picks the cluster's
series, the credentials, the metric-name overrides.

Today the command line gives them (``--prometheus``, ``--selector``, ``--prometheus-headers``,
``--metric``) and the environment (``KQPLAN_PROMETHEUS_URL``, ``KQPLAN_PROMETHEUS_TOKEN``,
``KQPLAN_PROMETHEUS_HEADERS``); an inventory's ``[clusters.NAME.metrics]`` table will give the
same fields as another :class:`PrometheusSource`, under the flags (:meth:`or_settings`).

Credentials are never echoed: a header file's problems name the file and line, never a value;
a URL's ``user:password@`` becomes a Basic ``Authorization`` header and is dropped from every
URL kqplan shows.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from kqplan.core.entity import visible
from kqplan.core.errors import KqplanError
from kqplan.files import read_bounded_text

PLACEHOLDER = "{cluster}"
"""In a selector: the inventory name of the cluster whose series it picks."""
ENV_URL = "KQPLAN_PROMETHEUS_URL"
ENV_TOKEN = "KQPLAN_PROMETHEUS_TOKEN"
ENV_HEADERS = "KQPLAN_PROMETHEUS_HEADERS"
HEADERS_LIMIT = 64 * 1024
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP header name (RFC 9110 token)
NO_URL_HINT = (f"give --prometheus URL (the server's base URL, e.g. http://prometheus:9090), or set "
               f"{ENV_URL}")


@dataclass(frozen=True, slots=True)
class PrometheusSource:
    """The metrics settings of one command, as given; None (or empty): not given here."""

    url: str | None = None
    selector: str | None = None
    headers_file: Path | None = None
    names: tuple[str, ...] = ()
    """``ROLE.NAME=VALUE`` overrides of :class:`~kqplan.metrics.names.MetricNames`, in order."""

    def for_cluster(self, name: str) -> PrometheusSource:
        """This source with ``{cluster}`` in its selector replaced by the inventory name ``name``,
        escaped for a PromQL string in double quotes."""
        if self.selector is None or PLACEHOLDER not in self.selector:
            return self
        quoted = name.replace("\\", "\\\\").replace('"', '\\"')
        return replace(self, selector=self.selector.replace(PLACEHOLDER, quoted))

    def or_settings(self, settings: PrometheusSource) -> PrometheusSource:
        """These settings over ``settings`` (an inventory's, later): a field given here wins; the
        name overrides of both apply, these last."""
        return PrometheusSource(self.url or settings.url,
                                self.selector if self.selector is not None else settings.selector,
                                self.headers_file or settings.headers_file,
                                (*settings.names, *self.names))


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A Prometheus server to ask: its base URL (no credentials), what to show of it, headers."""

    base: str
    shown: str
    headers: tuple[tuple[str, str], ...] = ()

    def __repr__(self) -> str:  # the headers carry credentials: never in a repr or a traceback
        return f"Endpoint({self.shown!r}, {len(self.headers)} header(s))"


def endpoint(source: PrometheusSource, env: Mapping[str, str] | None = None,
             *, limit: int = HEADERS_LIMIT) -> Endpoint:
    """The server ``source`` names (else ``$KQPLAN_PROMETHEUS_URL``), with its auth headers."""
    env = os.environ if env is None else env
    url = source.url or env.get(ENV_URL)
    if not url:
        raise KqplanError("no Prometheus to ask", hint=NO_URL_HINT)
    base, shown, basic = parse_url(url)
    headers: dict[str, str] = {}
    headers_file = source.headers_file or (Path(env[ENV_HEADERS]) if env.get(ENV_HEADERS) else None)
    if headers_file is not None:
        headers.update(read_headers(headers_file, limit=limit))
    for value, what in ((basic, "the URL's user:password@"), (_bearer(env), f"${ENV_TOKEN}")):
        if value is None:
            continue
        if any(name.lower() == "authorization" for name in headers):
            raise KqplanError(f"two Authorization headers: {what} and an earlier one",
                              hint=f"keep one of the URL's user:password@, ${ENV_TOKEN} and the "
                              "headers file's Authorization line")
        headers["Authorization"] = value
    return Endpoint(base, shown, tuple(headers.items()))


def _bearer(env: Mapping[str, str]) -> str | None:
    token = env.get(ENV_TOKEN, "").strip()
    if not token:
        return None
    if not token.isprintable():
        raise KqplanError(f"${ENV_TOKEN} holds a control character",
                          hint="set it to the bearer token alone, one line")
    return f"Bearer {token}"


def parse_url(url: str) -> tuple[str, str, str | None]:
    """``http(s)://[user:password@]host[:port][/prefix]`` → (the base URL without credentials,
    the same as shown in messages, a Basic ``Authorization`` value or None)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port  # raises on a port that is not a number
    except ValueError as exc:
        raise KqplanError(f"--prometheus: not a URL ({exc})", hint=NO_URL_HINT) from None
    host = parts.hostname
    if parts.scheme not in ("http", "https") or not host:
        raise KqplanError(f"--prometheus: '{safe_url(url)}' is not an http:// or https:// URL with a host",
                          hint=NO_URL_HINT)
    if parts.query or parts.fragment:
        raise KqplanError(f"--prometheus: '{safe_url(url)}' has a query or fragment",
                          hint="give the server's base URL: kqplan adds /api/v1/query itself")
    netloc = (f"[{host}]" if ":" in host else host) + (f":{port}" if port is not None else "")
    base = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
    basic = None
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        basic = "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")
    return base, visible(base), basic


def safe_url(url: str) -> str:
    """A URL for a message: any ``user:password@`` cut out (best effort on a URL that is wrong)."""
    return visible(re.sub(r"(?<=//)[^/@]*@", "", url))


def read_headers(path: Path, *, limit: int = HEADERS_LIMIT) -> dict[str, str]:
    """A headers file: ``Name: value`` lines (``#`` comments and blank lines skipped), e.g.
    ``Authorization: Bearer …`` or ``X-Scope-OrgID: team-a``. A problem names the line, never
    its value."""
    text = read_bounded_text(path, what="Prometheus headers file", limit=limit)
    shown = visible(str(path))
    headers: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, colon, value = line.partition(":")
        name, value = name.strip(), value.strip()
        if not colon or not _TOKEN.fullmatch(name):
            raise KqplanError(f"{shown}:{number}: not a 'Name: value' header line",
                              hint="one header per line, e.g. Authorization: Bearer TOKEN")
        if not value or not value.isprintable():
            raise KqplanError(f"{shown}:{number}: header {name} has an empty value or a control "
                              "character", hint="one header per line, its value on the same line")
        if name.lower() in {n.lower() for n in headers}:
            raise KqplanError(f"{shown}:{number}: header {name} is given twice",
                              hint="keep one line per header")
        headers[name] = value
    return headers
