"""``kqplan throttled`` against a Prometheus answering scripted series (a tiny local HTTP server):
the buckets, worst first, their quota from one describe, the manifest line, what it asks."""

from __future__ import annotations

import json
import time

import kqplan.cli.throttled  # noqa: F401  (registers the command, whatever kqplan.cli.main lists)
from kqplan.core.entity import Entity
from kqplan.snapshot.file import write_snapshot
from tests.helpers import run_cli, write_manifest
from tests.metrics.server import Scripted, serve

P, C = "producer_byte_rate", "consumer_byte_rate"
HOSTILE = 'odd|app <!-- `x` @team'
STATE = {Entity.user("alice"): {P: 40960.0}, Entity.user(None): {C: 10240.0},
         Entity.client(HOSTILE): {P: 1024.0}}
MANIFEST = """\
entities:
  - user: alice
    quotas:
      producer_byte_rate: 40KiB
  - user: <default>
    quotas:
      consumer_byte_rate: 10KiB
"""


def _points(*values: float) -> list[tuple[float, float]]:
    return [(1_700_000_000.0 + i, v) for i, v in enumerate(values)]


def scripted() -> Scripted:
    hostile = '"' + HOSTILE.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return Scripted(
        throttled={
            "Produce": [({"user": "alice", "instance": "b1"}, _points(120, 800, 300)),
                        ({"user": "alice", "instance": "b2"}, _points(0, 90)),
                        ({"client_id": hostile, "instance": "b1"}, _points(50)),
                        ({"resource": "Produce", "instance": "b1"}, _points(10))],
            "Fetch": [({"user": "frank", "instance": "b2"}, _points(4000, 5000))]},
        usage={"Produce": [({"user": "alice"}, 61000.0), ({"client_id": hostile}, 2000.0)],
               "Fetch": [({"user": "frank"}, 10300.0)]})


def _files(tmp_path):
    snapshot = tmp_path / "snapshot.json"
    write_snapshot(snapshot, STATE, "test-cluster")
    manifest = write_manifest(tmp_path / "m" / "quotas.yaml", MANIFEST)
    return snapshot, manifest


def test_the_throttled_buckets_worst_first_with_quota_entity_and_line(tmp_path):
    snapshot, manifest = _files(tmp_path)
    with serve(scripted()) as served:
        result = run_cli("throttled", manifest.parent, "--state", snapshot, "--prometheus", served.url,
                         "--selector", '{kafka_cluster="prod"}', "--format", "json", "--detailed-exitcode")
    assert result.exit_code == 2, result.stderr
    rows = result.json["throttled"]
    assert [(r["key"], r["bucket"]) for r in rows] == [
        (C, {"user": "frank"}), (P, {"user": "alice"}), (P, {"client-id": HOSTILE}), (P, None)]
    frank, alice, hostile, unknown = rows
    assert (frank["source"], frank["quota"]) == ({"user": None}, 10240.0)
    assert frank["declared"] == f"{manifest}:7:5"
    assert (alice["peak_throttle_ms"], alice["throttled_steps"], alice["brokers"]) == (800.0, 3, ["b1", "b2"])
    assert (alice["peak_usage"], alice["quota"], alice["declared"]) == (61000.0, 40960.0, f"{manifest}:4:5")
    assert (hostile["source"], hostile["declared"]) == ({"client-id": HOSTILE}, None)  # not managed
    assert unknown["source"] is None
    assert "carry neither label 'user' nor 'client_id'" in result.stderr


def test_what_it_asks_prometheus(tmp_path):
    snapshot, _ = _files(tmp_path)
    with serve(scripted()) as served:
        result = run_cli("throttled", "--state", snapshot, "--prometheus", served.url,
                         "--selector", '{kafka_cluster="prod"}', "--since", "2h", "--step", "30s")
    assert result.exit_code == 0, result.stderr
    ranges = [r for r in served.requests if r.path == "/api/v1/query_range"]
    throttle = 'kafka_server_quota_throttle_time{{resource="{}",kafka_cluster="prod"}}'
    assert [r.params["query"] for r in ranges if "throttle_time" in r.params["query"]] == [
        f"max_over_time({throttle.format(resource)}[30s]) > 0"
        for resource in ("Produce", "Fetch", "Request", "ControllerMutation")]
    assert {r.params["step"] for r in ranges} == {"30"}
    first = ranges[0].params
    assert float(first["end"]) - float(first["start"]) == 2 * 3600 - 30  # 240 points cover 2 h
    # the throttled buckets' usage over the window, narrowed to them by their labels (JMX's quotes
    # of the client-id kept, escaped for a regular expression in a PromQL string)
    usage = [r.params["query"] for r in ranges if "byte_rate" in r.params["query"]]
    assert usage == [
        'max by (user, client_id) (max_over_time(kafka_server_quota_byte_rate{resource="Produce",'
        'kafka_cluster="prod",user=~"|alice",client_id=~"|\\"odd\\\\|app <!-- `x` @team\\""}[30s]))',
        'max by (user, client_id) (max_over_time(kafka_server_quota_byte_rate{resource="Fetch",'
        'kafka_cluster="prod",user=~"frank",client_id=~""}[30s]))']


def test_the_text_and_markdown_forms_escape_every_name(tmp_path):
    snapshot, manifest = _files(tmp_path)
    with serve(scripted()) as served:
        text = run_cli("throttled", manifest.parent, "--state", snapshot, "--prometheus", served.url)
        markdown = run_cli("throttled", manifest.parent, "--state", snapshot, "--prometheus",
                           served.url, "--format", "markdown")
    assert text.exit_code == 0, text.stderr
    assert markdown.exit_code == 0, markdown.stderr
    assert "Kafka throttled 4 quota buckets of cluster test-cluster in the last 15 min" in text.stdout
    alice = "{user=alice}  producer_byte_rate\n    throttled  up to 800 ms, in 3 of 15 steps of 1 min"
    assert alice in text.stdout
    assert "quota      40 KiB/s (40960) per broker, from {user=alice}" in text.stdout
    assert f"declared   {manifest}:4:5" in text.stdout
    assert "from {user=<default>}" in text.stdout
    assert "declared   not managed" in text.stdout
    body = markdown.stdout
    assert body.startswith("### kqplan throttled\n")
    assert "<!--" not in body
    rows = [line for line in body.splitlines() if line.startswith("| `")]
    assert len(rows) == 3
    assert all(row.count(" | ") == 7 for row in rows)


def test_nothing_throttled(tmp_path):
    snapshot, _ = _files(tmp_path)
    with serve(Scripted(count=12)) as served:
        result = run_cli("throttled", "--state", snapshot, "--prometheus", served.url, "--detailed-exitcode")
        as_json = run_cli("throttled", "--state", snapshot, "--prometheus", served.url, "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("Kafka throttled no quota bucket of cluster test-cluster")
    assert json.loads(as_json.stdout)["throttled"] == []


def test_a_cluster_without_client_quotas_has_nothing_to_throttle(tmp_path):
    snapshot = tmp_path / "empty.json"
    write_snapshot(snapshot, {Entity.ip(None): {"connection_creation_rate": 10.0}}, None)
    with serve(Scripted()) as served:
        result = run_cli("throttled", "--state", snapshot, "--prometheus", served.url)
    assert result.exit_code == 0, result.stderr
    assert "Kafka throttled no quota bucket" in result.stdout


def test_other_metric_names(tmp_path):
    snapshot, _ = _files(tmp_path)
    strimzi = Scripted(throttled={"Produce": [({"clientId": "app"}, _points(30))]})
    with serve(strimzi) as served:
        result = run_cli("throttled", "--state", snapshot, "--prometheus", served.url, "--format", "json",
                         "--metric", "label.client_id=clientId",
                         "--metric", "throttle.producer_byte_rate="
                                     'kafka_server_quota_throttle_time{resource="Produce"}')
    assert result.exit_code == 0, result.stderr
    assert [r["bucket"] for r in result.json["throttled"]] == [{"client-id": "app"}]


def test_an_inventory_cluster_gives_the_target_and_the_manifests(tmp_path, monkeypatch):
    snapshot, _ = _files(tmp_path)
    (tmp_path / "kqplan.toml").write_text(
        f'[clusters.prod]\nsnapshot = "{snapshot.name}"\nmanifests = ["m"]\n')
    monkeypatch.chdir(tmp_path)
    with serve(scripted()) as served:
        result = run_cli("throttled", "--cluster", "prod", "--prometheus", served.url, "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert result.json["cluster"] == "prod"
    alice = next(r for r in result.json["throttled"] if r["bucket"] == {"user": "alice"})
    assert alice["declared"] == "m/quotas.yaml:4:5"


def test_the_throttling_ended_a_throttle_sensor_memory_before_its_last_step(tmp_path):
    """Kafka's throttle-time stays above 0 for the broker's metrics.num.samples ×
    metrics.sample.window.ms after the last throttled response: 10 s on a broker set to 5000 ms
    (read from it: here, as a snapshot of it recorded it), 60 s with Kafka's defaults."""
    t0 = 1_700_000_000.0
    script = Scripted(throttled={"Produce": [({"user": "alice", "instance": "b1"},
                                              [(t0 + i, 300.0) for i in range(31)])],
                                 "Fetch": [({"user": "frank", "instance": "b1"}, [(t0, 900.0)])]},
                      usage={"Produce": [({"user": "alice"}, 41000.0)],
                             "Fetch": [({"user": "frank"}, 2000.0)]})
    found = {}
    for name, brokers in (("short", {"1": {"metrics.sample.window.ms": "5000"}}), ("defaults", None)):
        snapshot = tmp_path / f"{name}.json"
        doc = {"format_version": 1, "cluster_id": "c", "entities": [
            {"entity": {"user": "alice"}, "quotas": {P: 40960.0}},
            {"entity": {"user": None}, "quotas": {C: 10240.0}}]}
        if brokers:
            doc["brokers"] = brokers
        snapshot.write_text(json.dumps(doc))
        with serve(script) as served:
            result = run_cli("throttled", "--state", snapshot, "--prometheus", served.url, "--format", "json")
        assert result.exit_code == 0, result.stderr
        found[name] = result.json
    short = {r["bucket"]["user"]: r for r in found["short"]["throttled"]}
    assert found["short"]["throttle_memory_seconds"] == 10.0
    assert short["alice"]["last_throttled_step"] == "2023-11-14T22:13:50Z"
    assert short["alice"]["ended"] == "2023-11-14T22:13:40Z"  # 10 s before it
    assert short["alice"]["ongoing"] is False
    defaults = {r["bucket"]["user"]: r for r in found["defaults"]["throttled"]}
    assert found["defaults"]["throttle_memory_seconds"] == 60.0
    assert defaults["alice"]["ended"] == "2023-11-14T22:13:20Z"  # never before its first step
    # frank's usage while throttled stayed far under his quota now: said, with why
    assert short["frank"]["usage_under_quota_now"] is True
    assert "the quota was lower then and changed since, or another limit applied" in short["frank"]["note"]
    assert short["alice"]["usage_under_quota_now"] is False
    assert short["alice"]["note"] is None


def test_a_throttling_at_the_windows_end_may_go_on(tmp_path):
    snapshot, _ = _files(tmp_path)
    now = time.time()
    script = Scripted(throttled={"Produce": [({"user": "alice", "instance": "b1"},
                                              [(now - 120 + i, 300.0) for i in range(0, 121, 60)])]},
                      usage={"Produce": [({"user": "alice"}, 41000.0)]})
    with serve(script) as served:
        result = run_cli("throttled", "--state", snapshot, "--prometheus", served.url, "--format", "json",
                         "--since", "2m")
        text = run_cli("throttled", "--state", snapshot, "--prometheus", served.url, "--since", "2m")
    (alice,) = result.json["throttled"]
    assert (alice["ongoing"], alice["ended"]) == (True, None)
    assert "    ended      still throttled at the end of the window" in text.stdout
