"""pytest plugin: the real Apache Kafka broker (fixture ``real_kafka``, marker ``real_kafka``).

One broker per test session, started on first use. ``KQPLAN_TEST_BOOTSTRAP=host:port`` points the
tests at an external cluster instead (PLAINTEXT only, no JVM started here).
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import pytest

from tests.kafka.broker import KafkaBroker, ensure_kafka_libs, kafka_mode, kafka_version, tail
from tests.kafka.configcommand import ConfigCommand

MARKER = "real_kafka"
Reporting = Generator[None, pytest.TestReport, pytest.TestReport]
_BROKER = pytest.StashKey[KafkaBroker]()


@dataclass
class RealKafka:
    """What a test needs to reach the real broker; the attributes tests/cluster/integration_test.py uses."""

    bootstrap: str
    version: str
    cluster_id: str | None
    sasl_bootstrap: str | None = None
    ssl_bootstrap: str | None = None
    ca_file: Path | None = None
    users: Mapping[str, str] = field(default_factory=dict)  # name -> password: admin, reader, nobody
    log_file: Path | None = None
    mode: str = "kraft"
    external: bool = False
    _libs: Path | None = None

    @cached_property
    def libs(self) -> Path:
        """The Kafka jars (for an external cluster fetched only when first needed, e.g. by ConfigCommand)."""
        return self._libs or ensure_kafka_libs(self.version)

    @cached_property
    def config_command(self) -> ConfigCommand:
        """Kafka's ConfigCommand bound to the PLAINTEXT listener (a super user)."""
        return ConfigCommand(self.libs, self.bootstrap)


def _external(bootstrap: str) -> RealKafka:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kqplan-test-harness")
    try:
        cluster_id = admin.describe_cluster().get("cluster_id")
    finally:
        admin.close()
    return RealKafka(bootstrap, kafka_version(), cluster_id, external=True)


def _started(broker: KafkaBroker, libs: Path) -> RealKafka:
    assert broker.tls is not None
    return RealKafka(broker.bootstrap, broker.version, broker.cluster_id, broker.sasl_bootstrap,
                     broker.ssl_bootstrap, broker.tls.ca_file, dict(broker.users), broker.log_file,
                     broker.mode, _libs=libs)


@pytest.fixture(scope="session")
def kafka_libs() -> Path:
    """The jars of the Kafka release under test (downloaded once per machine; a failure fails loudly)."""
    return ensure_kafka_libs(kafka_version())


@pytest.fixture(scope="session")
def real_kafka(request: pytest.FixtureRequest,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealKafka]:
    """The session's real Kafka broker (or the external cluster in ``$KQPLAN_TEST_BOOTSTRAP``)."""
    external = os.environ.get("KQPLAN_TEST_BOOTSTRAP")
    if external:
        yield _external(external)
        return
    libs = request.getfixturevalue("kafka_libs")
    broker = KafkaBroker(libs, tmp_path_factory.mktemp("kafka"), kafka_version(), kafka_mode())
    request.config.stash[_BROKER] = broker  # for the log tail on failures
    with broker:
        yield _started(broker, libs)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark tests that use the broker, directly or via a parametrized ``real_kafka`` target."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        params = callspec.params.values() if callspec else ()
        if MARKER in getattr(item, "fixturenames", ()) or MARKER in params:
            item.add_marker(MARKER)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Reporting:
    """On a failed real-broker test, attach the tail of the broker log to the report."""
    report = yield
    broker = item.config.stash.get(_BROKER, None)
    if report.failed and broker is not None and _uses_broker(item):
        report.sections.append((f"Kafka broker log (tail of {broker.log_file})", tail(broker.log_file)))
    return report


def _uses_broker(item: pytest.Item) -> bool:
    # Marked, or reached through request.getfixturevalue("real_kafka") in another fixture (which
    # collection cannot see); the latter only shows in pytest's private per-test fixture table.
    fixture_defs = getattr(getattr(item, "_request", None), "_fixture_defs", {})
    return item.get_closest_marker(MARKER) is not None or MARKER in fixture_defs
