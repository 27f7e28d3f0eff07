"""The sandbox's wire layer as independent clients see it: librdkafka (confluent-kafka),
kafka-python's admin client, and raw sockets for ApiVersions' quirks (ref §1.1)."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import pytest
from kafka.protocol.metadata import ApiVersionsResponse

from kqplan.sandbox import Sandbox, SandboxConfig
from tests.kafka.broker import KafkaSpec
from tests.kafka.plugin import real_kafka_for, real_kafka_params


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    with Sandbox.start(SandboxConfig(port=0, cluster_id="wire-test-cluster")) as sb:
        yield sb


def raw_request(bootstrap: str, api_key: int, version: int, body: bytes = b"", *,
                flexible_header: bool = False) -> bytes | None:
    """Send one request; the response payload after the correlation id, or None if closed."""
    host, port = bootstrap.rsplit(":", 1)
    client_id = b"raw"
    header = struct.pack(">hhih", api_key, version, 77, len(client_id)) + client_id
    if flexible_header:
        header += b"\0"  # empty tagged fields
    payload = header + body
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        head = sock.recv(4, socket.MSG_WAITALL)
        if len(head) < 4:
            return None
        (size,) = struct.unpack(">i", head)
        data = b""
        while len(data) < size:
            chunk = sock.recv(size - len(data))
            if not chunk:
                return None
            data += chunk
    assert struct.unpack_from(">i", data)[0] == 77
    return data[4:]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_api_versions_supported_versions(sandbox, version):
    # v3 requests are flexible: compact client software name/version and tags in the body
    body = b"\x04kqp\x041.0\x00" if version == 3 else b""
    answer = raw_request(sandbox.bootstrap, 18, version, body, flexible_header=version == 3)
    assert answer is not None
    decoded = ApiVersionsResponse.decode(answer, version=version)  # response header is v0 always
    assert decoded.error_code == 0
    keys = {k.api_key: (k.min_version, k.max_version) for k in decoded.api_keys}
    assert keys[48] == (0, 1)
    assert keys[49] == (0, 1)
    assert keys[3] == (0, 12)


def test_api_versions_too_new_gets_the_v0_unsupported_answer(sandbox):
    answer = raw_request(sandbox.bootstrap, 18, 9, b"\x04kqp\x041.0\x00", flexible_header=True)
    assert answer is not None
    decoded = ApiVersionsResponse.decode(answer, version=0)
    assert decoded.error_code == 35
    assert {k.api_key for k in decoded.api_keys} >= {18, 48, 49}


@pytest.mark.parametrize(("api_key", "version"), [(48, 7), (49, 9), (0, 99)])
@pytest.mark.parametrize("where", ["sandbox", *real_kafka_params()])
def test_a_version_nobody_serves_closes_the_connection_as_kafka_does(request, where, api_key, version):
    real = isinstance(where, KafkaSpec)
    bootstrap = (real_kafka_for(request, where) if real else request.getfixturevalue(where)).bootstrap
    assert raw_request(bootstrap, api_key, version, b"\0" * 16) is None


@pytest.mark.parametrize(("api_key", "version"), [(0, 9), (1, 12)])
def test_an_api_the_sandbox_does_not_serve_closes_the_connection(sandbox, api_key, version):
    assert raw_request(sandbox.bootstrap, api_key, version, b"\0" * 16) is None


def test_librdkafka_bootstraps(sandbox):
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": sandbox.bootstrap, "socket.timeout.ms": 5000})
    metadata = admin.list_topics(timeout=10)
    assert metadata.cluster_id == "wire-test-cluster"
    assert metadata.controller_id == 1
    assert [f"{b.host}:{b.port}" for b in metadata.brokers.values()] == [sandbox.bootstrap]
    described = admin.describe_cluster(request_timeout=10).result(timeout=15)
    assert described.cluster_id == "wire-test-cluster"
    names = {r.api_name for r in sandbox.requests}
    assert {"ApiVersions", "Metadata"} <= names


def test_kafka_python_admin_client(sandbox):
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=sandbox.bootstrap, request_timeout_ms=5000)
    try:
        cluster = admin.describe_cluster()
    finally:
        admin.close()
    assert cluster["cluster_id"] == "wire-test-cluster"
    assert cluster["brokers"][0]["port"] == int(sandbox.bootstrap.rsplit(":", 1)[1])
    assert any(r.api_name == "DescribeCluster" for r in sandbox.requests)
