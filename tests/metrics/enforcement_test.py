"""``apply --verify-enforcement`` in milliseconds or seconds, the real stack's rules without it:

- the judge replays the readings recorded from the real stack (tests/metrics/recorded/, with the
  broker settings they came from), poll by poll as the watch would see them, and gives the
  verdicts the real run gave, decided no earlier than Kafka's sensors allow;
- the same readings, served by a Prometheus that answers from the recording, go through the
  Prometheus client, the bucket readings and the watch loop (a fake clock): the verdicts again;
- the readings bent to what a broker that does not enforce would show (usage 80 % over the new
  quota, throttle-time left over from the old one) are contradicted;
- the command, against the sandbox (its brokers reporting small sensor windows through
  DescribeConfigs) and a scripted Prometheus: contradicted is exit 1 and in the report, confirmed
  exit 0, a window too short for the brokers' quota window is refused before anything is sent.
"""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path

import jsonschema
import pytest

from kqplan.commands.enforcement import CLOCKS, sensors_of, verify
from kqplan.commands.forecast import Metrics
from kqplan.core.enforcement import Finding, Outcome, judge
from kqplan.core.entity import Entity
from kqplan.metrics.names import MetricNames
from kqplan.metrics.prometheus import Prometheus
from kqplan.metrics.source import PrometheusSource, endpoint
from kqplan.sandbox import Sandbox, SandboxConfig
from kqplan.snapshot.file import write_snapshot
from tests.helpers import REPO, run_cli, write_manifest
from tests.metrics.recorded import Recording, load
from tests.metrics.server import Answer, Request, matrix, serve, steady, vector

RECORDINGS = ("scenario", "callback")


def _replayed(rec: Recording, display: str, *, step: float = 2.0, scale: float = 1.0):
    """(seconds after the change, verdict) at each poll of the watch, as it would judge then."""
    watch = rec.watch(display)
    sensors = sensors_of(rec.settings, watch.key)
    found = []
    at = 0.0
    while at <= rec.window:
        verdict = judge(watch, rec.readings(watch, until=rec.changed + at, scale=scale),
                        changed=rec.changed + CLOCKS, sensors=sensors)
        found.append((at, verdict))
        at += step
    return found


def _first_decided(replayed):
    return next(((at, v) for at, v in replayed if v.outcome is not Outcome.NOT_YET), (None, None))


@pytest.mark.parametrize("name", RECORDINGS)
def test_the_recorded_readings_give_the_real_runs_verdicts(name):
    rec = load(name)
    for bucket in rec.buckets:
        at, verdict = _first_decided(_replayed(rec, bucket["display"]))
        assert verdict is not None, bucket["display"]
        assert (verdict.outcome.value, verdict.finding.value) == (bucket["outcome"], bucket["finding"]), \
            bucket["display"]
        # never before the quota window has passed since the change (and the clocks' slack)
        assert at >= CLOCKS + sensors_of(rec.settings, bucket["key"]).usage.clean


def test_the_raise_is_not_decided_while_throttle_time_echoes_the_old_quota():
    rec = load("scenario")
    replayed = _replayed(rec, "{user=raiser}")
    memory = sensors_of(rec.settings, "producer_byte_rate").throttle.memory
    at, verdict = _first_decided(replayed)
    assert (verdict.outcome, verdict.finding) == (Outcome.CONFIRMED, Finding.UNDER)
    assert at >= memory  # the echo lasts the throttle sensor's memory (60 s on the recorded broker)
    echoing = [v.finding for t, v in replayed if CLOCKS + 12 + 4 < t < memory - 2]
    assert echoing
    assert set(echoing) == {Finding.ECHO}


def test_a_consumer_lowered_far_under_its_usage_is_confirmed_as_muted():
    """The recorded reader was reading ~230 KB/s when its quota fell to 16 KiB/s: Kafka delayed its
    next response by what that asks (~150 s), and it read nothing meanwhile."""
    rec = load("scenario")
    _at, verdict = _first_decided(_replayed(rec, "{user=erin$ro, client-id=reader-1}"))
    assert (verdict.outcome, verdict.finding) == (Outcome.CONFIRMED, Finding.MUTED)
    assert 0.5 <= verdict.throttle_ms / verdict.asked_ms <= 2
    assert verdict.muted_until > rec.changed + 100


def test_a_broker_that_does_not_hold_the_bucket_is_caught_whatever_its_throttle_time_says():
    """The issue's third row on real readings: the lowered bucket's usage bent to 1.8 × what Kafka
    held it at (a broker ignoring the new quota), its real throttle-time left as it was."""
    rec = load("scenario")
    _at, verdict = _first_decided(_replayed(rec, "{user=lowered}", scale=1.8))
    assert (verdict.outcome, verdict.finding) == (Outcome.CONTRADICTED, Finding.OVER)


def _recorded_prometheus(rec: Recording, clock: list[float]):
    """A Prometheus answering from ``rec``: range-vector instant queries with the raw samples in
    (at − range, at] (``clock[0]`` is now: nothing later exists yet)."""
    def script(request: Request) -> Answer:
        query = request.params.get("query", "")
        found = re.search(r"(kafka_server_quota_\w+)\{resource=\"(\w+)\"[^}]*\}\[(\d+)s\]$", query)
        if request.path != "/api/v1/query" or not found:
            return vector()
        name, resource, span = found.group(1), found.group(2), int(found.group(3))
        at = min(float(request.params["time"]), clock[0])
        role = "usage" if name == "kafka_server_quota_byte_rate" else "throttle"
        series = [(s["metric"], [(float(t), float(v)) for t, v in s["values"] if at - span < float(t) <= at])
                  for s in rec.series[role] if s["metric"].get("resource") == resource]
        return matrix(*[(labels, points) for labels, points in series if points])
    return script


def test_the_watch_loop_reaches_the_same_verdicts_through_prometheus():
    rec = load("scenario")
    watches = [rec.watch(b["display"]) for b in rec.buckets]
    clock = [rec.changed]

    def sleep(seconds: float) -> None:
        clock[0] += seconds

    with serve(_recorded_prometheus(rec, clock)) as served:
        metrics = Metrics(Prometheus(endpoint(PrometheusSource(served.url))), MetricNames(), "")
        found = verify(metrics, watches, changed=rec.changed, window=rec.window, settings=rec.settings,
                       progress=lambda _: None, clock=lambda: clock[0], sleep=sleep)
    got = {v.watch.bucket.display: (v.outcome.value, v.finding.value) for v in found.verdicts}
    assert got == {b["display"]: (b["outcome"], b["finding"]) for b in rec.buckets}
    # it stopped once every bucket was decided: the raise, the last, after the throttle sensor's memory
    assert 60 <= found.waited < rec.window
    watching = [r.params["query"] for r in served.requests if r.params.get("query", "").endswith("s]")]
    assert watching
    assert all('user=~"' in q and 'client_id=~"' in q for q in watching)


# -- the command, on the sandbox and a scripted Prometheus --------------------------------------------------

P = "producer_byte_rate"
SMALL = {"quota.window.num": "1", "quota.window.size.seconds": "1", "metrics.num.samples": "2",
         "metrics.sample.window.ms": "1000"}
"""Sensor windows of a few seconds: usage readings clean 2 s after a change, throttle-time
remembering 2 s (the sandbox reports them as the broker's settings)."""


def _steady(usage: float, *, throttle: float = math.nan):
    """A Prometheus whose {user=u} bucket reads ``usage`` every second, at any time asked."""
    return steady({"user": "u"}, usage, throttle=throttle)


@pytest.fixture
def small_sandbox():
    with Sandbox.start(SandboxConfig(port=0, broker_configs=SMALL,
                                     seed={Entity.user("u"): {P: 100_000.0}})) as sb:
        yield sb


def _apply(sandbox, tmp_path: Path, url: str, *extra: str):
    manifests = write_manifest(tmp_path / "m" / "quotas.yaml",
                               "entities:\n  - user: u\n    quotas: {producer_byte_rate: 25600}\n").parent
    report = tmp_path / "report.json"
    return run_cli("apply", manifests, "--bootstrap-server", sandbox.bootstrap, "--auto-approve",
                   "--prometheus", url, "--report", report, *extra), report


def test_a_lowered_quota_the_usage_stays_over_is_contradicted_exit_1(small_sandbox, tmp_path):
    """With ``--format json``: the report document on stdout (the verdicts in it), the text on
    stderr; the same document in ``--report``."""
    with serve(_steady(50_000.0)) as served:
        started = time.monotonic()
        result, report = _apply(small_sandbox, tmp_path, served.url, "--verify-enforcement",
                                "--format", "json")
        took = time.monotonic() - started
    assert result.exit_code == 1, result.stdout + result.stderr
    assert ("✗ {user=u} producer_byte_rate: contradicted: its usage stays over its quota (more than 1.2 ×): "
            "Kafka does not hold it") in result.stderr
    assert result.json["enforcement"]["buckets"][0]["outcome"] == "contradicted"
    doc = json.loads(report.read_text())
    assert doc["enforcement"] == result.json["enforcement"]
    schema = json.loads((REPO / "schemas" / "report-v1.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(doc)
    enforcement = doc["enforcement"]
    assert enforcement["summary"] == {"confirmed": 0, "not_yet_observed": 0, "contradicted": 1}
    (bucket,) = enforcement["buckets"]
    assert (bucket["quota"], bucket["quota_before"], bucket["usage"]) == (25600.0, 100000.0, 50000.0)
    assert enforcement["sensors"][P]["usage_clean_seconds"] == 2.0  # the sandbox broker's, not 12 s
    assert took < 30  # decided a few seconds after the change, not at the 2-minute window's end


def test_a_lowered_quota_the_usage_stays_under_is_confirmed_exit_0(small_sandbox, tmp_path):
    with serve(_steady(20_000.0)) as served:
        result, report = _apply(small_sandbox, tmp_path, served.url, "--verify-enforcement=1m")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "✓ {user=u} producer_byte_rate: confirmed: not throttled, and under its quota" in result.stdout
    assert json.loads(report.read_text())["enforcement"]["summary"]["confirmed"] == 1


def test_a_window_shorter_than_the_brokers_quota_window_is_refused_before_anything_is_sent(tmp_path):
    with Sandbox.start(SandboxConfig(port=0, broker_configs={"quota.window.num": "30"},
                                     seed={Entity.user("u"): {P: 100_000.0}})) as sandbox, \
            serve(_steady(50_000.0)) as served:
        result, _ = _apply(sandbox, tmp_path, served.url, "--verify-enforcement=20s")
        assert result.exit_code == 1
        assert ("the brokers' usage readings hold only records after a change 31 s after it "
                "(quota.window.num 30 + 1 samples of quota.window.size.seconds 1 s)") in result.stderr
        after = run_cli("plan", tmp_path / "m", "--bootstrap-server", sandbox.bootstrap,
                        "--detailed-exitcode")
        assert after.exit_code == 2  # still to change: nothing was sent


def test_plan_warns_about_the_sandbox_brokers_quota_callback(tmp_path):
    with Sandbox.start(SandboxConfig(port=0, brokers=2, broker_configs={
            "client.quota.callback.class": "io.strimzi.kafka.quotas.StaticQuotaCallback"})) as sandbox:
        manifests = write_manifest(tmp_path / "m" / "quotas.yaml",
                                   "entities:\n  - user: u\n    quotas: {producer_byte_rate: 25600}\n").parent
        result = run_cli("plan", manifests, "--bootstrap-server", sandbox.bootstrap, "--format", "json")
        (tmp_path / "kqplan.toml").write_text('[policy]\nquota-callback = "error"\n')
        refused = run_cli("--config", tmp_path / "kqplan.toml", "plan", manifests,
                          "--bootstrap-server", sandbox.bootstrap)
    assert result.exit_code == 0, result.stderr
    (note,) = [n for n in result.json["notes"] if "KQP175" in n]
    assert note == (f"{sandbox.bootstrap}: warning[KQP175] brokers 1, 2 enforce client quotas through "
                    "client.quota.callback.class=io.strimzi.kafka.quotas.StaticQuotaCallback: the quotas "
                    "kqplan stores may not be what clients get")
    assert refused.exit_code == 1
    assert "error[KQP175]" in refused.stderr


def test_a_snapshot_records_the_brokers_settings_and_a_plan_from_it_warns(tmp_path):
    configs = {"client.quota.callback.class": "com.x.Q"}
    with Sandbox.start(SandboxConfig(port=0, broker_configs=configs)) as sb:
        exported = run_cli("export", "--bootstrap-server", sb.bootstrap, "--format", "json",
                           "--out", tmp_path / "snap.json")
    assert exported.exit_code == 0, exported.stderr
    snapshot = json.loads((tmp_path / "snap.json").read_text())
    assert snapshot["brokers"]["1"]["client.quota.callback.class"] == "com.x.Q"
    manifests = write_manifest(tmp_path / "m" / "quotas.yaml",
                               "entities:\n  - user: u\n    quotas: {producer_byte_rate: 25600}\n").parent
    result = run_cli("plan", manifests, "--state", tmp_path / "snap.json")
    assert "warning[KQP175] broker 1 enforces client quotas through client.quota.callback.class=com.x.Q" \
        in result.stdout


def test_a_watch_that_prometheus_stops_answering_is_reported_failed(small_sandbox, tmp_path):
    """The alter stands; the report says the watch failed, and why; exit 1."""
    with serve(steady({"user": "u"}, 50_000.0, fail_samples=True)) as served:
        result, report = _apply(small_sandbox, tmp_path, served.url, "--verify-enforcement")
    assert result.exit_code == 1
    assert "Prometheus at" in result.stderr
    doc = json.loads(report.read_text())
    assert doc["ok"] is True
    assert doc["enforcement"]["status"] == "failed"
    assert "HTTP 500" in doc["enforcement"]["error"]


def test_a_snapshot_without_brokers_says_nothing_of_them(tmp_path):
    write_snapshot(tmp_path / "snap.json", {}, "c")
    manifests = write_manifest(tmp_path / "m" / "quotas.yaml",
                               "entities:\n  - user: u\n    quotas: {producer_byte_rate: 25600}\n").parent
    result = run_cli("plan", manifests, "--state", tmp_path / "snap.json")
    assert result.exit_code == 0
    assert "KQP17" not in result.stdout + result.stderr


@pytest.mark.parametrize("finding", list(Finding))
def test_every_finding_is_put_in_words(finding):
    from kqplan.core.enforcement import Verdict, Watch
    from kqplan.core.sensors import BrokerSettings
    from kqplan.render.enforcement import EnforcementView, enforcement_json, render_enforcement

    settings = BrokerSettings()
    verdict = Verdict(Watch(Entity.user("u"), P, 1000.0), Outcome.NOT_YET, finding, "b1", 10.0, 10.0, 5,
                      1.0, 5.0, 2.0, 60.0, 200.0, 150_000.0)
    view = EnforcementView([verdict], 0.0, 10.0, 120.0, {P: sensors_of_settings(settings)}, {P: "B/s"})
    assert f"{{user=u}} {P}:" in render_enforcement(view)
    assert enforcement_json(view)["buckets"][0]["reason"]


def sensors_of_settings(settings):
    from kqplan.core.enforcement import Sensors

    return Sensors(settings.usage(P), settings.throttle)
