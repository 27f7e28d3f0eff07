"""pytest plugin: the real Apache Kafka brokers (fixture ``real_kafka``, marker ``real_kafka``).

The brokers form a matrix (``KQPLAN_KAFKA_MATRIX``, default: the pom's 4.x pin in KRaft mode plus
3.9.1 in ZooKeeper mode; see :func:`tests.kafka.broker.kafka_matrix`). Every test that reaches the
real broker runs once per entry, with the entry in its id (``[real_kafka-3.9.1-zookeeper]``):

- a test or fixture that takes ``real_kafka`` (or ``kafka_spec``/``kafka_libs``) is parametrized
  over the matrix here;
- a fixture that chooses between the sandbox and the real broker lists ``real_kafka_params()``
  among its params and calls :func:`real_kafka_for` with the :class:`KafkaSpec` it got.

Brokers start on first use and one at a time: starting the next stops the previous one, and the
tests are ordered by broker so that each starts once (two cores: two idle JVMs cost the tests
their CPU).

The whole matrix (4.3.1 KRaft, 3.9.1 ZooKeeper, 3.9.1 KRaft, 3.6.2 ZooKeeper, 2.8.2 ZooKeeper),
real-broker tests only::

    KQPLAN_KAFKA_MATRIX=all .venv/bin/python -m pytest -m real_kafka

One entry: ``KQPLAN_KAFKA_MATRIX=2.8.2-zookeeper``; any list: ``KQPLAN_KAFKA_MATRIX=3.9.1-kraft,3.6.2-zk``.
Each release's jars are fetched from Maven Central once and cached (``$KQPLAN_CACHE``).

``KQPLAN_TEST_BOOTSTRAP=host:port`` points the tests at an external cluster instead
(PLAINTEXT only, no JVM started here; ``KQPLAN_KAFKA_VERSION``/``KQPLAN_KAFKA_MODE`` say what it runs).
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path

import pytest

from tests.kafka.broker import (
    KafkaBroker,
    KafkaSpec,
    ensure_kafka_libs,
    kafka_matrix,
    kafka_mode,
    kafka_version,
    tail,
)
from tests.kafka.configcommand import ConfigCommand

MARKER = "real_kafka"
FLOODS = "floods_broker"
Reporting = Generator[None, pytest.TestReport, pytest.TestReport]
_POOL = pytest.StashKey["BrokerPool"]()


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
    proxied: tuple[str, int] | None = None
    """(the broker's PROXIED listener, the port it is advertised at): a fault proxy listening on
    that port and forwarding to that listener sits in the path of every request, the addresses
    Metadata returns included. None for an external cluster."""

    @property
    def spec(self) -> KafkaSpec:
        return KafkaSpec(self.version, self.mode)

    @property
    def zookeeper(self) -> bool:
        """ZooKeeper mode: other rules for the same RPCs (docs and reference: kafka-quota-rules.md)."""
        return self.spec.zookeeper

    @cached_property
    def libs(self) -> Path:
        """The Kafka jars (for an external cluster fetched only when first needed, e.g. by ConfigCommand)."""
        return self._libs or ensure_kafka_libs(self.version)

    @cached_property
    def config_command(self) -> ConfigCommand:
        """Kafka's ConfigCommand bound to the PLAINTEXT listener (a super user)."""
        return ConfigCommand(self.libs, self.bootstrap)


@cache
def selected_specs() -> tuple[KafkaSpec, ...]:
    """The matrix this session runs (one entry for an external cluster: what it says it runs)."""
    if os.environ.get("KQPLAN_TEST_BOOTSTRAP"):
        return (KafkaSpec(kafka_version(), kafka_mode()),)
    return kafka_matrix()


def spec_id(spec: KafkaSpec) -> str:
    """The test-id part naming a broker: ``real_kafka-4.3.1-kraft`` (``-k 3.9.1-zookeeper`` selects one)."""
    return f"{MARKER}-{spec.id}"


def real_kafka_params() -> list[object]:
    """One ``pytest.param`` per selected broker, for a fixture parametrized over targets::

        @pytest.fixture(params=["sandbox", *real_kafka_params()])
        def target(request):
            if isinstance(request.param, KafkaSpec):
                broker = real_kafka_for(request, request.param)
    """
    return [pytest.param(spec, id=spec_id(spec), marks=pytest.mark.real_kafka) for spec in selected_specs()]


def real_kafka_for(request: pytest.FixtureRequest, spec: KafkaSpec) -> RealKafka:
    """The running broker for ``spec`` (started now if another one, or none, is running)."""
    pool: BrokerPool = request.getfixturevalue("kafka_pool")
    return pool.get(spec)


class BrokerPool:
    """The session's brokers: at most one running, started on first use, each started once."""

    def __init__(self, workdirs: pytest.TempPathFactory) -> None:
        self._workdirs = workdirs
        self.external = os.environ.get("KQPLAN_TEST_BOOTSTRAP")  # host:port of a cluster not started here
        self.broker: KafkaBroker | None = None
        self._current: tuple[KafkaSpec, RealKafka] | None = None
        self._failed: dict[KafkaSpec, str] = {}
        self.starts: list[KafkaSpec] = []  # in order: each once, unless a plugin reordered the tests
        self.startup_seconds: dict[KafkaSpec, float] = {}  # to ready with ACLs, the last start of each

    def get(self, spec: KafkaSpec) -> RealKafka:
        if self._current is not None and self._current[0] == spec:
            return self._current[1]
        if spec in self._failed:  # one start-up failure per broker, not one per test (minutes each)
            pytest.fail(f"Kafka {spec.id} failed to start earlier in this session:\n{self._failed[spec]}",
                        pytrace=False)
        # Asked for again after another broker ran (a plugin reordered the tests): start it afresh,
        # correct but slower; ``starts`` shows it.
        self.stop()
        self.starts.append(spec)
        try:
            real = self._external_kafka(spec) if self.external else self._start(spec)
        except Exception as err:
            self._failed[spec] = f"{type(err).__name__}: {err}"
            raise
        self._current = (spec, real)
        return real

    def _start(self, spec: KafkaSpec) -> RealKafka:
        libs = ensure_kafka_libs(spec.version)
        self.broker = KafkaBroker(libs, self._workdirs.mktemp(f"kafka-{spec.id}"), spec.version, spec.mode)
        self.broker.start()
        self.startup_seconds[spec] = self.broker.timings["acls"]
        assert self.broker.tls is not None
        b = self.broker
        return RealKafka(b.bootstrap, b.version, b.cluster_id, b.sasl_bootstrap, b.ssl_bootstrap,
                         b.tls.ca_file, dict(b.users), b.log_file, b.mode, _libs=libs,
                         proxied=(b.address("PROXIED"), b.ports["PROXY"]))

    def _external_kafka(self, spec: KafkaSpec) -> RealKafka:
        from kafka.admin import KafkaAdminClient

        assert self.external is not None
        admin = KafkaAdminClient(bootstrap_servers=self.external, client_id="kqplan-test-harness")
        try:
            cluster_id = admin.describe_cluster().get("cluster_id")
        finally:
            admin.close()
        return RealKafka(self.external, spec.version, cluster_id, mode=spec.mode, external=True)

    def stop(self) -> None:
        """Stop the running broker, if any (the next :meth:`get` starts the one it asks for)."""
        self._current = None
        if self.broker is not None:
            self.broker.stop()
            self.broker = None


@pytest.fixture(scope="session")
def kafka_pool(request: pytest.FixtureRequest,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerPool]:
    """The session's :class:`BrokerPool`; the last broker stops with the session."""
    pool = BrokerPool(tmp_path_factory)
    request.config.stash[_POOL] = pool  # for the log tail on failures
    try:
        yield pool
    finally:
        pool.stop()


@pytest.fixture(scope="session")
def kafka_spec(request: pytest.FixtureRequest) -> KafkaSpec:
    """The matrix entry this test runs against (parametrized by :func:`pytest_generate_tests`)."""
    spec = getattr(request, "param", None)
    if not isinstance(spec, KafkaSpec):
        raise pytest.UsageError(
            "real_kafka/kafka_spec reached through request.getfixturevalue: the test has no matrix "
            "entry. Parametrize the calling fixture with real_kafka_params() and use real_kafka_for().")
    return spec


@pytest.fixture(scope="session")
def kafka_libs(kafka_spec: KafkaSpec) -> Path:
    """The jars of the Kafka release under test (downloaded once per machine; a failure fails loudly)."""
    return ensure_kafka_libs(kafka_spec.version)


@pytest.fixture(scope="session")
def real_kafka(kafka_spec: KafkaSpec, kafka_pool: BrokerPool) -> RealKafka:
    """This test's matrix entry's real broker (or the external cluster in ``$KQPLAN_TEST_BOOTSTRAP``)."""
    return kafka_pool.get(kafka_spec)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{FLOODS}: writes thousands of entities to the shared real broker; runs last on it "
        "(Kafka 2.8 in ZooKeeper mode keeps an empty ZooKeeper node for every entity ever set, and "
        "reads them all on each describe: ~4 s per describe after 5000)")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run every test that takes the broker (directly or through a fixture) once per matrix entry."""
    if "kafka_spec" in metafunc.fixturenames:
        specs = selected_specs()
        # Session scope: pytest then groups the tests of one broker together by itself.
        metafunc.parametrize("kafka_spec", specs, indirect=True, scope="session",
                             ids=[spec_id(s) for s in specs])


def specs_of(item: pytest.Item) -> set[KafkaSpec]:
    """The matrix entries among a test's parameters (none for a test that never reaches the broker)."""
    callspec = getattr(item, "callspec", None)
    return {v for v in callspec.params.values() if isinstance(v, KafkaSpec)} if callspec else set()


def pytest_itemcollected(item: pytest.Item) -> None:
    """Mark the tests that use the broker (before ``-m`` selects by marker)."""
    if specs_of(item):
        item.add_marker(MARKER)


@pytest.hookimpl(trylast=True)  # after pytest's own reordering, which would undo the grouping
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Order the tests by broker so that each starts once.

    Other tests keep their place, with those of the first broker; tests marked ``floods_broker``
    come last among their broker's. A test holding two different entries (it reached the broker
    two ways) is deselected: it would need two brokers at once.
    """
    order = {spec: index for index, spec in enumerate(selected_specs())}
    mixed: list[pytest.Item] = []
    keyed: list[tuple[tuple[int, bool], pytest.Item]] = []
    for item in items:
        specs = specs_of(item)
        if len(specs) > 1:
            mixed.append(item)
        else:
            broker = min((order.get(s, len(order)) for s in specs), default=0)
            keyed.append(((broker, bool(specs) and item.get_closest_marker(FLOODS) is not None), item))
    if mixed:
        config.hook.pytest_deselected(items=mixed)
    keyed.sort(key=lambda pair: pair[0])  # stable: the order within a broker's group is kept
    items[:] = [item for _, item in keyed]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Reporting:
    """On a failed real-broker test, attach the tail of the broker's log (and ZooKeeper's) to the report."""
    report = yield
    pool = item.config.stash.get(_POOL, None)
    broker = pool.broker if pool is not None else None
    if report.failed and broker is not None and _uses_broker(item):
        report.sections.append((f"Kafka broker log (tail of {broker.log_file})", tail(broker.log_file)))
        if broker.zookeeper is not None:
            report.sections.append((f"ZooKeeper log (tail of {broker.zookeeper_log_file})",
                                    tail(broker.zookeeper_log_file)))
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """Which brokers the session started, in order, and how long each took to be ready."""
    pool = config.stash.get(_POOL, None)
    if pool is None or not pool.starts:
        return
    def how(spec: KafkaSpec) -> str:
        if spec in pool.startup_seconds:
            return f"{pool.startup_seconds[spec]:.1f} s"
        return "external" if pool.external else "failed"

    started = ", ".join(f"{spec.id} ({how(spec)})" for spec in pool.starts)
    terminalreporter.write_line(f"Kafka brokers started: {started}")


def _uses_broker(item: pytest.Item) -> bool:
    return item.get_closest_marker(MARKER) is not None

