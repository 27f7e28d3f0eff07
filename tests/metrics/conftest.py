"""The metrics tests' fixtures: a Kafka broker with the JMX exporter and Prometheus scraping it
(``stack``), then the scenario of tests/metrics/scenario.py played on them (``scenario``): the
quotas applied with kqplan, real clients producing and consuming at controlled rates.

The broker is this package's own (the exporter attached, more SASL users): the session pool's
broker is stopped first — two JVMs on two cores slow both. Its matrix entry is a
:class:`MetricsSpec`, which the plugin's ordering puts after every matrix broker's tests, so the
pool broker is not started again after it."""

from __future__ import annotations

import os
import time
from collections.abc import Generator, Iterator

import pytest

from tests.helpers import run_cli, write_manifest
from tests.kafka.broker import ensure_kafka_libs, pinned_kafka_version, tail
from tests.kafka.plugin import MARKER, BrokerPool
from tests.metrics import traffic
from tests.metrics.scenario import (
    CLIENTS,
    CLUSTER,
    MANIFEST,
    PASSWORDS,
    TOPIC,
    TRAFFIC_SECONDS,
    UNMANAGED,
    MetricsSpec,
    Scenario,
    Stack,
)
from tests.metrics.stack import PROMETHEUS_INSTALL, PrometheusServer, exporter_broker, prometheus_binary

_running: list[Stack] = []  # for the logs of a failed test
Reporting = Generator[None, pytest.TestReport, pytest.TestReport]


def _spec() -> MetricsSpec:
    return MetricsSpec(pinned_kafka_version())


@pytest.fixture(scope="package", params=[pytest.param(_spec(), id=f"{MARKER}-{_spec().id}-jmx-exporter",
                                                      marks=pytest.mark.real_kafka)])
def stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The broker with the exporter, and Prometheus scraping it every second."""
    if os.environ.get("KQPLAN_TEST_BOOTSTRAP"):
        pytest.skip("an external cluster (KQPLAN_TEST_BOOTSTRAP): no JVM here to attach the exporter to")
    binary = prometheus_binary()
    if binary is None:
        pytest.skip(f"Prometheus is not installed ({PROMETHEUS_INSTALL})")
    pool: BrokerPool = request.getfixturevalue("kafka_pool")
    pool.stop()  # two JVMs on two cores: the pool starts its broker again if a later test asks
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
    """The quotas applied with kqplan, the topic created, the clients run, Prometheus caught up."""
    root = tmp_path_factory.mktemp("metrics-manifests")
    manifests = write_manifest(root / "managed" / "quotas.yaml", MANIFEST).parent
    unmanaged = write_manifest(root / "other" / "gina.yaml", UNMANAGED).parent
    for directory in (manifests, unmanaged):
        applied = run_cli("apply", directory, "--bootstrap-server", stack.broker.bootstrap, "--auto-approve")
        assert applied.exit_code == 0, applied.stderr
    _topic_and_acls(stack.broker.bootstrap)
    start = time.time()
    moved = traffic.run(CLIENTS, stack.broker.sasl_bootstrap, PASSWORDS, TOPIC, TRAFFIC_SECONDS)
    end = time.time()
    stack.prometheus.wait_for_scrape_after(end + 1)
    return Scenario(stack, manifests, start, end, moved)


def _topic_and_acls(bootstrap: str) -> None:
    """The topic, and every SASL user allowed to write and read it (ANONYMOUS on PLAINTEXT is a
    super user)."""
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
        admin.create_topics([NewTopic(TOPIC, 1, 1)])
        admin.create_acls([ACL("User:*", "*", ACLOperation.ALL, ACLPermissionType.ALLOW,
                               ResourcePattern(ResourceType.TOPIC, TOPIC, ACLResourcePatternType.LITERAL))])
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
