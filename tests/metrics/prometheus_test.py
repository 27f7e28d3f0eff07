"""A Prometheus that is down, slow, answers garbage or an HTTP error: each is a clear error naming
the server (exit 1), never a traceback and never an empty "nobody throttled". Served by a tiny
HTTP server on a loopback port (tests/metrics/server.py)."""

from __future__ import annotations

import json

import pytest

import kqplan.cli.throttled  # noqa: F401  (registers the command, whatever kqplan.cli.main lists)
from kqplan.core.errors import KqplanError
from kqplan.metrics.prometheus import Prometheus
from kqplan.metrics.source import PrometheusSource, endpoint
from tests.helpers import REPO, run_cli
from tests.kafka.broker import free_ports
from tests.metrics.server import Answer, Request, Scripted, serve, vector

SNAPSHOT = REPO / "examples" / "payments" / "snapshot.json"  # a cluster that sets client quotas


def throttled(url: str, *args: str) -> tuple[int, str, str]:
    result = run_cli("throttled", "--state", SNAPSHOT, "--prometheus", url, *args)
    return result.exit_code, result.stdout, result.stderr


def refused(url: str, *args: str) -> str:
    """The command fails as a product: exit 1, one located error, nothing on stdout."""
    code, out, err = throttled(url, *args)
    assert code == 1, (out, err)
    assert out == "", out
    assert "Traceback" not in err, err
    assert "internal error" not in err, err
    assert err.startswith("Error: "), err
    return err


def test_prometheus_down():
    (port,) = free_ports(1)
    err = refused(f"http://127.0.0.1:{port}")
    assert f"cannot reach Prometheus at http://127.0.0.1:{port}: Connection refused" in err
    assert "= help: is Prometheus running there? check --prometheus URL" in err


def test_a_host_that_does_not_resolve():
    err = refused("http://prometheus.invalid:9090")
    assert "http://prometheus.invalid:9090: the host name does not resolve" in err


def test_prometheus_slow_is_bounded_by_the_commands_timeout():
    with serve(lambda r: Answer(delay=3.0)) as served:
        err = refused(served.url, "--timeout", "1s")
    assert f"Prometheus at {served.url} did not answer before the command's --timeout 1 s ran out" in err
    assert "= help: narrow --selector or --since" in err


def test_each_request_has_its_own_bound():
    with serve(lambda r: Answer(delay=2.0)) as served:
        prom = Prometheus(endpoint(PrometheusSource(served.url)), request_timeout=0.5)
        with pytest.raises(KqplanError, match=r"did not answer within 500 ms \(the limit of one request\)"):
            prom.query("up", 0)
    assert served.requests[0].params["timeout"] == "0.5"  # Prometheus stops the query too


def test_garbage_that_is_not_json():
    page = b"<html><body>Please log in</body></html>"
    with serve(lambda r: Answer(200, page, "text/html")) as served:
        err = refused(served.url)
    assert "answered something that is not JSON (HTTP 200, starting '<html><body>Please log in" in err


@pytest.mark.parametrize(("doc", "what"), [
    ({"hello": "world"}, 'no "status" of success or error'),
    ({"status": "success"}, 'no "data"'),
    ({"status": "success", "data": {"resultType": "vector", "result": []}}, "data is not a matrix result"),
    ({"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {"a": 1}, "values": []}]}},
     "data.result[0].metric is not a map of label names to strings"),
    ({"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": [[1, 2]]}]}},
     "data.result[0].values[0] holds no number as a string"),
    ([1, 2, 3], 'no "status" of success or error'),
])
def test_json_of_another_shape(doc, what):
    with serve(lambda r: Answer.json(doc)) as served:
        err = refused(served.url)
    assert f"Prometheus at {served.url} answered JSON that is not a Prometheus API answer: {what}" in err
    assert "query: max_over_time(kafka_server_quota_throttle_time" in err


def test_an_http_error_with_prometheus_own_reason():
    error = {"status": "error", "errorType": "bad_data", "error": 'parse error: unexpected "}"'}
    with serve(lambda r: Answer.json(error, 400)) as served:
        err = refused(served.url)
    said = 'bad_data: parse error: unexpected "}"'
    assert f"Prometheus at {served.url} answered HTTP 400 Bad Request: {said}" in err
    assert "check --selector and the metric names (--metric)" in err
    assert len(served.requests) == 1  # a refused query is not asked again


def test_a_server_error_is_asked_again_a_bounded_number_of_times():
    with serve(lambda r: Answer(503, b"overloaded", "text/plain")) as served:
        err = refused(served.url)
    assert f"Prometheus at {served.url} answered HTTP 503 Service Unavailable" in err
    assert len(served.requests) == 3


def test_a_passing_overload_is_ridden_out():
    calls: list[Request] = []

    def flaky(request: Request) -> Answer:
        calls.append(request)
        return Answer(503) if len(calls) <= 2 else Scripted()(request)

    with serve(flaky) as served:
        code, _out, err = throttled(served.url)
    assert code == 1
    assert "has no throttle-time series" in err


def test_a_redirect_is_not_followed_with_the_credentials(monkeypatch):
    monkeypatch.setenv("KQPLAN_PROMETHEUS_TOKEN", "s3cret-token")
    with serve(lambda r: Answer(302, headers=(("Location", "http://user:pw@sso.example/login"),))) as served:
        err = refused(served.url)
    assert "answered HTTP 302 Found (redirected to http://sso.example/login)" in err
    assert [r.path for r in served.requests] == ["/api/v1/query_range"]
    assert "s3cret" not in err
    assert "pw@" not in err


def test_unauthorized_says_how_to_give_credentials_and_never_echoes_them(monkeypatch):
    monkeypatch.setenv("KQPLAN_PROMETHEUS_TOKEN", "s3cret-token")
    with serve(lambda r: Answer(401, b"no", "text/plain")) as served:
        err = refused(served.url)
    assert served.requests[0].headers["authorization"] == "Bearer s3cret-token"
    assert "HTTP 401 Unauthorized" in err
    assert "KQPLAN_PROMETHEUS_TOKEN" in err
    assert "s3cret" not in err


def test_an_answer_over_the_bound():
    with serve(lambda r: vector(*[({"user": f"u{i}"}, 1.0) for i in range(50)])) as served:
        prom = Prometheus(endpoint(PrometheusSource(served.url)), limit=1000)
        with pytest.raises(KqplanError, match="answered more than 0 MiB"):
            prom.query("up", 0)


def test_errors_are_json_with_format_json():
    (port,) = free_ports(1)
    code, out, err = throttled(f"http://127.0.0.1:{port}", "--format", "json")
    assert code == 1
    assert out == ""
    error = json.loads(err)["error"]
    assert error["message"].startswith(f"cannot reach Prometheus at http://127.0.0.1:{port}")


def test_nothing_found_on_a_cluster_with_quotas_is_an_error_not_nobody_throttled():
    with serve(Scripted()) as served:
        err = refused(served.url, "--selector", '{kafka_cluster="prod"}')
    assert ("has no throttle-time series in the last 15 min (e.g. kafka_server_quota_throttle_time"
            '{resource="Produce",kafka_cluster="prod"}), though the cluster sets client quotas') in err


def test_url_credentials_become_basic_auth_and_are_never_shown():
    with serve(lambda r: Answer(500, b"{}")) as served:
        url = served.url.replace("http://", "http://ops:pa%3Ass@")
        err = refused(url)
    assert served.requests[0].headers["authorization"] == "Basic b3BzOnBhOnNz"  # ops:pa:ss
    assert f"Prometheus at {served.url} answered HTTP 500" in err
    assert "pa%3Ass" not in err


def test_a_headers_file(tmp_path):
    headers = tmp_path / "headers"
    headers.write_text("# tenant and token\nX-Scope-OrgID: team-a\nAuthorization: Bearer t0ken\n")
    with serve(Scripted(count=3)) as served:
        code, _out, err = throttled(served.url, "--prometheus-headers", str(headers))
    assert code == 0, err
    sent = served.requests[0].headers
    assert sent["x-scope-orgid"] == "team-a"
    assert sent["authorization"] == "Bearer t0ken"


def test_a_bad_headers_file_names_the_line_not_the_value(tmp_path):
    headers = tmp_path / "headers"
    headers.write_text("X-Scope-OrgID: team-a\nBearer t0ken-without-a-name\n")
    err = refused("http://127.0.0.1:9", "--prometheus-headers", str(headers))
    assert f"{headers}:2: not a 'Name: value' header line" in err
    assert "t0ken" not in err


@pytest.mark.parametrize(("args", "expected"), [
    (("--selector", "{kafka_cluster=prod}"), "--selector: '{kafka_cluster=prod}': expected label=\"value\""),
    (("--selector", "up{a=\"b\"}"), "names a metric; give only label matchers"),
    (("--metric", "throttle.nope=x"), "--metric 'throttle.nope=x': unknown name 'throttle.nope'"),
    (("--metric", "label.user=not a label"), "'not a label' is not a Prometheus label name"),
    (("--since", "soon"), "--since: 'soon' is not a duration"),
    (("--format", "yaml"), "--format must be one of text | markdown | json, not 'yaml'"),
])
def test_bad_options_are_located_errors(args, expected):
    err = refused("http://127.0.0.1:9", *args)
    assert expected in err


@pytest.mark.parametrize("url", ["ftp://prometheus:9090", "prometheus:9090", "http://:9090",
                                 "http://prometheus:9090/?x=1"])
def test_a_url_that_is_no_prometheus_base_url(url):
    err = refused(url)
    assert "--prometheus:" in err


def test_no_url_at_all(monkeypatch):
    monkeypatch.delenv("KQPLAN_PROMETHEUS_URL", raising=False)
    result = run_cli("throttled", "--state", SNAPSHOT)
    assert result.exit_code == 1
    assert "Error: no Prometheus to ask" in result.stderr
    assert "KQPLAN_PROMETHEUS_URL" in result.stderr
