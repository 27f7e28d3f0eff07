"""``plan --usage-from-metrics`` and ``apply --verify-enforcement`` against a Prometheus answering
scripted series (a tiny local HTTP server): the forecast per bucket (merged pairs, a kept bucket
Kafka throttles, a split bucket "split unknown"), ``--fail-on-throttle``, and a Prometheus that is
down, answers garbage or an HTTP error, or has no series: a clear error, exit 1, nothing changed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kqplan.core.entity import Entity
from kqplan.sandbox import Sandbox, SandboxConfig
from kqplan.snapshot.file import write_snapshot
from tests.helpers import run_cli, write_manifest
from tests.kafka.broker import free_ports
from tests.metrics.server import Answer, Request, matrix, serve, vector

P = "producer_byte_rate"
T0 = 1_700_000_000.0
BEFORE = {Entity.user_client(None, None): {P: 104857600.0}, Entity.user("gina"): {P: 8192.0},
          Entity.user("bob"): {P: 100000.0}}
MANIFEST = """\
ownership:
  prune: true
  scope:
    - {user: "<default>", client-id: "<default>"}
entities:
  - user: alice
    quotas: {producer_byte_rate: 40KiB}
  - user: gina
    quotas: {producer_byte_rate: 8KiB}
  - user: bob
    quotas: {producer_byte_rate: 100000}
  - user: bob
    client-id: b1
    quotas: {producer_byte_rate: 10000}
"""


def _points(value: float, n: int = 5) -> list[tuple[float, float]]:
    return [(T0 + i, value) for i in range(n)]


def script(request: Request) -> Answer:
    """Usage: alice's two pairs (25 kB/s each), gina's bucket (held at her quota, and throttled),
    bob's bucket (60 kB/s, all his client-ids together); only gina throttled."""
    query = request.params.get("query", "")
    if request.path == "/api/v1/query_range" and "avg_over_time" in query and 'resource="Produce"' in query:
        return matrix(({"user": "alice", "client_id": "a1"}, _points(25000)),
                      ({"user": "alice", "client_id": "a2"}, _points(25000)),
                      ({"user": "gina"}, _points(8100)), ({"user": "bob"}, _points(60000)))
    if request.path == "/api/v1/query_range" and "throttle_time" in query and 'resource="Produce"' in query:
        return matrix(({"user": "gina"}, _points(900)))
    if request.path == "/api/v1/query_range":
        return matrix()
    return vector()


@pytest.fixture
def files(tmp_path):
    snapshot = tmp_path / "snapshot.json"
    write_snapshot(snapshot, BEFORE, "test-cluster")
    return snapshot, write_manifest(tmp_path / "m" / "quotas.yaml", MANIFEST).parent


def _plan(files, url: str, *extra: str):
    snapshot, manifests = files
    return run_cli("plan", manifests, "--state", snapshot, "--usage-from-metrics", "--prometheus", url,
                   "--since", "5m", "--step", "1m", *extra)


def test_the_forecast_per_bucket(files):
    with serve(script) as served:
        result = _plan(files, served.url, "--format", "json")
    assert result.exit_code == 0, result.stderr
    usage = result.json["usage"]
    found = {(b["bucket"], b["key"]): b for b in usage["throttled"]}
    assert set(found) == {("{user=alice}", P), ("{user=gina}", P)}
    assert found["{user=alice}", P]["newly"] is True  # two pairs merged: 50 kB/s over 40 KiB/s
    assert found["{user=alice}", P]["usage"] == 50000.0
    assert found["{user=gina}", P]["newly"] is False  # throttled in the window, quota kept
    (split,) = usage["split_unknown"]
    assert (split["bucket"], split["usage"], split["usage_max"], split["quota"]) == (
        "{user=bob, client-id=b1}", None, 60000.0, 10000.0)
    assert (usage["would_throttle"], usage["newly"]) == (2, 1)


def test_the_text_and_markdown_forms(files):
    with serve(script) as served:
        text = _plan(files, served.url)
        markdown = _plan(files, served.url, "--format", "markdown")
    assert text.exit_code == 0, text.stderr
    assert "Would throttle: 2 buckets (1 newly); 1 split unknown." in text.stdout
    assert "+ {user=alice} producer_byte_rate:" in text.stdout
    assert "? {user=bob, client-id=b1} producer_byte_rate: up to" in text.stdout
    assert "#### Would throttle: 2 buckets (1 newly); 1 split unknown." in markdown.stdout
    assert "| newly throttled | `{user=alice}` |" in markdown.stdout
    assert "| split unknown | `{user=bob, client-id=b1}` |" in markdown.stdout


def test_fail_on_throttle(files):
    with serve(script) as served:
        result = _plan(files, served.url, "--fail-on-throttle")
    assert result.exit_code == 1
    assert "would newly throttle 1 bucket (--fail-on-throttle)" in result.stderr
    assert "Would throttle: 2 buckets (1 newly)" in result.stdout


@pytest.mark.parametrize(("answer", "said"), [
    (Answer(200, b"<html>not prometheus</html>", "text/html"), "Prometheus"),
    (Answer(500, b"boom"), "500"),
    (Answer.json({"status": "success", "data": {"resultType": "matrix", "result": []}}), "no usage series"),
])
def test_a_prometheus_that_cannot_answer_is_an_error(files, answer, said):
    with serve(lambda _: answer) as served:
        result = _plan(files, served.url)
    assert result.exit_code == 1
    assert said in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert "Would throttle" not in result.stdout  # never an empty "nobody throttled"


def test_a_prometheus_that_is_down_is_an_error(files):
    result = _plan(files, f"http://127.0.0.1:{free_ports(1)[0]}")
    assert result.exit_code == 1
    assert "cannot reach Prometheus" in result.stderr
    assert "Would throttle" not in result.stdout


def test_usage_files_and_metrics_together_are_refused(files, tmp_path):
    snapshot, manifests = files
    result = run_cli("plan", manifests, "--state", snapshot, "--usage", tmp_path, "--usage-from-metrics")
    assert result.exit_code == 1
    assert "--usage and --usage-from-metrics both given" in result.stderr


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    with Sandbox.start(SandboxConfig(port=0)) as sb:
        yield sb


def test_verify_enforcement_without_prometheus_sends_nothing(sandbox, tmp_path):
    manifests = write_manifest(tmp_path / "m" / "quotas.yaml", "entities:\n  - user: alice\n"
                               "    quotas: {producer_byte_rate: 40KiB}\n").parent
    result = run_cli("apply", manifests, "--bootstrap-server", sandbox.bootstrap, "--auto-approve",
                     "--verify-enforcement=1m", "--prometheus", f"http://127.0.0.1:{free_ports(1)[0]}")
    assert result.exit_code == 1
    assert "cannot reach Prometheus" in result.stderr
    after = run_cli("plan", manifests, "--bootstrap-server", sandbox.bootstrap, "--detailed-exitcode")
    assert after.exit_code == 2  # still to add: nothing was sent


def test_the_json_with_its_forecast_is_a_plan_v1_document(files):
    import json
    from pathlib import Path

    import jsonschema

    schema = json.loads((Path(__file__).parents[2] / "schemas" / "plan-v1.json").read_text())
    with serve(script) as served:
        result = _plan(files, served.url, "--format", "json")
    assert result.exit_code == 0, result.stderr
    jsonschema.Draft202012Validator(schema).validate(result.json)
    broken = dict(result.json, usage={**result.json["usage"], "guessed": True})
    assert not jsonschema.Draft202012Validator(schema).is_valid(broken)


def test_fail_on_throttle_without_usage_is_refused(files):
    snapshot, manifests = files
    result = run_cli("plan", manifests, "--state", snapshot, "--fail-on-throttle")
    assert result.exit_code == 1
    assert "--fail-on-throttle needs usage" in result.stderr


def test_the_window_may_follow_with_a_space_and_is_judged_against_kafkas_quota_window(tmp_path):
    """5 s: shorter than the 12 s a broker with Kafka's defaults needs before its usage readings
    hold only what came after the change (the sandbox reports Kafka's defaults)."""
    from tests.metrics.server import steady

    manifests = write_manifest(tmp_path / "m" / "quotas.yaml", "entities:\n  - user: alice\n"
                               "    quotas: {producer_byte_rate: 40KiB}\n").parent
    with Sandbox.start(SandboxConfig(port=0, seed={Entity.user("alice"): {P: 100_000.0}})) as sandbox, \
            serve(steady({"user": "alice"}, 50_000.0)) as served:
        result = run_cli("apply", manifests, "--bootstrap-server", sandbox.bootstrap, "--auto-approve",
                         "--verify-enforcement", "5s", "--prometheus", served.url)
    assert result.exit_code == 1
    assert ("--verify-enforcement 5s: the brokers' usage readings hold only records after a change 12 s "
            "after it") in result.stderr
    assert "give more than 18s" in result.stderr


def test_long_lists_are_capped_in_text_and_markdown_not_in_json():
    from kqplan.render.forecast import ForecastBucket, ForecastView, render_markdown, render_text, to_json

    many = tuple(ForecastBucket(f"{{user=u{i}}}", P, 1, None, 50000.0, 1000.0) for i in range(65))
    view = ForecastView("c", "usage.csv", 1, (), many, (), True)
    text, markdown = render_text(view), render_markdown(view)
    assert text.count("    ? {user=u") == 20
    assert "… and 45 more (--format json lists them all)" in text
    assert markdown.count("| split unknown |") == 60
    assert "| … | and 5 more" in markdown
    assert len(to_json(view)["split_unknown"]) == 65


def test_a_cluster_placeholder_without_a_cluster_is_refused(files):
    with serve(script) as served:
        result = _plan(files, served.url, "--selector", '{kafka_cluster="{cluster}"}')
    assert result.exit_code == 1
    assert "no --cluster says which" in result.stderr


def _usage_only(*series: tuple[dict[str, str], float]):
    """A Prometheus whose Produce usage series read these values at every step; nothing throttled."""
    def script(request: Request) -> Answer:
        query = request.params.get("query", "")
        if request.path == "/api/v1/query_range" and "byte_rate" in query and 'resource="Produce"' in query:
            return matrix(*[(labels, _points(value)) for labels, value in series])
        if request.path == "/api/v1/query_range":
            return matrix()
        return vector()
    return script


@pytest.mark.parametrize(("series", "said"), [
    ([({"user": "alice", "client_id": "a1"}, float("nan"))],
     'answered 1 usage series none of whose points is a rate (every one NaN, ±Inf or negative): '
     'producer_byte_rate {client_id="a1", user="alice"}'),
    ([({"user": "alice", "client_id": "a1"}, 25000.0), ({"user": "bob"}, float("inf"))],
     'producer_byte_rate {user="bob"}'),
    ([({"user": "alice"}, -5.0)], 'producer_byte_rate {user="alice"}'),
    ([({"clientId": "a1"}, 25000.0), ({"principal": "alice"}, 100.0)],
     "answered 2 usage series and none carries a label that names a quota bucket (user label 'user', "
     "client-id label 'client_id')"),
])
def test_usage_that_cannot_be_read_is_an_error_never_would_throttle_0(files, series, said):
    with serve(_usage_only(*series)) as served:
        result = _plan(files, served.url, "--fail-on-throttle")
    assert result.exit_code == 1
    assert said in result.stderr
    assert "Would throttle" not in result.stdout


def _held_at_their_quotas(request: Request) -> Answer:
    """raiser and keeper, each held by Kafka at its 5 KiB quota: measured a little under it (as a
    throttled client's usage often is), and throttled all the window; nudged throttled too, measured
    over it."""
    query = request.params.get("query", "")
    if request.path == "/api/v1/query_range" and "avg_over_time" in query and 'resource="Produce"' in query:
        return matrix(({"user": "raiser"}, _points(5000)), ({"user": "keeper"}, _points(5000)),
                      ({"user": "quiet"}, _points(5000)), ({"user": "nudged"}, _points(6000)))
    if request.path == "/api/v1/query_range" and "throttle_time" in query and 'resource="Produce"' in query:
        return matrix(*[({"user": user}, _points(700)) for user in ("raiser", "keeper", "nudged")])
    if request.path == "/api/v1/query_range":
        return matrix()
    return vector()


def test_a_bucket_kafka_throttled_is_relieved_by_a_raise_whatever_its_measured_usage(tmp_path):
    """Kafka's throttle sensor, not the usage held at the quota, says a bucket was throttled: the
    raise relieves raiser (under its old quota by the usage alone); keeper's kept quota keeps it
    throttled; quiet, raised too but never throttled, is relieved of nothing; nudged's raise is still
    under its usage."""
    snapshot = tmp_path / "snapshot.json"
    quotas = {Entity.user(u): {P: 5120.0} for u in ("raiser", "keeper", "quiet", "nudged")}
    write_snapshot(snapshot, quotas, "test-cluster")
    manifests = write_manifest(tmp_path / "m" / "quotas.yaml", """\
entities:
  - user: raiser
    quotas: {producer_byte_rate: 1MiB}
  - user: keeper
    quotas: {producer_byte_rate: 5KiB}
  - user: quiet
    quotas: {producer_byte_rate: 1MiB}
  - user: nudged
    quotas: {producer_byte_rate: 5500}
""").parent
    with serve(_held_at_their_quotas) as served:
        result = _plan((snapshot, manifests), served.url, "--format", "json")
        text = _plan((snapshot, manifests), served.url)
    assert result.exit_code == 0, result.stderr
    usage = result.json["usage"]
    assert [(b["bucket"], b["usage"], b["quota"], b["throttled_in_window"]) for b in usage["relieved"]] == [
        ("{user=raiser}", 5000.0, 5120.0, True)]
    assert sorted((b["bucket"], b["newly"], b["throttled_in_window"]) for b in usage["throttled"]) == [
        ("{user=keeper}", False, True), ("{user=nudged}", False, False)]
    assert "Would throttle: 2 buckets (0 newly); relieves 1." in text.stdout
    assert ("- {user=raiser} producer_byte_rate: throttled by Kafka in the window, at ≈4.88 KiB/s of 5 KiB/s"
            in text.stdout), text.stdout
