"""The metrics tests' fixtures: a Kafka broker with the JMX exporter and Prometheus scraping it
(``stack``), then the scenario of tests/metrics/scenario.py played on them (``scenario``): the
quotas applied with kqplan, real clients producing and consuming at controlled rates.

The broker is this package's own (the exporter attached, more SASL users): the session pool's
broker is stopped first — two JVMs on two cores slow both. Its matrix entry is a
:class:`MetricsSpec`, which the plugin's ordering puts after every matrix broker's tests, so the
pool broker is not started again after it."""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from tests.helpers import run_cli, write_manifest
from tests.kafka.broker import ensure_kafka_libs, pinned_kafka_version, tail
from tests.kafka.plugin import MARKER
from tests.metrics import traffic
from tests.metrics.recorded import record
from tests.metrics.scenario import (
    BASELINE,
    BEFORE_SECONDS,
    CLIENTS,
    CLUSTER,
    MANIFEST,
    PASSWORDS,
    RAMP_SECONDS,
    TOPIC,
    UNMANAGED,
    MetricsSpec,
    Scenario,
    Stack,
)
from tests.metrics.stack import PrometheusServer, exporter_broker, own_stack

_running: list[Stack] = []  # for the logs of a failed test
Reporting = Generator[None, pytest.TestReport, pytest.TestReport]


def _spec() -> MetricsSpec:
    return MetricsSpec(pinned_kafka_version())


@pytest.fixture(scope="package", params=[pytest.param(_spec(), id=f"{MARKER}-{_spec().id}-jmx-exporter",
                                                      marks=pytest.mark.real_kafka)])
def stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The broker with the exporter, and Prometheus scraping it every second."""
    binary = own_stack(request, "attach the exporter to")
    spec: MetricsSpec = request.param
    libs = ensure_kafka_libs(spec.version)
    broker, port = exporter_broker(libs, tmp_path_factory.mktemp("metrics-kafka"), spec.version, PASSWORDS)
    broker.start()
    prometheus = PrometheusServer(tmp_path_factory.mktemp("prometheus"), [f"127.0.0.1:{port}"], CLUSTER)
    try:
        prometheus.start(binary)
        _running.append(Stack(broker, port, prometheus))
        yield _running[-1]
    finally:
        _running.clear()
        prometheus.stop()
        broker.stop()


@pytest.fixture(scope="package")
def scenario(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    """The issue's sequence on the real broker: BASELINE (every bucket a pair, raiser's quota
    throttling it) and gina's quota applied, the clients run; after BEFORE_SECONDS ``plan
    --usage-from-metrics`` forecasts which buckets MANIFEST would throttle; ``apply
    --verify-enforcement`` (its default window) applies it while the clients keep running, and
    watches Kafka enforce it, bucket by bucket, until each is decided; the clients stop once it
    returns; then Prometheus catches up. With ``$KQPLAN_RECORD_METRICS`` set to a file, the
    changed buckets' readings are written there (tests/metrics/recorded/)."""
    root = tmp_path_factory.mktemp("metrics-manifests")
    manifests = write_manifest(root / "managed" / "quotas.yaml", MANIFEST).parent
    baseline = write_manifest(root / "baseline" / "quotas.yaml", BASELINE).parent
    unmanaged = write_manifest(root / "other" / "gina.yaml", UNMANAGED).parent
    bootstrap = stack.broker.bootstrap
    for directory in (baseline, unmanaged):
        applied = run_cli("apply", directory, "--bootstrap-server", bootstrap, "--auto-approve")
        assert applied.exit_code == 0, applied.stderr
    _topic_and_acls(bootstrap)
    clients = traffic.Traffic(CLIENTS, stack.broker.sasl_bootstrap, PASSWORDS, TOPIC).start()
    start = time.time()  # every client connected: the rates hold from now
    moved: dict[traffic.Client, int] = {}
    try:
        time.sleep(BEFORE_SECONDS)
        stack.prometheus.wait_for_scrape_after(time.time())
        metrics = ("--prometheus", stack.prometheus.url, "--selector", f'{{kafka_cluster="{CLUSTER}"}}')
        since = f"{math.floor(time.time() - start - RAMP_SECONDS)}s"
        planned = run_cli("plan", manifests, "--bootstrap-server", bootstrap, "--usage-from-metrics",
                          *metrics, "--since", since, "--step", "1s", "--format", "json")
        assert planned.exit_code == 0, planned.stderr
        applied_at = time.time()
        report = root / "report.json"
        applied = run_cli("apply", manifests, "--bootstrap-server", bootstrap, "--auto-approve",
                          "--verify-enforcement", "--report", report, *metrics)
        _topic_and_acls(bootstrap, "after-apply")  # a controller mutation under dave's new quota type
        moved = clients.stop()
    finally:
        clients.stop_now()
    end = time.time()
    stack.prometheus.wait_for_scrape_after(end + 1)
    (root / "plan.json").write_text(planned.stdout)  # for a reader of a failed run
    (root / "apply.txt").write_text(applied.stdout + applied.stderr)
    found = Scenario(stack, manifests, start, end, moved, applied_at, planned.json["usage"], planned.stdout,
                     applied.stdout + applied.stderr, applied.exit_code,
                     json.loads(report.read_text()) if report.exists() else {})
    if os.environ.get("KQPLAN_RECORD_METRICS"):
        record(found, Path(os.environ["KQPLAN_RECORD_METRICS"]))
    return found


def _topic_and_acls(bootstrap: str, topic: str = TOPIC) -> None:
    """The topic, and every SASL user allowed to write and read it (ANONYMOUS on PLAINTEXT is a
    super user). Creating a topic is a controller mutation: Kafka measures it (a
    ControllerMutation series) once a quota of that type is set."""
    from kafka.admin import (
        ACL,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        NewTopic,
        ResourcePattern,
        ResourceType,
    )

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="metrics-setup")
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
        admin.create_acls([ACL("User:*", "*", ACLOperation.ALL, ACLPermissionType.ALLOW,
                               ResourcePattern(ResourceType.TOPIC, topic, ACLResourcePatternType.LITERAL))])
    finally:
        admin.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Reporting:
    """On a failure here, the tails of this package's broker and Prometheus logs."""
    report = yield
    if report.failed and _running:
        stack = _running[-1]
        report.sections.append((f"Kafka broker log (tail of {stack.broker.log_file})",
                                tail(stack.broker.log_file)))
        report.sections.append((f"Prometheus log (tail of {stack.prometheus.log_file})",
                                tail(stack.prometheus.log_file)))
    return report
