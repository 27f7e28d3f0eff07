"""Where a cluster's metrics are: the Prometheus URL, the selector that picks the cluster's
series, the credentials, the metric-name overrides.

The command line gives them (``--prometheus``, ``--selector``, ``--prometheus-headers``,
``--metric``), the environment (``KQPLAN_PROMETHEUS_URL``, ``KQPLAN_PROMETHEUS_TOKEN``,
``KQPLAN_PROMETHEUS_HEADERS``) and an inventory's ``[clusters.NAME.metrics]`` and ``[metrics]``,
as another :class:`PrometheusSource` under the flags (:meth:`PrometheusSource.or_settings`).
A selector's ``{cluster}`` becomes the inventory name through one function,
:func:`fill_cluster`, whichever gave the selector: escaped for the PromQL string it stands in,
so that a name can neither add a matcher nor widen a regex.

Credentials are never echoed: a header file's problems name the file and line, never a value;
a URL's ``user:password@`` becomes a Basic ``Authorization`` header and is dropped from every
URL kqplan shows, and a URL whose credentials cannot be told apart (a password with an
unencoded ``/``, ``?`` or ``#``) is not shown at all. A header value HTTP cannot carry (beyond
Latin-1) is refused by where it came from, never shown.
"""

from __future__ import annotations

import base64
import os
import re
import unicodedata
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
    url_from: str = "--prometheus"
    """What gave :attr:`url`, for messages: the flag, or the kqplan.toml setting."""

    def for_cluster(self, name: str | None, *, what: str = "--selector") -> PrometheusSource:
        """This source with each ``{cluster}`` of its selector replaced by the inventory name
        ``name``, escaped for where it stands (:func:`fill_cluster`); ``what`` names the
        selector in messages (the flag, or the kqplan.toml setting). ``name`` None: no cluster
        to name, and a placeholder is refused."""
        if self.selector is None:
            return self
        return replace(self, selector=fill_cluster(self.selector, name, what=what))

    def or_settings(self, settings: PrometheusSource) -> PrometheusSource:
        """These settings over ``settings`` (an inventory's): a field given here wins; the name
        overrides of both apply, these last."""
        return PrometheusSource(self.url or settings.url,
                                self.selector if self.selector is not None else settings.selector,
                                self.headers_file or settings.headers_file,
                                (*settings.names, *self.names),
                                self.url_from if self.url else settings.url_from)


_QUOTES = "\"'`"
_RE2_META = re.compile(r"[\\.+*?()|\[\]{}^$]")
"""What Go's ``regexp.QuoteMeta`` escapes: the rest of a name stands for itself in RE2."""
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_PLACE_HINT = (f"write {PLACEHOLDER} inside the quotes of a label value, e.g. "
               f'{{kafka_cluster="{PLACEHOLDER}"}}')


def fill_cluster(selector: str, name: str | None, *, what: str = "--selector") -> str:
    """``selector`` with each ``{cluster}`` replaced by the inventory name ``name``, escaped for
    the PromQL string literal it stands in, so that the matcher's value is the name and nothing
    else (never a second matcher, never a wider regex):

    - in double or single quotes, the quote and ``\\`` are escaped, and what is not printable
      is written ``\\n``, ``\\uXXXX`` (PromQL's escapes, Go's);
    - in back quotes nothing can be escaped: a name with a backtick or a control character is
      refused;
    - in the value of a regex matcher (``=~``, ``!~``), first regex-quoted (RE2's
      metacharacters escaped, as Go's ``regexp.QuoteMeta`` does): it matches the name alone.

    A placeholder outside a quoted label value is refused, with its column; so is one with no
    cluster to name (``name`` None). ``what`` names the selector: the flag or the setting."""
    if PLACEHOLDER not in selector:
        return selector
    out: list[str] = []
    position = 0
    while position < len(selector):
        if selector.startswith(PLACEHOLDER, position):
            raise KqplanError(f"{what} '{visible(selector)}': {PLACEHOLDER} at column {position + 1} is "
                              "outside a quoted label value", hint=_PLACE_HINT)
        if selector[position] not in _QUOTES:
            out.append(selector[position])
            position += 1
            continue
        end = _literal_end(selector, position)
        regex = selector[:position].rstrip()[-2:] in ("=~", "!~")
        out.append(_fill_literal(selector[position:end], name, regex=regex,
                                 where=f"{what} '{visible(selector)}'"))
        position = end
    return "".join(out)


def _literal_end(text: str, start: int) -> int:
    """The index after the string literal that opens at ``start`` (the end of ``text`` when it
    is not closed: the selector's own check refuses it then)."""
    quote = text[start]
    position = start + 1
    while position < len(text):
        if text[position] == quote:
            return position + 1
        position += 2 if text[position] == "\\" and quote != "`" else 1
    return len(text)


def _fill_literal(literal: str, name: str | None, *, regex: bool, where: str) -> str:
    quote = literal[0]
    if len(literal) < 2 or literal[-1] != quote:
        return literal
    body = literal[1:-1]
    out: list[str] = []
    position = 0
    while position < len(body):
        if body.startswith(PLACEHOLDER, position):
            out.append(_escaped(name, quote, regex=regex, where=where))
            position += len(PLACEHOLDER)
        else:  # an escape sequence is copied whole: its second character starts nothing
            step = 2 if body[position] == "\\" and quote != "`" else 1
            out.append(body[position:position + step])
            position += step
    return quote + "".join(out) + quote


def _escaped(name: str | None, quote: str, *, regex: bool, where: str) -> str:
    """``name`` as the text of a string literal in ``quote`` (and as a regex matching only it)."""
    if name is None:
        raise KqplanError(f"{where}: its {PLACEHOLDER} names an inventory cluster, and no --cluster "
                          "says which", hint="add --cluster NAME, or write the selector without the "
                          "placeholder")
    value = _RE2_META.sub(lambda m: "\\" + m.group(), name) if regex else name
    if quote == "`":
        if any(char == "`" or unicodedata.category(char) == "Cc" for char in value):
            raise KqplanError(f"{where}: the name of cluster {visible(name)} holds a backtick or a control "
                              "character, which a backtick-quoted PromQL string cannot hold",
                              hint=f'quote the value with double quotes: {{kafka_cluster="{PLACEHOLDER}"}}')
        return value
    return "".join(_escaped_char(char, quote) for char in value)


def _escaped_char(char: str, quote: str) -> str:
    if char in ("\\", quote):
        return "\\" + char
    if char.isprintable():
        return char
    code = ord(char)
    return _SHORT.get(char) or (f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")


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
    url, what = (source.url, source.url_from) if source.url else (env.get(ENV_URL), f"${ENV_URL}")
    if not url:
        raise KqplanError("no Prometheus to ask", hint=NO_URL_HINT)
    base, shown, basic = parse_url(url, what=what)
    headers: dict[str, str] = {}
    headers_file = source.headers_file or (Path(env[ENV_HEADERS]) if env.get(ENV_HEADERS) else None)
    if headers_file is not None:
        headers.update(read_headers(headers_file, limit=limit))
    for value, given in ((basic, "the URL's user:password@"), (_bearer(env), f"${ENV_TOKEN}")):
        if value is None:
            continue
        if any(name.lower() == "authorization" for name in headers):
            raise KqplanError(f"two Authorization headers: {given} and an earlier one",
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
    if not _carried(token):
        raise KqplanError(f"${ENV_TOKEN} {_NOT_CARRIED}", hint=_NOT_CARRIED_HINT)
    return f"Bearer {token}"


_NOT_CARRIED = "holds a character an HTTP header cannot carry (its value is not shown)"
_NOT_CARRIED_HINT = ("an HTTP header value is ASCII (Latin-1 at most): encode the value as the server "
                     "expects it (a token is ASCII; base64 or percent-encode other text)")


def _carried(value: str) -> bool:
    """Whether HTTP/1.1 can send ``value`` in a header (Python's http.client sends Latin-1)."""
    return all(ord(char) <= 0xFF for char in value)


_PERCENT_HINT = ("a password (or user) holding '/', '?', '#' or '@' must be percent-encoded in the URL "
                 "(%2F, %3F, %23, %40); or give the credentials in --prometheus-headers "
                 "(Authorization: Basic ...)")


def parse_url(url: str, *, what: str = "--prometheus") -> tuple[str, str, str | None]:
    """``http(s)://[user:password@]host[:port][/prefix]`` → (the base URL without credentials,
    the same as shown in messages, a Basic ``Authorization`` value or None). ``what`` names
    where the URL was given (the flag, the variable, the kqplan.toml setting).

    No message quotes the URL's authority as given: a URL with credentials is shown without
    them (:func:`safe_url`), and a problem inside the authority is told in kqplan's words, never
    with its text (a password with an unencoded ``/``, ``?`` or ``#`` ends the authority early:
    its rest would read as a port, a path, a query)."""
    text = url.strip()
    shown = "the URL (not shown: it holds credentials)" if "@" in text else f"'{visible(text)}'"
    unreadable = KqplanError(f"{what}: {shown} is not a URL kqplan can read (its port is not a number, "
                             "or its host is not a name or an address)",
                             hint=_PERCENT_HINT if "@" in text else NO_URL_HINT)
    try:
        parts = urlsplit(text)
    except ValueError:
        raise unreadable from None
    if "@" in parts.path + parts.query + parts.fragment:
        raise KqplanError(f"{what}: the URL (not shown: it holds credentials) has an '@' after its host: "
                          "a password with an unencoded '/', '?' or '#' ends the host early",
                          hint=_PERCENT_HINT)
    try:
        port = parts.port
    except ValueError:
        raise unreadable from None
    host = parts.hostname
    if parts.scheme not in ("http", "https") or not host:
        raise KqplanError(f"{what}: '{safe_url(text)}' is not an http:// or https:// URL with a host",
                          hint=NO_URL_HINT)
    if parts.query or parts.fragment:  # never shown: a query may hold a key (?api_key=...)
        bare = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
        raise KqplanError(f"{what}: '{safe_url(bare)}' has a query or fragment (not shown)",
                          hint="give the server's base URL: kqplan adds /api/v1/query itself")
    netloc = (f"[{host}]" if ":" in host else host) + (f":{port}" if port is not None else "")
    base = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
    basic = None
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        basic = "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")
    return base, visible(base), basic


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def safe_url(url: str) -> str:
    """A URL for a message, without its credentials: everything between ``//`` and the last
    ``@`` is left out. Credentials end at an ``@`` — the last one, when a password holds an
    unencoded ``/``, ``?`` or ``#`` that ends the authority early — and what follows it holds
    none."""
    if "@" not in url:
        return visible(url)
    scheme = _SCHEME.match(url)
    return visible((scheme.group() if scheme else "") + url.rpartition("@")[2])


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
        if not _carried(value):
            raise KqplanError(f"{shown}:{number}: header {name} {_NOT_CARRIED}", hint=_NOT_CARRIED_HINT)
        if name.lower() in {n.lower() for n in headers}:
            raise KqplanError(f"{shown}:{number}: header {name} is given twice",
                              hint="keep one line per header")
        headers[name] = value
    return headers
