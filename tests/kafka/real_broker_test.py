"""The real Apache Kafka broker: quota RPCs with kafka-python's generated classes, authorization,
ConfigCommand cross-checks with kqplan's backend, and the harness's own lifecycle.

Entity names are unique per test (one broker serves the whole session); Kafka applies quota
changes asynchronously (reference §2.8), so reads after writes poll with a bound.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import AlterClientQuotasRequest as AlterReq
from kafka.protocol.admin import DescribeClientQuotasRequest as DescribeReq

from kqplan.cluster.connection import config_from_properties
from kqplan.cluster.kafka import KafkaCluster
from kqplan.core.cluster import Alteration, DescribeFilter, FilterComponent, MatchType, Op
from kqplan.core.entity import Entity
from kqplan.core.state import QuotaState
from tests.kafka import broker as harness
from tests.kafka.broker import KafkaBroker, api_versions_answer, die_with_parent, stop_process, version_tuple
from tests.kafka.configcommand import ConfigCommandError, Select, parse_describe, parse_entity
from tests.kafka.plugin import selected_specs

EXACT, DEFAULT = 0, 1
CLUSTER_AUTHORIZATION_FAILED = 31


def unique(tag: str) -> str:
    return f"kqplan-rb-{tag}-{uuid.uuid4().hex[:8]}"


@contextmanager
def admin_client(bootstrap: str, **settings: Any) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kqplan-real-broker-test", **settings)
    try:
        yield client
    finally:
        client.close()


def sasl_settings(real_kafka, user: str) -> dict[str, Any]:
    if real_kafka.sasl_bootstrap is None:
        pytest.skip("no SASL listener on an external cluster")
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
            "sasl_plain_username": user, "sasl_plain_password": real_kafka.users[user]}


def send(client: KafkaAdminClient, request: Any) -> Any:
    # kafka-python has no quota API; this is the least-loaded-broker route (reference §2(c)).
    return client._manager.run(client._manager.send, request)


def described(response: Any) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    """A DescribeClientQuotas response as {((type, name), ...): {key: value}} (types sorted)."""
    assert response.error_code == 0, (response.error_code, response.error_message)
    return {tuple(sorted([(e.entity_type, e.entity_name) for e in entry.entity], key=_type_order)):
            {v.key: v.value for v in entry.values} for entry in response.entries}


def _type_order(part: tuple[str, str | None]) -> int:
    return ("user", "client-id", "ip").index(part[0])


def poll(read: Callable[[], Any], done: Callable[[Any], bool], timeout: float = 15.0) -> Any:
    """``read()`` until ``done(value)`` holds or ``timeout`` passes; the last value either way."""
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


def kqplan_cluster(real_kafka) -> KafkaCluster:
    return KafkaCluster(config_from_properties("", bootstrap=real_kafka.bootstrap,
                                               source="client.properties", env={}))


def user_filter(name: str) -> DescribeFilter:
    return DescribeFilter((FilterComponent("user", MatchType.EXACT, name),))


# ---------------------------------------------------------------------------------------------
# Quota RPCs with kafka-python's generated classes


@pytest.mark.parametrize("version", [0, 1])
def test_describe_alter_round_trip_with_generated_classes(real_kafka, version):
    user, client = unique(f"v{version}"), unique("client")
    E, Ent, Op_ = AlterReq.EntryData, AlterReq.EntryData.EntityData, AlterReq.EntryData.OpData
    pinned = {"min_version": version, "max_version": version}

    def alter(ops_by_entity: Mapping[Any, Mapping[str, float | None]],
              validate_only: bool = False) -> list[tuple[int, str | None]]:
        entries = [E(entity=[Ent(entity_type=t, entity_name=n) for t, n in entity],
                     ops=[Op_(key=k, value=0.0 if v is None else v, remove=v is None)
                          for k, v in ops.items()])
                   for entity, ops in ops_by_entity.items()]
        response = send(c, AlterReq(entries=entries, validate_only=validate_only, **pinned))
        return sorted((e.error_code, e.error_message) for e in response.entries)

    def describe() -> dict[Any, dict[str, float]]:
        component = DescribeReq.ComponentData(entity_type="user", match_type=EXACT, match=user)
        return described(send(c, DescribeReq(components=[component], strict=False, **pinned)))

    mine = {(("user", user),): {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0},
            (("user", user), ("client-id", client)): {"request_percentage": 12.5},
            (("user", user), ("client-id", None)): {"controller_mutation_rate": 0.5}}
    with admin_client(real_kafka.bootstrap) as c:
        assert alter(mine, validate_only=True) == [(0, None)] * 3
        assert describe() == {}
        assert alter(mine) == [(0, None)] * 3
        assert poll(describe, lambda s: s == mine) == mine
        removal = {entity: dict.fromkeys(values) for entity, values in mine.items()}
        assert alter(removal) == [(0, None)] * 3
        assert poll(describe, lambda s: s == {}) == {}


def test_default_entity_is_null_on_the_wire(real_kafka):
    """MatchType DEFAULT for client-id under an exact user: only the {user, <default client>} entity."""
    user = unique("dflt")
    E, Ent, Op_ = AlterReq.EntryData, AlterReq.EntryData.EntityData, AlterReq.EntryData.OpData
    entity = [Ent(entity_type="user", entity_name=user), Ent(entity_type="client-id", entity_name=None)]
    components = [DescribeReq.ComponentData(entity_type="user", match_type=EXACT, match=user),
                  DescribeReq.ComponentData(entity_type="client-id", match_type=DEFAULT, match=None)]
    with admin_client(real_kafka.bootstrap) as c:
        response = send(c, AlterReq(entries=[E(entity=entity, ops=[Op_(key="producer_byte_rate", value=5.0,
                                                                          remove=False)])],
                                    validate_only=False))
        # The entity comes back as sent, parts in HashMap order (reference §6.14).
        assert [(e.error_code, sorted([(x.entity_type, x.entity_name) for x in e.entity], key=_type_order))
                for e in response.entries] == [(0, [("user", user), ("client-id", None)])]
        try:
            got = poll(lambda: described(send(c, DescribeReq(components=components, strict=True))), bool)
            assert got == {(("user", user), ("client-id", None)): {"producer_byte_rate": 5.0}}
        finally:
            send(c, AlterReq(entries=[E(entity=entity, ops=[Op_(key="producer_byte_rate", value=0.0,
                                                                 remove=True)])], validate_only=False))


# ---------------------------------------------------------------------------------------------
# Authorization (reference §1.5)


@pytest.mark.parametrize("validate_only", [True, False])
def test_reader_may_describe_but_alter_is_denied(real_kafka, validate_only):
    user = unique("denied")
    E, Ent, Op_ = AlterReq.EntryData, AlterReq.EntryData.EntityData, AlterReq.EntryData.OpData
    entries = [E(entity=[Ent(entity_type="user", entity_name=user)],
                 ops=[Op_(key="producer_byte_rate", value=1.0, remove=False)]),
               E(entity=[Ent(entity_type="client-id", entity_name=None)],
                 ops=[Op_(key="consumer_byte_rate", value=1.0, remove=False)])]
    with admin_client(real_kafka.sasl_bootstrap, **sasl_settings(real_kafka, "reader")) as c:
        assert send(c, DescribeReq(components=[], strict=False)).error_code == 0
        response = send(c, AlterReq(entries=entries, validate_only=validate_only))
    # Every entry carries 31 with the generic message (the controller denies the whole request).
    assert {e.entity[0].entity_name: (e.error_code, e.error_message) for e in response.entries} == \
        dict.fromkeys((user, None), (CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."))


def test_nobody_may_not_describe(real_kafka):
    with admin_client(real_kafka.sasl_bootstrap, **sasl_settings(real_kafka, "nobody")) as c:
        response = send(c, DescribeReq(components=[], strict=False))
    assert (response.error_code, response.error_message, response.entries) == \
        (CLUSTER_AUTHORIZATION_FAILED, None, None)


def test_admin_over_sasl_is_a_super_user(real_kafka):
    with admin_client(real_kafka.sasl_bootstrap, **sasl_settings(real_kafka, "admin")) as c:
        assert send(c, DescribeReq(components=[], strict=False)).error_code == 0


# ---------------------------------------------------------------------------------------------
# ConfigCommand (Kafka's own client) against kqplan's backend, both ways


@pytest.fixture
def undo(real_kafka) -> Iterator[list[Alteration]]:
    """Alterations to apply after the test, whatever happened (removals of what it set)."""
    pending: list[Alteration] = []
    yield pending
    if pending:
        with kqplan_cluster(real_kafka) as c:
            c.alter(pending, validate_only=False)


def removal_of(alteration: Alteration) -> Alteration:
    return Alteration(alteration.entity, tuple(Op(op.key, None) for op in alteration.ops))


def test_kqplan_alters_and_configcommand_sees_it(real_kafka, undo):
    user, client = unique("cc1"), unique("client")
    # The default user is shared broker state: a value no other test uses, removed afterwards.
    changes = [Alteration(Entity.user(user), (Op("producer_byte_rate", 1024.0),
                                              Op("consumer_byte_rate", 1.5e7))),
               Alteration(Entity.user_client(user, client), (Op("request_percentage", 33.25),)),
               Alteration(Entity.user(None), (Op("controller_mutation_rate", 7.75),))]
    undo.extend(removal_of(a) for a in changes)
    expected = {a.entity: {op.key: op.value for op in a.ops} for a in changes}
    with kqplan_cluster(real_kafka) as c:
        assert all(r.ok for r in c.alter(changes, validate_only=False))
        poll(c.describe, lambda s: all(s.get(e) == v for e, v in expected.items()))
    cc = real_kafka.config_command
    got = cc.describe(Select.named("users", user)).quotas
    assert got == {(("user", user),): expected[Entity.user(user)]}
    got = cc.describe(Select.named("users", user), Select.named("clients", client)).quotas
    assert got == {(("user", user), ("client-id", client)): {"request_percentage": 33.25}}
    got = cc.describe(Select.default_of("users")).quotas
    assert got[(("user", None),)]["controller_mutation_rate"] == 7.75
    assert "the default user-principal" in cc.describe(Select.default_of("users")).stdout


def test_configcommand_alters_and_kqplan_sees_it(real_kafka, undo):
    user = unique("cc2")
    literal = Entity.user_client(user, "<default>")  # a real client named "<default>", not the default
    default_client = Entity.user_client(user, None)
    undo.extend([Alteration(literal, (Op("producer_byte_rate", None),)),
                 Alteration(default_client, (Op("producer_byte_rate", None),
                                             Op("consumer_byte_rate", None)))])
    cc = real_kafka.config_command
    cc.alter(Select.named("users", user), Select.default_of("clients"),
             add={"producer_byte_rate": 4096.0, "consumer_byte_rate": 8192.0})
    cc.alter(Select.named("users", user), Select.named("clients", "<default>"),
             add={"producer_byte_rate": 3.0})
    with kqplan_cluster(real_kafka) as c:
        def state() -> QuotaState:
            return c.describe(user_filter(user))

        expected = {default_client: {"producer_byte_rate": 4096.0, "consumer_byte_rate": 8192.0},
                    literal: {"producer_byte_rate": 3.0}}
        assert poll(state, lambda s: s == expected) == expected
        cc.alter(Select.named("users", user), Select.default_of("clients"), delete=["consumer_byte_rate"])
        expected[default_client] = {"producer_byte_rate": 4096.0}
        assert poll(state, lambda s: s == expected) == expected
    # And ConfigCommand reads both back, telling the literal name from the default.
    got = cc.describe(Select.named("users", user), Select("clients")).quotas
    assert {Entity.of(e): v for e, v in got.items()} == expected


def test_configcommand_fails_loudly(real_kafka):
    user = unique("ccerr")
    with pytest.raises(ConfigCommandError) as err:  # the delete check is client-side (reference §6.19)
        real_kafka.config_command.alter(Select.named("users", user), delete=["producer_byte_rate"])
    assert err.value.returncode != 0
    assert "Invalid config(s): producer_byte_rate" in err.value.stdout + err.value.stderr


def test_configcommand_output_parsing():
    assert parse_entity("user-principal 'a, b', the default client-id") == \
        (("user", "a, b"), ("client-id", None))
    assert parse_entity("the default ip") == (("ip", None),)
    stdout = ("Quota configs for client-id 'c' are producer_byte_rate=1.0E7, x=NaN\n"
              "SCRAM credential configs for user-principal 'u' are SCRAM-SHA-256=iterations=4096\n")
    assert parse_describe(stdout) == {
        (("client-id", "c"),): {"producer_byte_rate": 1e7, "x": pytest.approx(float("nan"), nan_ok=True)}}


# ---------------------------------------------------------------------------------------------
# The harness itself


def test_fixture_describes_the_broker(real_kafka, kafka_spec):
    assert real_kafka.spec == kafka_spec
    assert kafka_spec in selected_specs()
    assert any(real_kafka.libs.glob(f"kafka-clients-{real_kafka.version}.jar"))
    with kqplan_cluster(real_kafka) as c:
        identity = c.identity()
    assert identity.cluster_id == real_kafka.cluster_id
    # kqplan tells the metadata mode from the ApiVersions answer, and the release only as a lower bound.
    assert identity.mode == real_kafka.mode
    assert identity.version is not None
    assert identity.version.startswith(">=")
    assert version_tuple(identity.version[2:]) <= version_tuple(real_kafka.version)
    if real_kafka.external:
        return
    assert set(real_kafka.users) == {"admin", "reader", "nobody"}
    assert real_kafka.ca_file.read_text().startswith("-----BEGIN CERTIFICATE-----")
    assert real_kafka.log_file.stat().st_size > 0


def _processes_mentioning(text: str) -> list[int]:
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text.encode() in cmdline.read_bytes():
                pids.append(int(cmdline.parent.name))
        except OSError:  # exited meanwhile
            continue
    return pids


@pytest.mark.slow
@pytest.mark.real_kafka
def test_stop_leaves_no_jvm(kafka_libs, kafka_spec, tmp_path):
    """A second, short-lived broker: up, answering, then stopped by PID with nothing left behind
    (in ZooKeeper mode, its ZooKeeper JVM too)."""
    if os.environ.get("KQPLAN_TEST_BOOTSTRAP"):
        pytest.skip("an external cluster is configured: no local JVM")
    broker = KafkaBroker(kafka_libs, tmp_path / "second", kafka_spec.version, kafka_spec.mode)
    with broker:
        pid = broker.pid
        assert pid is not None
        assert Path(f"/proc/{pid}").exists()
        assert api_versions_answer(broker.host, broker.ports["PLAINTEXT"])
        jvms = {pid} | ({broker.zookeeper.pid} if broker.zookeeper else set())
        assert set(_processes_mentioning(str(broker.workdir))) == jvms
        assert (broker.zookeeper is not None) == kafka_spec.zookeeper
    assert not Path(f"/proc/{pid}").exists()
    assert _processes_mentioning(str(broker.workdir)) == []
    assert not api_versions_answer(broker.host, broker.ports["PLAINTEXT"], timeout=0.5)
    assert broker.process is not None
    assert broker.stop() == broker.process.returncode  # idempotent


def test_a_failed_download_fails_loudly_and_leaves_nothing(tmp_path):
    # Offline (-o) and a release that does not exist: Maven fails fast, without the network.
    with pytest.raises(harness.ProvisioningError) as err:
        harness.ensure_kafka_libs("0.0.0-none", cache=tmp_path, maven_args=["-o"])
    assert "Apache Kafka 0.0.0-none" in str(err.value)
    assert "kafka_2.13:jar:0.0.0-none" in str(err.value)  # mvn's own output is in the message
    assert list((tmp_path / "kafka-0.0.0-none").iterdir()) == []  # no half-download to reuse


def test_stop_process_falls_back_to_sigkill():
    stubborn = subprocess.Popen([sys.executable, "-c",
                                 "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                                 "print('ready', flush=True); time.sleep(60)"], stdout=subprocess.PIPE)
    assert stubborn.stdout is not None
    assert stubborn.stdout.readline() == b"ready\n"
    started = time.monotonic()
    assert stop_process(stubborn, grace=0.5) == -signal.SIGKILL
    assert time.monotonic() - started < 5
    assert not Path(f"/proc/{stubborn.pid}").exists()
    stubborn.stdout.close()


def test_the_jvm_dies_with_its_parent(tmp_path):
    """If pytest is killed outright (no atexit, no teardown), the kernel still stops the broker."""
    if not die_with_parent():
        pytest.skip("no setpriv: only atexit and the fixture teardown stop the broker")
    pid_file = tmp_path / "child.pid"
    parent = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, time; "
        f"child = subprocess.Popen({[*die_with_parent(), 'sleep', '60']!r}); "
        f"open({str(pid_file)!r}, 'w').write(str(child.pid)); time.sleep(60)")])
    child_pid = int(poll(lambda: pid_file.exists() and pid_file.read_text(), bool, timeout=10) or 0)
    assert child_pid
    # setpriv arms the death signal just before it execs: wait for the exec, or the kill races it.
    assert poll(lambda: _cmdline(child_pid).startswith(b"sleep"), bool, timeout=5)
    parent.kill()
    parent.wait()
    try:
        assert poll(lambda: not _cmdline(child_pid), bool, timeout=5)  # gone, or a zombie of init's
    finally:
        if _cmdline(child_pid).startswith(b"sleep"):
            os.kill(child_pid, signal.SIGKILL)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
