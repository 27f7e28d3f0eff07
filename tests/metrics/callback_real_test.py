"""Declared is not enforced: a real broker started with a quota callback of the suite's own
(tests/kafka/NoLimitQuotaCallback.java: Kafka's bucket tags, no limit), and with sensor windows
other than Kafka's defaults. It stores every quota and enforces none, so:

- ``plan`` names the callback (KQP175, read with DescribeConfigs from the broker itself);
- ``apply --verify-enforcement`` of a quota lowered under the clients' usage is ``contradicted``
  (exit 1): the usage stays over the quota, on Kafka's own measurement;
- the verdict rests on this broker's windows, not Kafka's defaults (quota.window.num 5,
  metrics.sample.window.ms 5000: usage readings clean 6 s after a change, throttle-time
  remembering 10 s);
- the watch stops as soon as the bucket is decided.

A recording of its readings (``$KQPLAN_RECORD_METRICS_CALLBACK``) joins tests/metrics/recorded/.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kqplan.core.entity import Entity
from tests.helpers import REPO, run_cli, write_manifest
from tests.kafka.broker import ensure_kafka_libs, pinned_kafka_version
from tests.kafka.plugin import MARKER
from tests.metrics import traffic
from tests.metrics.conftest import _topic_and_acls
from tests.metrics.scenario import MetricsSpec, Stack
from tests.metrics.stack import PrometheusServer, exporter_broker, own_stack

CALLBACK = "NoLimitQuotaCallback"
CLUSTER = "callback-test"
SETTINGS = {"client.quota.callback.class": CALLBACK, "quota.window.num": "5",
            "metrics.sample.window.ms": "5000"}
PASSWORDS = {"admin": "admin-secret", "reader": "reader-secret", "lowered": "lowered-secret"}
BASELINE = """\
entities:
  - user: lowered
    quotas:
      producer_byte_rate: 100KiB
"""
LOWERED = """\
entities:
  - user: lowered
    quotas:
      producer_byte_rate: 25KiB
"""
CLIENT = traffic.Client("lowered", "low-1", 45_000)
BEFORE_SECONDS = 6.0


@dataclass(frozen=True, order=True)
class CallbackSpec(MetricsSpec):
    """The metrics tests' broker, with the callback: ordered with them (after the matrix brokers)."""

    callback: str = CALLBACK


@dataclass
class Run:
    stack: Stack
    plan: object
    apply: object
    report: dict
    applied: float
    returned: float


def _compiled(libs: Path, into: Path) -> Path:
    """tests/kafka/NoLimitQuotaCallback.java compiled against the broker's own jars."""
    subprocess.run(["javac", "-d", str(into), "-cp", str(libs / "*"),
                    str(REPO / "tests" / "kafka" / "NoLimitQuotaCallback.java")],
                   check=True, capture_output=True, timeout=300)
    return into


@pytest.fixture(scope="module", params=[pytest.param(CallbackSpec(pinned_kafka_version()),
                                                     id=f"{MARKER}-{pinned_kafka_version()}-kraft-callback",
                                                     marks=pytest.mark.real_kafka)])
def callback_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    binary = own_stack(request, "give a quota callback")
    spec: CallbackSpec = request.param
    libs = ensure_kafka_libs(spec.version)
    root = tmp_path_factory.mktemp("callback")
    broker, port = exporter_broker(libs, root / "kafka", spec.version, PASSWORDS)
    broker.extra_properties = SETTINGS
    broker.classpath = (_compiled(libs, root / "classes"),)
    broker.start()
    prometheus = PrometheusServer(root / "prometheus", [f"127.0.0.1:{port}"], CLUSTER)
    try:
        prometheus.start(binary)
        stack = Stack(broker, port, prometheus)
        yield _play(stack, root)
    finally:
        prometheus.stop()
        broker.stop()


def _play(stack: Stack, root: Path) -> Run:
    bootstrap = stack.broker.bootstrap
    baseline = write_manifest(root / "baseline" / "quotas.yaml", BASELINE).parent
    lowered = write_manifest(root / "lowered" / "quotas.yaml", LOWERED).parent
    applied = run_cli("apply", baseline, "--bootstrap-server", bootstrap, "--auto-approve")
    assert applied.exit_code == 0, applied.stderr
    _topic_and_acls(bootstrap)
    clients = traffic.Traffic([CLIENT], stack.broker.sasl_bootstrap, PASSWORDS, "traffic").start()
    try:
        time.sleep(BEFORE_SECONDS)
        stack.prometheus.wait_for_scrape_after(time.time())
        metrics = ("--prometheus", stack.prometheus.url, "--selector", f'{{kafka_cluster="{CLUSTER}"}}')
        plan = run_cli("plan", lowered, "--bootstrap-server", bootstrap)
        report = root / "report.json"
        started = time.time()
        verified = run_cli("apply", lowered, "--bootstrap-server", bootstrap, "--auto-approve",
                           "--verify-enforcement", "--report", report, *metrics)
        returned = time.time()
        clients.stop()
    finally:
        clients.stop_now()
    stack.prometheus.wait_for_scrape_after(time.time())
    run = Run(stack, plan, verified, json.loads(report.read_text()), started, returned)
    if os.environ.get("KQPLAN_RECORD_METRICS_CALLBACK"):
        from tests.metrics.recorded import record

        record(_AsScenario(run), Path(os.environ["KQPLAN_RECORD_METRICS_CALLBACK"]))
    return run


@dataclass
class _AsScenario:
    """What :func:`tests.metrics.recorded.record` reads of a scenario."""

    run: Run

    @property
    def report(self) -> dict:
        return self.run.report

    @property
    def stack(self) -> Stack:
        return self.run.stack

    @property
    def end(self) -> float:
        return self.run.returned + 2


def test_plan_names_the_quota_callback_read_from_the_broker(callback_run: Run):
    plan = callback_run.plan
    assert plan.exit_code == 0, plan.stderr
    assert (f"warning[KQP175] broker 1 enforces client quotas through client.quota.callback.class="
            f"{CALLBACK}: the quotas kqplan stores may not be what clients get") in plan.stdout


def test_a_lowered_quota_the_broker_does_not_enforce_is_contradicted(callback_run: Run):
    result = callback_run.apply
    assert result.exit_code == 1, result.stdout + result.stderr
    enforcement = callback_run.report["enforcement"]
    (lowered,) = enforcement["buckets"]
    assert Entity.from_json(lowered["bucket"]) == Entity.user("lowered")
    assert (lowered["outcome"], lowered["finding"]) == ("contradicted", "over")
    assert lowered["usage"] > 1.2 * lowered["quota"]
    assert lowered["throttle_ms"] is None  # nothing was ever throttled
    assert ("✗ {user=lowered} producer_byte_rate: contradicted: its usage stays over its quota (more than "
            "1.2 ×): Kafka does not hold it") in result.stdout
    assert callback_run.report["ok"] is True  # the alter itself was applied: Kafka stored it


def test_the_verdict_rests_on_this_brokers_windows(callback_run: Run):
    sensors = callback_run.report["enforcement"]["sensors"]["producer_byte_rate"]
    assert (sensors["usage_samples"], sensors["usage_window_seconds"],
            sensors["usage_clean_seconds"]) == (5, 1.0, 6.0)
    assert (sensors["throttle_samples"], sensors["throttle_window_seconds"],
            sensors["throttle_memory_seconds"]) == (2, 5.0, 10.0)
    assert ("usage readings clean 6 s after a change (quota.window.num 5 + 1 × quota.window.size.seconds "
            "1 s)") in callback_run.apply.stdout


def test_the_watch_stops_once_the_bucket_is_decided(callback_run: Run):
    enforcement = callback_run.report["enforcement"]
    assert enforcement["window_seconds"] == 120.0  # the default
    assert enforcement["waited_seconds"] < 60, enforcement
