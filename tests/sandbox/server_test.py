"""The sandbox's wire server byte by byte (raw sockets, kafka-python's generated classes):
every version of the APIs it serves, framing, SASL on the wire, the request log, the stop
signal, and a 100k-entity describe/alter through kqplan's own client.

Complements wire_test.py (ApiVersions quirks, unknown APIs, librdkafka/kafka-python
bootstrap) and process_test.py (``--state`` under kill -9, ``--sasl-users``).
"""

from __future__ import annotations

import signal
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
)
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from kqplan.cluster.connection import config_from_properties
from kqplan.cluster.kafka import KafkaCluster
from kqplan.core.cluster import Alteration, Op
from kqplan.core.entity import Entity
from kqplan.sandbox import Operation, Sandbox, SandboxConfig, SaslUser
from tests.helpers import REPO

CLUSTER_ID = "server-test-cluster"
USERS = {"admin": SaslUser("admin-secret", super_user=True),
         "reader": SaslUser("reader-secret", frozenset({Operation.DESCRIBE_CONFIGS}))}
PLAIN_FAILURE = "Authentication failed: Invalid username or password"


class Wire:
    """One client connection speaking raw frames; answers decoded with the generated classes."""

    def __init__(self, bootstrap: str, client_id: str = "server-test") -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.client_id = client_id
        self.correlation = 0

    def close(self) -> None:
        self.sock.close()

    def frame(self, request: Any) -> bytes:
        self.correlation += 1
        request.with_header(correlation_id=self.correlation, client_id=self.client_id)
        return bytes(request.encode(header=True, framed=True))

    def read_frame(self) -> bytes | None:
        """One response payload (header included), or None when the broker closed."""
        head = self.sock.recv(4, socket.MSG_WAITALL)
        if len(head) < 4:
            return None
        (size,) = struct.unpack(">i", head)
        data = bytearray()
        while len(data) < size:
            chunk = self.sock.recv(min(size - len(data), 1 << 20))
            if not chunk:
                return None
            data += chunk
        return bytes(data)

    def call(self, request: Any, response_class: Any) -> Any:
        self.sock.sendall(self.frame(request))
        payload = self.read_frame()
        assert payload is not None, f"{type(request).__name__}: the broker closed the connection"
        version = request.API_VERSION
        answer = response_class[version].decode(payload, header=True)
        assert answer.header.correlation_id == self.correlation
        return answer

    def closed(self) -> bool:
        """True once the broker has closed its end (EOF within the timeout)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionError:
            return True


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    with Sandbox.start(SandboxConfig(port=0, cluster_id=CLUSTER_ID)) as sb:
        yield sb


@pytest.fixture
def sasl_sandbox() -> Iterator[Sandbox]:
    with Sandbox.start(SandboxConfig(port=0, cluster_id=CLUSTER_ID, sasl=True, users=USERS)) as sb:
        yield sb


@pytest.fixture
def wire(sandbox) -> Iterator[Wire]:
    w = Wire(sandbox.bootstrap)
    yield w
    w.close()


def host_port(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.rsplit(":", 1)
    return host, int(port)


# -- Metadata, DescribeCluster -------------------------------------------------------------------

@pytest.mark.parametrize("version", range(13))
def test_metadata_every_version_advertises_the_dialled_address(sandbox, wire, version):
    fields: dict[str, Any] = {"topics": [] if version else None}
    if version >= 4:
        fields["allow_auto_topic_creation"] = False
    answer = wire.call(MetadataRequest(version=version, **fields), MetadataResponse)
    [broker] = answer.brokers
    assert (broker.node_id, broker.host, broker.port) == (1, *host_port(sandbox.bootstrap))
    assert answer.topics == []
    if version >= 1:
        assert answer.controller_id == 1
    if version >= 2:
        assert answer.cluster_id == CLUSTER_ID


@pytest.mark.parametrize("version", [0, 1])
def test_describe_cluster(sandbox, wire, version):
    answer = wire.call(DescribeClusterRequest(version=version, include_cluster_authorized_operations=False),
                       DescribeClusterResponse)
    assert (answer.error_code, answer.cluster_id, answer.controller_id) == (0, CLUSTER_ID, 1)
    assert [(b.broker_id, b.host, b.port) for b in answer.brokers] == [(1, *host_port(sandbox.bootstrap))]


# -- the quota RPCs on the wire ------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 1])
def test_quota_rpcs_round_trip_null_names_at_both_versions(sandbox, wire, version):
    E = AlterClientQuotasRequest.EntryData
    alter = AlterClientQuotasRequest(version=version, validate_only=False, entries=[
        E(entity=[E.EntityData(entity_type="user", entity_name=None)],
          ops=[E.OpData(key="producer_byte_rate", value=1024.0, remove=False)]),
        E(entity=[E.EntityData(entity_type="user", entity_name="alice"),
                  E.EntityData(entity_type="client-id", entity_name=None)],
          ops=[E.OpData(key="request_percentage", value=12.5, remove=False)]),
    ])
    answer = wire.call(alter, AlterClientQuotasResponse)
    assert [(e.error_code, e.error_message) for e in answer.entries] == [(0, None), (0, None)]
    assert sorted(tuple((x.entity_type, x.entity_name) for x in e.entity) for e in answer.entries) == [
        (("client-id", None), ("user", "alice")), (("user", None),)]

    C = DescribeClientQuotasRequest.ComponentData
    default_user = DescribeClientQuotasRequest(version=version, strict=True,
                                               components=[C(entity_type="user", match_type=1, match=None)])
    described = wire.call(default_user, DescribeClientQuotasResponse)
    assert (described.error_code, described.error_message) == (0, "")  # "" on success, ref §3.3
    assert [([(x.entity_type, x.entity_name) for x in e.entity], [(v.key, v.value) for v in e.values])
            for e in described.entries] == [([("user", None)], [("producer_byte_rate", 1024.0)])]
    assert sandbox.state == {Entity.user(None): {"producer_byte_rate": 1024.0},
                             Entity.user_client("alice", None): {"request_percentage": 12.5}}


def test_a_describe_after_an_alter_sees_it(wire):
    # describe-all answers are cached between alters: the cache must not serve a stale answer
    C = AlterClientQuotasRequest.EntryData
    describe_all = DescribeClientQuotasRequest(version=1, strict=False, components=[])
    assert wire.call(describe_all, DescribeClientQuotasResponse).entries == []
    for value in (1.0, 2.0):
        wire.call(AlterClientQuotasRequest(version=1, validate_only=False, entries=[
            C(entity=[C.EntityData(entity_type="user", entity_name="u")],
              ops=[C.OpData(key="producer_byte_rate", value=value, remove=False)])]),
            AlterClientQuotasResponse)
        [entry] = wire.call(DescribeClientQuotasRequest(version=1, strict=False, components=[]),
                            DescribeClientQuotasResponse).entries
        assert [(v.key, v.value) for v in entry.values] == [("producer_byte_rate", value)]


# -- framing ---------------------------------------------------------------------------------------

def test_pipelined_requests_are_answered_in_order_with_their_correlation_ids(sandbox, wire):
    requests = [ApiVersionsRequest(version=1), MetadataRequest(version=12, topics=[]),
                DescribeClientQuotasRequest(version=1, strict=False, components=[]),
                DescribeClusterRequest(version=1, include_cluster_authorized_operations=False)]
    wire.sock.sendall(b"".join(wire.frame(r) for r in requests))  # one write, four frames
    for correlation in range(1, len(requests) + 1):
        payload = wire.read_frame()
        assert payload is not None
        assert struct.unpack_from(">i", payload)[0] == correlation
    assert [(r.api_name, r.api_version) for r in sandbox.requests] == [
        ("ApiVersions", 1), ("Metadata", 12), ("DescribeClientQuotas", 1), ("DescribeCluster", 1)]


@pytest.mark.parametrize("size", [-1, 100 * 1024 * 1024 + 1])
def test_an_impossible_frame_size_closes_the_connection(wire, size):
    wire.sock.sendall(struct.pack(">i", size))
    assert wire.closed()


def test_a_truncated_body_closes_the_connection_as_kafka_does(sandbox, wire):
    # ref §2.1 step 1: a request Kafka cannot parse gets no answer, the connection closes
    frame = wire.frame(DescribeClientQuotasRequest(version=1, strict=False, components=[]))
    cut = frame[4:-2]
    wire.sock.sendall(struct.pack(">i", len(cut)) + cut)
    assert wire.closed()
    other = Wire(sandbox.bootstrap)  # the broker itself is unharmed
    try:
        assert other.call(ApiVersionsRequest(version=0), ApiVersionsResponse).error_code == 0
    finally:
        other.close()


def test_the_request_log_names_api_version_client_and_connection(sandbox):
    first, second = Wire(sandbox.bootstrap, "first-client"), Wire(sandbox.bootstrap, None)  # type: ignore[arg-type]
    try:
        first.call(ApiVersionsRequest(version=2), ApiVersionsResponse)
        second.call(MetadataRequest(version=4, topics=[], allow_auto_topic_creation=False), MetadataResponse)
        first.call(DescribeClientQuotasRequest(version=0, strict=False, components=[]),
                   DescribeClientQuotasResponse)
    finally:
        first.close()
        second.close()
    log = [(r.api_name, r.api_version, r.client_id, r.connection) for r in sandbox.requests]
    assert log[0][:3] == ("ApiVersions", 2, "first-client")
    assert log[1][:3] == ("Metadata", 4, None)
    assert log[2][:3] == ("DescribeClientQuotas", 0, "first-client")
    assert log[0][3] == log[2][3] != log[1][3]
    assert sandbox.requests[2].entries == 0
    assert sandbox.requests[2].error_codes == (0,)


# -- SASL on the wire ------------------------------------------------------------------------------

def plain(user: str, password: str) -> bytes:
    return b"\0" + user.encode() + b"\0" + password.encode()


def test_a_sasl_listener_closes_a_connection_that_skips_authentication(sasl_sandbox):
    w = Wire(sasl_sandbox.bootstrap)
    try:
        # ApiVersions is allowed before authenticating (clients ask it first)...
        assert w.call(ApiVersionsRequest(version=3, client_software_name="t", client_software_version="1"),
                      ApiVersionsResponse).error_code == 0
        # ...a quota RPC is not
        w.sock.sendall(w.frame(DescribeClientQuotasRequest(version=1, strict=False, components=[])))
        assert w.closed()
    finally:
        w.close()


def test_an_unknown_mechanism_is_refused_with_the_list_of_enabled_ones(sasl_sandbox):
    w = Wire(sasl_sandbox.bootstrap)
    try:
        answer = w.call(SaslHandshakeRequest(version=1, mechanism="GSSAPI"), SaslHandshakeResponse)
        # UNSUPPORTED_SASL_MECHANISM and sasl.enabled.mechanisms in its order
        assert (answer.error_code, answer.mechanisms) == (33, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
    finally:
        w.close()


@pytest.mark.parametrize("version", [0, 1, 2])
def test_sasl_authenticate_ok_then_quota_rpcs_work(sasl_sandbox, version):
    w = Wire(sasl_sandbox.bootstrap)
    try:
        handshake = w.call(SaslHandshakeRequest(version=1, mechanism="PLAIN"), SaslHandshakeResponse)
        assert handshake.error_code == 0
        answer = w.call(SaslAuthenticateRequest(version=version, auth_bytes=plain("reader", "reader-secret")),
                        SaslAuthenticateResponse)
        assert (answer.error_code, answer.error_message) == (0, None)
        described = w.call(DescribeClientQuotasRequest(version=1, strict=False, components=[]),
                           DescribeClientQuotasResponse)
        assert described.error_code == 0
    finally:
        w.close()


@pytest.mark.parametrize("token", [plain("admin", "wrong"), plain("ghost", "x"), b"no-nul-bytes"])
def test_bad_credentials_get_error_58_with_kafkas_message_then_the_connection_closes(sasl_sandbox, token):
    w = Wire(sasl_sandbox.bootstrap)
    try:
        w.call(SaslHandshakeRequest(version=1, mechanism="PLAIN"), SaslHandshakeResponse)
        answer = w.call(SaslAuthenticateRequest(version=2, auth_bytes=token), SaslAuthenticateResponse)
        assert (answer.error_code, answer.error_message) == (58, PLAIN_FAILURE)
        assert w.closed()
    finally:
        w.close()


def test_handshake_v0_takes_a_raw_plain_token_next(sasl_sandbox):
    # SaslHandshake v0 (pre-KIP-152): the next frame is the bare token, answered by an empty frame
    w = Wire(sasl_sandbox.bootstrap)
    try:
        handshake = w.call(SaslHandshakeRequest(version=0, mechanism="PLAIN"), SaslHandshakeResponse)
        assert handshake.error_code == 0
        token = plain("admin", "admin-secret")
        w.sock.sendall(struct.pack(">i", len(token)) + token)
        assert w.read_frame() == b""
        described = w.call(DescribeClientQuotasRequest(version=0, strict=False, components=[]),
                           DescribeClientQuotasResponse)
        assert described.error_code == 0
    finally:
        w.close()


def test_handshake_v0_with_a_bad_raw_token_closes_the_connection(sasl_sandbox):
    w = Wire(sasl_sandbox.bootstrap)
    try:
        w.call(SaslHandshakeRequest(version=0, mechanism="PLAIN"), SaslHandshakeResponse)
        token = plain("admin", "nope")
        w.sock.sendall(struct.pack(">i", len(token)) + token)
        assert w.closed()
    finally:
        w.close()


# -- the process -----------------------------------------------------------------------------------

def test_sigterm_right_after_the_listening_line_still_stops_cleanly():
    codes = []
    for _ in range(6):
        proc = subprocess.Popen([sys.executable, "-m", "kqplan.sandbox", "--port", "0"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("listening on 127.0.0.1:")
        proc.send_signal(signal.SIGTERM)
        codes.append(proc.wait(10))
    assert codes == [0] * 6


def test_sigint_stops_the_process_cleanly():
    proc = subprocess.Popen([sys.executable, "-m", "kqplan.sandbox", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    assert proc.stdout is not None
    assert proc.stderr is not None
    bootstrap = proc.stdout.readline().split()[-1]
    with KafkaCluster(config_from_properties("", bootstrap=bootstrap, source="t", env={})) as c:
        assert c.describe() == {}
    proc.send_signal(signal.SIGINT)
    assert proc.wait(10) == 0
    assert "Traceback" not in proc.stderr.read()


# -- 100k entities ---------------------------------------------------------------------------------

KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage")


def seed_100k() -> dict[Entity, dict[str, float]]:
    """2/3 {user}, 1/3 {user, client-id}; 2 or 3 keys each (the reference §5a shape)."""
    state: dict[Entity, dict[str, float]] = {}
    for i in range(100_000):
        entity = Entity.user_client(f"user-{i}", f"client-{i}") if i % 3 == 0 else Entity.user(f"user-{i}")
        state[entity] = {KEYS[j]: float(1024 * (i + j + 1)) for j in range(2 + i % 2)}
    return state


@pytest.mark.slow
def test_100k_entities_describe_all_and_a_10k_alter():
    # correctness at size only; timings come from benchmarks/plan_apply.py
    seed = seed_100k()
    with Sandbox.start(SandboxConfig(port=0, seed=seed)) as sb:
        w = Wire(sb.bootstrap)
        try:
            w.sock.sendall(w.frame(DescribeClientQuotasRequest(version=1, strict=False, components=[])))
            payload = w.read_frame()
        finally:
            w.close()
        assert payload is not None
        with KafkaCluster(config_from_properties("", bootstrap=sb.bootstrap, source="t", env={})) as c:
            assert c.describe() == seed  # the cached answer
            alterations = [Alteration(Entity.user(f"new-{i}"), (Op("producer_byte_rate", i + 1.0),))
                           for i in range(10_000)]
            results = c.alter(alterations, validate_only=False)
            assert len(results) == 10_000
            assert all(r.ok for r in results)
            after = c.describe()  # the cache was dropped by the alter
        assert len(after) == 110_000
        assert after[Entity.user("new-9999")] == {"producer_byte_rate": 10_000.0}
