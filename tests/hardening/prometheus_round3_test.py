"""The Prometheus client, round three (issue 41): one ``{cluster}`` substitution for flags and
kqplan.toml, escaped for the quoting it stands in (a cluster name never adds a matcher, never
reads as a regex); no error quotes a URL's credentials; one deadline per HTTP exchange (a server
that answers a byte a second cannot hold a command past its ``--timeout``), the OAuth token
request included; a header value HTTP cannot carry is a located error, never its value.

The escaping is proven twice: in-process, with hypothesis-generated names, by reading each
substituted selector back with an independent PromQL string-literal reader (Go's
``strconv.Unquote`` rules, which Prometheus's parser applies); and by Prometheus itself —
``promtool test rules`` (Debian's ``prometheus`` package) evaluates every substituted selector
against series labelled with the generated names, in one run per batch of names (no server).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomli_w
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import kqplan.cli.throttled  # noqa: F401  (registers the command, whatever kqplan.cli.main lists)
from kqplan import deadline
from kqplan.cluster.failures import ConnectionFailed
from kqplan.cluster.oauth import TokenProvider
from kqplan.cluster.security import OAuthSettings
from kqplan.cluster.tls import Secret
from kqplan.core.errors import KqplanError
from kqplan.metrics.names import parse_selector, selector
from kqplan.metrics.prometheus import Prometheus
from kqplan.metrics.source import ENV_TOKEN, ENV_URL, PrometheusSource, endpoint
from kqplan.sandbox import Sandbox, SandboxConfig
from tests.helpers import REPO, Result, run_cli, write_manifest
from tests.metrics.server import Answer, Request, matrix, serve, vector

SNAPSHOT = REPO / "examples" / "payments" / "snapshot.json"  # a cluster that sets client quotas
INJECTION = "x',kafka_cluster!='"
"""The issue's name: in a single-quoted selector, escaped for double quotes, it adds a matcher."""
HOSTILE = (INJECTION, 'a"b', "a\\b", "pay.*", "a|b", "(prod)", "x`y", "tab\there", "🚀-prod",
           "\u202eevil", "a'b\"c`d\\e", "{cluster}", "$1", "[a-z]+")


# -- a PromQL reader of our own, to check what kqplan sends ----------------------------------

_GO_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\"}
_LITERAL = r""""(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`[^`]*`"""
_MATCHER = re.compile(rf"\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*({_LITERAL})\s*")
_RE2_META = set("\\.+*?()|[]{}^$")


def go_unquote(literal: str) -> str:
    """A PromQL string literal's value, by Go's ``strconv.Unquote`` rules (Prometheus's own)."""
    quote, body = literal[0], literal[1:-1]
    assert len(literal) >= 2, literal
    assert literal[-1] == quote, literal
    if quote == "`":
        assert "`" not in body, literal
        return body
    assert "\n" not in body, literal
    out, i = [], 0
    while i < len(body):
        c = body[i]
        assert c != quote, f"an unescaped {quote} in {literal!r}"
        if c != "\\":
            out.append(c)
            i += 1
            continue
        e = body[i + 1]
        if e in _GO_ESCAPES:
            out.append(_GO_ESCAPES[e])
            i += 2
        elif e in "'\"":
            assert e == quote, f"\\{e} in a {quote}-quoted string (Go refuses it): {literal!r}"
            out.append(e)
            i += 2
        elif e in "xuU":
            n = {"x": 2, "u": 4, "U": 8}[e]
            digits = body[i + 2:i + 2 + n]
            assert re.fullmatch(f"[0-9a-fA-F]{{{n}}}", digits), literal
            assert e != "x" or int(digits, 16) < 0x80, literal  # \xHH is a byte: ASCII alone is a character
            out.append(chr(int(digits, 16)))
            i += 2 + n
        else:
            raise AssertionError(f"an escape Go refuses, \\{e}, in {literal!r}")
    return "".join(out)


def matchers_of(text: str) -> list[tuple[str, str, str]]:
    """The (label, operator, value) of the first ``{…}`` in ``text`` (a selector or a query)."""
    position = text.index("{") + 1
    found = []
    while not text[position:].lstrip().startswith("}"):
        match = _MATCHER.match(text, position)
        assert match is not None, f"not a matcher at {text[position:]!r} in {text!r}"
        found.append((match.group(1), match.group(2), go_unquote(match.group(3))))
        position = match.end()
        if text[position:].startswith(","):
            position += 1
    return found


def quote_meta(text: str) -> str:
    """Go's ``regexp.QuoteMeta``: what matches ``text`` alone in RE2."""
    return "".join("\\" + c if c in _RE2_META else c for c in text)


# -- 1. one substitution path for flags and kqplan.toml ---------------------------------------

def _recorder(request: Request) -> Answer:
    return matrix() if request.path == "/api/v1/query_range" else vector()


@pytest.fixture(scope="module")
def box() -> Iterator[Sandbox]:
    with Sandbox.start(SandboxConfig(port=0)) as sandbox:
        yield sandbox


def _inventory(root: Path, name: str, bootstrap: str, metrics: dict[str, str] | None = None) -> Path:
    write_manifest(root / "m" / "quotas.yaml", "entities:\n  - user: alice\n"
                   "    quotas: {producer_byte_rate: 40KiB}\n")
    doc: dict[str, object] = {"clusters": {name: {"bootstrap-server": bootstrap, "manifests": ["m"]}}}
    if metrics:
        doc["metrics"] = metrics
    (root / "kqplan.toml").write_text(tomli_w.dumps(doc), encoding="utf-8")
    return root / "kqplan.toml"


COMMANDS = {
    "throttled": ("throttled",),
    "plan --usage-from-metrics": ("plan", "--usage-from-metrics", "--since", "5m", "--step", "1m"),
    "apply --verify-enforcement": ("apply", "--auto-approve", "--verify-enforcement=1m"),
    "fleet usage": ("fleet", "usage", "--since", "5m"),
}


def _first_query(config: Path, command: tuple[str, ...], url: str, *extra: str,
                 served: list[Request]) -> str:
    out = config.parent / "out"
    args = (*command, "--out", out) if command[0] == "fleet" else command
    result = run_cli("--config", config, *args, "--cluster", "prod", *(("--prometheus", url) if url else ()),
                     *extra)
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    assert served, result.stdout + result.stderr
    return served[0].params["query"]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_flag_selector_gets_the_cluster_as_the_setting_does(box, tmp_path, command):
    chosen = '{kafka_cluster="{cluster}"}'
    with serve(_recorder) as served:
        config = _inventory(tmp_path / "flag", "prod", box.bootstrap)
        by_flag = _first_query(config, COMMANDS[command], served.url, "--selector", chosen,
                               served=served.requests)
    with serve(_recorder) as served:
        config = _inventory(tmp_path / "toml", "prod", box.bootstrap,
                            {"prometheus": served.url, "selector": chosen})
        by_setting = _first_query(config, COMMANDS[command], "", served=served.requests)
    assert 'kafka_cluster="prod"' in by_flag, by_flag
    assert "{cluster}" not in by_flag
    assert by_flag == by_setting


@pytest.mark.parametrize("command", ["throttled", "plan --usage-from-metrics", "apply --verify-enforcement"])
def test_a_placeholder_without_a_cluster_is_refused_naming_the_flag(box, tmp_path, command):
    manifests = write_manifest(tmp_path / "m" / "quotas.yaml", "entities:\n  - user: alice\n"
                               "    quotas: {producer_byte_rate: 40KiB}\n").parent
    with serve(_recorder) as served:
        result = run_cli(*COMMANDS[command], manifests, "--bootstrap-server", box.bootstrap,
                         "--prometheus", served.url, "--selector", '{kafka_cluster="{cluster}"}')
    assert result.exit_code == 1, result.stdout + result.stderr
    assert ("Error: --selector '{kafka_cluster=\"{cluster}\"}': its {cluster} names an inventory "
            "cluster, and no --cluster says which") in result.stderr
    assert served.requests == []


# -- 2. the name is escaped for where it stands ----------------------------------------------

TEMPLATES = ('{kafka_cluster="{cluster}"}', "{kafka_cluster='{cluster}'}", "{kafka_cluster=`{cluster}`}",
             '{kafka_cluster=~"{cluster}"}', "{kafka_cluster=~'{cluster}'}", "{kafka_cluster=~`{cluster}`}",
             "{kafka_cluster!='{cluster}'}", '{env="prod" , kafka_cluster !~ "{cluster}", x=`y`}',
             '{kafka_cluster=~"{cluster}|other-{cluster}"}')
PROMTOOL_TEMPLATES = (*TEMPLATES[:7], '{kafka_cluster!~"{cluster}"}')
"""The templates Prometheus checks: one matcher each, on the label the series carry."""
NAMES = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)
CLUSTER_NAMES = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12)
"""What an inventory may name a cluster (kqplan.toml refuses control characters)."""


def _refused_in_backticks(template: str, name: str) -> bool:
    """A raw string cannot escape anything: a backtick or a control character there is refused."""
    return "`{cluster}" in template and any(c == "`" or unicodedata.category(c) == "Cc" for c in name)


def _substituted(template: str, name: str) -> str:
    filled = PrometheusSource(selector=template).for_cluster(name).selector
    assert filled is not None
    return filled


@settings(max_examples=400, deadline=None)
@given(template=st.sampled_from(TEMPLATES), name=NAMES)
@example(template="{kafka_cluster='{cluster}'}", name=INJECTION)
@example(template='{kafka_cluster=~"{cluster}"}', name="pay.*")
def test_a_substituted_name_matches_exactly_itself(template, name):
    if _refused_in_backticks(template, name):
        with pytest.raises(KqplanError, match="a backtick-quoted PromQL string cannot hold"):
            _substituted(template, name)
        return
    filled = _substituted(template, name)
    parse_selector(filled)  # kqplan's own check passes
    expected, found = matchers_of(template), matchers_of(filled)
    assert [(label, op) for label, op, _ in found] == [(label, op) for label, op, _ in expected], filled
    for (_, op, value), (_, _, was) in zip(found, expected, strict=True):
        if op in ("=", "!="):
            assert value == was.replace("{cluster}", name), filled
        else:  # the name regex-quoted: a regex that matches the name alone
            assert value == was.replace("{cluster}", quote_meta(name)), filled
            assert re.fullmatch(quote_meta(name), name)


@pytest.mark.parametrize(("template", "column"), [
    ("{kafka_cluster={cluster}}", 16), ("{{cluster}=\"prod\"}", 2), ('{a="b"}{cluster}', 8),
])
def test_a_placeholder_outside_a_quoted_value_is_a_located_error(template, column):
    with pytest.raises(KqplanError) as raised:
        _substituted(template, "prod")
    assert raised.value.message == (f"--selector '{template}': {{cluster}} at column {column} is outside "
                                     "a quoted label value")
    assert '{kafka_cluster="{cluster}"}' in (raised.value.hint or "")


def _promtool_case(names: list[str]) -> dict[str, object]:
    decoys = [d for d in ("decoy", "x", "prod") if d not in names]
    every = names + decoys

    def series(value: str) -> str:
        return "up{kafka_cluster=" + _go_quote(value) + "}"

    tests = []
    for name in names:
        for template in PROMTOOL_TEMPLATES:
            if _refused_in_backticks(template, name):
                continue
            filled = _substituted(template, name)
            negated = "!" in template
            expected = [v for v in every if (v != name) == negated]
            expr = selector("up", parse_selector(filled)[1])
            tests.append({"expr": expr, "eval_time": "0m",
                          "exp_samples": [{"labels": series(v), "value": 1} for v in expected]})
    return {"rule_files": [], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": [{"series": series(v), "values": "1"} for v in every],
        "promql_expr_test": tests}]}


def _go_quote(value: str) -> str:
    """A Go double-quoted string literal (independent of kqplan's escaping)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@pytest.mark.skipif(shutil.which("promtool") is None,
                    reason="promtool is not installed (apt-get install prometheus)")
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(names=st.lists(CLUSTER_NAMES, min_size=1, max_size=10, unique=True))
@example(names=[n for n in HOSTILE if n.isprintable()])
def test_prometheus_reads_each_substituted_selector_as_exactly_the_name(names):
    with tempfile.TemporaryDirectory() as workdir:
        case = Path(workdir) / "test.yml"
        case.write_text(yaml.safe_dump(_promtool_case(names), allow_unicode=False, width=float("inf")))
        proc = subprocess.run(["promtool", "test", "rules", str(case)], capture_output=True, text=True,
                              timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_hostile_cluster_name_adds_no_matcher_to_the_query(box, tmp_path):
    """The issue's case end to end: the name from the inventory, the selector single-quoted in
    kqplan.toml; Prometheus is asked for that one cluster."""
    with serve(_recorder) as served:
        config = _inventory(tmp_path, INJECTION, box.bootstrap,
                            {"prometheus": served.url, "selector": "{kafka_cluster='{cluster}'}"})
        result = run_cli("--config", config, "throttled", "--cluster", INJECTION)
    assert result.exit_code == 0, result.stderr
    for asked in served.requests:
        assert matchers_of(asked.params["query"])[-1] == ("kafka_cluster", "=", INJECTION)


# -- 3. no error quotes a URL's credentials --------------------------------------------------

SEGMENTS = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789"), min_size=3, max_size=8).map(
    lambda s: "Zq" + s)
PASSWORDS = st.tuples(SEGMENTS, st.lists(st.tuples(st.sampled_from("#?/@:"), SEGMENTS), min_size=1,
                                         max_size=3)).filter(
    lambda p: any(sep in "#?/" for sep, _ in p[1]))


def _url(password: tuple[str, list[tuple[str, str]]]) -> tuple[str, list[str]]:
    first, rest = password
    text = first + "".join(sep + segment for sep, segment in rest)
    return f"http://opsZqUSER:{text}@127.0.0.1:9", ["opsZqUSER", first, *(s for _, s in rest)]


def _clean(result: Result) -> None:
    """A product's error: no traceback, no internal error."""
    told = result.stdout + result.stderr
    assert "Traceback" not in told, told
    assert "internal error" not in told, told


def _no_secret(result: Result, secrets: list[str]) -> None:
    told = result.stdout + result.stderr
    assert result.exit_code == 1, told
    _clean(result)
    for secret in secrets:
        assert secret not in told, told
    assert "percent-encoded" in told, told


@settings(max_examples=40, deadline=None)
@given(password=PASSWORDS)
@example(password=("hunter2", [("#", "Zqx")]))
def test_a_password_in_the_flag_is_never_printed(password):
    url, secrets = _url(password)
    _no_secret(run_cli("throttled", "--state", SNAPSHOT, "--prometheus", url), secrets)


@settings(max_examples=30, deadline=None)
@given(key=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=6, max_size=20),
       form=st.sampled_from(["/?api_key={}", "?token={}", "/prom?x=1&key={}", "/#{}"]))
def test_a_key_in_the_query_string_is_never_printed(key, form):
    """A review of issue 41: "'http://h/?api_key=SECRET' has a query or fragment" printed the key."""
    url = "http://prom.example:9090" + form.format(key)
    result = run_cli("throttled", "--state", SNAPSHOT, "--prometheus", url)
    assert result.exit_code == 1
    assert "has a query or fragment (not shown)" in result.stderr
    assert key not in result.stdout + result.stderr


@settings(max_examples=40, deadline=None)
@given(password=PASSWORDS)
def test_a_password_in_the_environment_is_never_printed(password):
    url, secrets = _url(password)
    with _environ(**{ENV_URL: url}):
        result = run_cli("throttled", "--state", SNAPSHOT)
    _no_secret(result, secrets)
    assert f"${ENV_URL}" in result.stderr


@settings(max_examples=40, deadline=None)
@given(password=PASSWORDS)
def test_a_password_in_kqplan_toml_is_never_printed(password):
    url, secrets = _url(password)
    with tempfile.TemporaryDirectory() as workdir:
        config = Path(workdir) / "kqplan.toml"
        config.write_text(tomli_w.dumps({"metrics": {"prometheus": url},
                                         "clusters": {"prod": {"snapshot": str(SNAPSHOT)}}}))
        result = run_cli("--config", config, "throttled", "--cluster", "prod")
    _no_secret(result, secrets)
    assert "kqplan.toml" in result.stderr


@contextlib.contextmanager
def _environ(**values: str) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# -- 4. one deadline per exchange ------------------------------------------------------------

@contextlib.contextmanager
def dripping(body: bytes, *, headers_too: bool = False) -> Iterator[str]:
    """An HTTP server (a thread) that answers every request one byte a second: the body only,
    or the status line and headers too. Yields its URL."""
    answer = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
              + f"Content-Length: {len(body)}\r\n\r\n".encode())
    stop = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    workers: list[threading.Thread] = []

    def drip(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            with contextlib.suppress(OSError):
                conn.recv(65536)  # the request (whatever of it came first)
                if not headers_too:
                    conn.sendall(answer)
                for byte in (answer if headers_too else b"") + body:
                    if stop.wait(1.0):
                        return
                    conn.sendall(bytes([byte]))

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            worker = threading.Thread(target=drip, args=(conn,), daemon=True)
            workers.append(worker)
            worker.start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        acceptor.join(5)
        for worker in workers:
            worker.join(5)
        listener.close()


SLOW_BODY = b'{"status": "success", "data": {"resultType": "matrix", "result": []}}'


def test_a_prometheus_answering_a_byte_a_second_ends_at_the_commands_timeout():
    with dripping(SLOW_BODY) as url:
        started = time.monotonic()
        result = run_cli("throttled", "--state", SNAPSHOT, "--prometheus", url, "--timeout", "2s")
        took = time.monotonic() - started
    assert result.exit_code == 1, result.stdout + result.stderr
    assert took < 2 + 1.5, took
    assert f"Error: Prometheus at {url} did not answer before the command's --timeout 2 s ran out" \
        in result.stderr


def test_headers_a_byte_a_second_end_at_the_requests_own_bound():
    with dripping(SLOW_BODY, headers_too=True) as url:
        prom = Prometheus(endpoint(PrometheusSource(url), env={}), request_timeout=1.5)
        started = time.monotonic()
        with pytest.raises(KqplanError, match=r"did not answer within 1\.5 s \(the limit of one request\)"):
            prom.query("up", 0)
        took = time.monotonic() - started
    assert took < 1.5 + 1.0, took


def test_an_oauth_token_endpoint_answering_a_byte_a_second_ends_at_the_deadline():
    settings_ = OAuthSettings(client_id="kqplan", client_secret=Secret("s3cret-do-not-print"))
    with dripping(b'{"access_token": "t", "expires_in": 300}') as url:
        provider = TokenProvider(OAuthSettings(f"{url}/token", settings_.client_id, settings_.client_secret),
                                 30.0)
        deadline.start(1.5)
        started = time.monotonic()
        try:
            with pytest.raises(ConnectionFailed) as raised:
                provider.token()
        finally:
            deadline.start(None)
        took = time.monotonic() - started
    assert took < 1.5 + 1.0, took
    assert raised.value.message == (f"the OAuth token endpoint {url}/token did not answer before the "
                                    "command's --timeout 1.5 s ran out")
    assert "s3cret" not in str(raised.value)


# -- 5. header values HTTP cannot carry ------------------------------------------------------

WIDE = st.text(st.characters(min_codepoint=0x100,
                             blacklist_categories=("Cs", "Cc", "Cf", "Co", "Cn", "Zl", "Zp", "Zs")),
               min_size=1, max_size=4)


@settings(max_examples=30, deadline=None)
@given(before=st.text("abcXYZ0189-._", max_size=6), wide=WIDE)
def test_a_header_value_http_cannot_carry_names_the_line_not_the_value(before, wide):
    value = f"{before}{wide}tail"
    with tempfile.TemporaryDirectory() as workdir:
        headers = Path(workdir) / "prometheus.headers"
        headers.write_text(f"X-Scope-OrgID: team-a\nAuthorization: Bearer {value}\n", encoding="utf-8")
        result = run_cli("throttled", "--state", SNAPSHOT, "--prometheus", "http://127.0.0.1:9",
                         "--prometheus-headers", headers)
    assert result.exit_code == 1, result.stdout + result.stderr
    _clean(result)
    assert (f"Error: {headers}:2: header Authorization holds a character an HTTP header cannot carry "
            "(its value is not shown)") in result.stderr
    assert wide not in result.stderr


@settings(max_examples=30, deadline=None)
@given(wide=WIDE)
def test_a_token_http_cannot_carry_names_the_variable_not_the_value(wide):
    with _environ(**{ENV_TOKEN: f"t0ken{wide}"}):
        result = run_cli("throttled", "--state", SNAPSHOT, "--prometheus", "http://127.0.0.1:9")
    assert result.exit_code == 1, result.stdout + result.stderr
    _clean(result)
    assert (f"Error: ${ENV_TOKEN} holds a character an HTTP header cannot carry (its value is not "
            "shown)") in result.stderr
    assert wide not in result.stderr


# -- 6. dead code ----------------------------------------------------------------------------

def test_no_unused_default_since():
    from kqplan.commands import forecast, throttled

    assert not hasattr(throttled, "DEFAULT_SINCE")
    assert not hasattr(forecast, "DEFAULT_SINCE")
