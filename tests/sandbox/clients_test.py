"""Independent clients on every kind of sandbox listener (PLAINTEXT, SASL_PLAINTEXT, SSL,
SASL_SSL): kafka-python's KafkaAdminClient (with the quota RPCs through its connection
manager, as it has no quota methods), confluent-kafka/librdkafka, and kqplan's KafkaCluster
on SASL_SSL. wire_test.py and tests/cluster/integration_test.py cover the plain listener and
SASL/TLS one at a time."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    DescribeClientQuotasRequest,
)

from kqplan.cluster.connection import config_from_properties
from kqplan.cluster.failures import AuthenticationFailed
from kqplan.cluster.kafka import KafkaCluster
from kqplan.core.cluster import Alteration, Op
from kqplan.core.entity import Entity
from kqplan.core.errors import KqplanError
from kqplan.sandbox import Listener, Operation, Sandbox, SandboxConfig, SaslUser
from tests.cluster.tls import Pki, make_pki

CLUSTER_ID = "clients-test-cluster"
USERS = {"admin": SaslUser("admin-secret", super_user=True),
         "reader": SaslUser("reader-secret", frozenset({Operation.DESCRIBE_CONFIGS})),
         "nobody": SaslUser("nobody-secret")}
PLAIN, SASL, SSL, SASL_SSL = 0, 1, 2, 3


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def sandbox(pki) -> Iterator[Sandbox]:
    tls = {"tls_cert": pki.server_cert, "tls_key": pki.server_key}
    config = SandboxConfig(port=0, cluster_id=CLUSTER_ID, users=USERS, extra_listeners=(
        Listener(sasl=True), Listener(**tls), Listener(sasl=True, **tls)))
    with Sandbox.start(config) as sb:
        yield sb


# -- kafka-python ------------------------------------------------------------------------------------

def kafka_python_admin(sandbox: Sandbox, listener: int, pki: Pki, user: str = "admin") -> Any:
    from kafka import KafkaAdminClient

    options: dict[str, Any] = {"security_protocol": sandbox.config.listeners[listener].protocol}
    if listener in (SASL, SASL_SSL):
        options.update(sasl_mechanism="PLAIN", sasl_plain_username=user,
                       sasl_plain_password=USERS[user].password)
    if listener in (SSL, SASL_SSL):
        options.update(ssl_cafile=str(pki.ca))
    return KafkaAdminClient(bootstrap_servers=sandbox.address(listener), request_timeout_ms=5000,
                            **options)


@pytest.mark.parametrize("listener", [PLAIN, SASL, SSL, SASL_SSL])
def test_kafka_python_describe_cluster_on_every_listener(sandbox, pki, listener):
    admin = kafka_python_admin(sandbox, listener, pki)
    try:
        cluster = admin.describe_cluster()
    finally:
        admin.close()
    host, port = sandbox.address(listener).rsplit(":", 1)
    assert cluster["cluster_id"] == CLUSTER_ID
    assert cluster["controller_id"] == 1
    assert [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [(1, host, int(port))]


@pytest.mark.parametrize("version", [0, 1])
def test_kafka_python_quota_rpcs_through_its_connection_manager(sandbox, pki, version):
    # KafkaAdminClient has no quota methods (clients-and-spark §2c): send the generated requests
    admin = kafka_python_admin(sandbox, SASL_SSL, pki)
    manager = admin._manager
    E = AlterClientQuotasRequest.EntryData
    C = DescribeClientQuotasRequest.ComponentData
    try:
        alter = AlterClientQuotasRequest(version=version, validate_only=False, entries=[
            E(entity=[E.EntityData(entity_type="client-id", entity_name=None)],
              ops=[E.OpData(key="consumer_byte_rate", value=4096.0, remove=False)])])
        altered = manager.run(manager.send, alter)
        described = manager.run(manager.send, DescribeClientQuotasRequest(
            version=version, strict=True, components=[C(entity_type="client-id", match_type=1, match=None)]))
    finally:
        admin.close()
    assert [(e.error_code, e.error_message) for e in altered.entries] == [(0, None)]
    assert [([(x.entity_type, x.entity_name) for x in e.entity], [(v.key, v.value) for v in e.values])
            for e in described.entries] == [([("client-id", None)], [("consumer_byte_rate", 4096.0)])]
    assert sandbox.state == {Entity.client(None): {"consumer_byte_rate": 4096.0}}


def test_kafka_python_reader_is_denied_alter_by_acl(sandbox, pki):
    admin = kafka_python_admin(sandbox, SASL, pki, user="reader")
    manager = admin._manager
    E = AlterClientQuotasRequest.EntryData
    try:
        altered = manager.run(manager.send, AlterClientQuotasRequest(version=1, validate_only=False, entries=[
            E(entity=[E.EntityData(entity_type="user", entity_name="x")],
              ops=[E.OpData(key="producer_byte_rate", value=1.0, remove=False)])]))
    finally:
        admin.close()
    # ref §1.5: every entry gets 31 with Errors' generic message
    assert [(e.error_code, e.error_message) for e in altered.entries] == [
        (31, "Cluster authorization failed.")]
    assert sandbox.state == {}


# -- confluent-kafka (librdkafka) ----------------------------------------------------------------------

def librdkafka_config(sandbox: Sandbox, listener: int, pki: Pki,
                      password: str | None = None) -> dict[str, Any]:
    config: dict[str, Any] = {"bootstrap.servers": sandbox.address(listener), "socket.timeout.ms": 5000,
                              "security.protocol": sandbox.config.listeners[listener].protocol.lower()}
    if listener in (SASL, SASL_SSL):
        config.update({"sasl.mechanisms": "PLAIN", "sasl.username": "reader",
                       "sasl.password": password or USERS["reader"].password})
    if listener in (SSL, SASL_SSL):
        config["ssl.ca.location"] = str(pki.ca)
    return config


@pytest.mark.parametrize("listener", [SASL, SSL, SASL_SSL])
def test_librdkafka_list_topics_and_describe_cluster_on_secured_listeners(sandbox, pki, listener):
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(librdkafka_config(sandbox, listener, pki))
    metadata = admin.list_topics(timeout=10)
    assert (metadata.cluster_id, metadata.controller_id) == (CLUSTER_ID, 1)
    assert [f"{b.host}:{b.port}" for b in metadata.brokers.values()] == [sandbox.address(listener)]
    described = admin.describe_cluster(request_timeout=10).result(timeout=15)
    assert described.cluster_id == CLUSTER_ID
    assert [n.id for n in described.nodes] == [1]
    # librdkafka bootstraps with ApiVersions v3 then Metadata (clients-and-spark §3)
    versions = {(r.api_name, r.api_version) for r in sandbox.requests}
    assert ("ApiVersions", 3) in versions
    assert any(name == "Metadata" and v in (4, 12) for name, v in versions)
    if listener in (SASL, SASL_SSL):
        assert {"SaslHandshake", "SaslAuthenticate"} <= {name for name, _ in versions}


def test_librdkafka_reports_wrong_sasl_credentials_as_an_authentication_error(sandbox, pki):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    seen: list[Any] = []
    config = librdkafka_config(sandbox, SASL, pki, password="wrong")
    # error_cb runs from poll(); a quiet logger and a slow reconnect keep the output readable
    config.update({"error_cb": seen.append, "log_level": 0, "reconnect.backoff.ms": 1000})
    admin = AdminClient(config)
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=2)
    admin.poll(0.5)
    assert any(e.code() == KafkaError._AUTHENTICATION and "Invalid username or password" in e.str()
               for e in seen), [e.str() for e in seen]


# -- kqplan's client on SASL_SSL ---------------------------------------------------------------------

def kqplan_sasl_ssl(sandbox: Sandbox, pki: Pki, user: str, password: str) -> KafkaCluster:
    props = (f"security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username={user}\n"
             f"sasl.password={password}\nssl.truststore.type=PEM\nssl.truststore.location={pki.ca}\n")
    return KafkaCluster(config_from_properties(props, bootstrap=sandbox.address(SASL_SSL),
                                               source="client.properties", env={}))


def test_kqplan_round_trip_on_sasl_ssl(sandbox, pki):
    change = Alteration(Entity.user_client("alice", "etl"), (Op("request_percentage", 50.0),))
    with kqplan_sasl_ssl(sandbox, pki, "admin", "admin-secret") as c:
        assert c.identity().cluster_id == CLUSTER_ID
        assert c.alter([change], validate_only=False)[0].ok
        assert c.describe() == {Entity.user_client("alice", "etl"): {"request_percentage": 50.0}}


def test_kqplan_wrong_password_on_sasl_ssl_is_an_authentication_failure(sandbox, pki):
    with kqplan_sasl_ssl(sandbox, pki, "admin", "wrong") as c, pytest.raises(AuthenticationFailed) as failed:
        c.describe()
    assert "authentication failed" in failed.value.message
    assert "admin" in failed.value.message


def test_kqplan_nobody_may_not_describe_on_sasl_ssl(sandbox, pki):
    with kqplan_sasl_ssl(sandbox, pki, "nobody", "nobody-secret") as c, pytest.raises(KqplanError) as failed:
        c.describe()
    assert "not authorized to describe client quotas" in failed.value.message
