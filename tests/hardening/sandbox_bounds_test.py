"""The sandbox bounds unauthenticated peers (issue 29): a SASL listener reads at most Kafka's
``sasl.server.max.receive.size`` (512 KiB) per frame before the client has authenticated — a
larger size prefix closes the connection before any of its body is read, as Kafka's
``NetworkReceive`` throws InvalidReceiveException —, and the requests it keeps in memory are the
most recent ``request_history`` ones. Real sockets against a real sandbox."""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import DescribeClientQuotasRequest, DescribeClientQuotasResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from kqplan.sandbox import Sandbox, SandboxConfig, SaslUser
from kqplan.sandbox.config import REQUEST_HISTORY, SASL_SERVER_MAX_RECEIVE_SIZE
from tests.sandbox.server_test import Wire

KAFKA_DEFAULT = 524288  # BrokerSecurityConfigs.DEFAULT_SASL_SERVER_MAX_RECEIVE_SIZE
MIB = 1 << 20
USERS = {"admin": SaslUser("admin-secret", super_user=True),
         # credentials that would authenticate, if a frame that long were read before authentication
         "long": SaslUser("p" * KAFKA_DEFAULT, super_user=True)}


@contextmanager
def sasl_sandbox(**options: object) -> Iterator[Sandbox]:
    with Sandbox.start(SandboxConfig(cluster_id="bounds", sasl=True, users=USERS, **options)) as box:
        yield box


def api_versions_frame(size: int, correlation: int = 1) -> bytes:
    """A valid ApiVersions v3 request whose frame body is exactly ``size`` bytes: its
    client_software_name (letters, as Kafka's pattern wants) pads it."""
    def encoded(n: int) -> bytes:
        request = ApiVersionsRequest(version=3, client_software_name="a" * n, client_software_version="1")
        request.with_header(correlation_id=correlation, client_id="bounds")
        return bytes(request.encode(header=True, framed=True))

    n = max(size - len(encoded(0)) + 4, 0)
    while len(encoded(n)) - 4 != size:
        n -= len(encoded(n)) - 4 - size
    frame = encoded(n)
    assert struct.unpack(">i", frame[:4])[0] == size
    return frame


def answered(w: Wire, frame: bytes) -> int:
    """The error code of the ApiVersions answer to ``frame``."""
    w.sock.sendall(frame)
    payload = w.read_frame()
    assert payload is not None, "the sandbox closed the connection"
    return ApiVersionsResponse[3].decode(payload, header=True).error_code


def authenticate(w: Wire) -> None:
    assert w.call(SaslHandshakeRequest(version=1, mechanism="PLAIN"), SaslHandshakeResponse).error_code == 0
    answer = w.call(SaslAuthenticateRequest(version=2, auth_bytes=b"\0admin\0admin-secret"),
                    SaslAuthenticateResponse)
    assert answer.error_code == 0


def hung_up(w: Wire) -> bool:
    """The sandbox closed the connection without answering (a reset: the body was left unread)."""
    try:
        return w.read_frame() is None
    except ConnectionError:
        return True


def hung_up_promptly(w: Wire, within: float = 2.0) -> bool:
    w.sock.settimeout(within)
    try:
        return w.closed()
    except TimeoutError:
        return False


# -- the bound, at Kafka's edge --------------------------------------------------------------------

def test_the_bound_is_kafkas_name_and_default():
    assert SASL_SERVER_MAX_RECEIVE_SIZE == KAFKA_DEFAULT
    assert SandboxConfig().sasl_server_max_receive_size == KAFKA_DEFAULT


@pytest.mark.parametrize("size", [KAFKA_DEFAULT - 1, KAFKA_DEFAULT])
def test_a_frame_up_to_the_bound_is_served_before_authentication(size):
    with sasl_sandbox() as box:
        w = Wire(box.bootstrap)
        try:
            assert answered(w, api_versions_frame(size)) == 0
            authenticate(w)  # and the connection goes on
        finally:
            w.close()


def test_a_frame_one_byte_over_the_bound_closes_the_connection_before_authentication():
    with sasl_sandbox() as box:
        w = Wire(box.bootstrap)
        try:
            w.sock.sendall(api_versions_frame(KAFKA_DEFAULT + 1))
            assert hung_up(w)
        finally:
            w.close()


def test_a_100_mib_size_prefix_alone_gets_the_connection_closed_at_once():
    with sasl_sandbox() as box:
        w = Wire(box.bootstrap)
        try:
            w.sock.sendall(struct.pack(">i", 100 * MIB))  # the header only: no body follows
            assert hung_up_promptly(w)
        finally:
            w.close()
        assert box.requests == []  # nothing was read past the size


@pytest.mark.parametrize("step", ["handshake", "authenticate", "raw token"])
def test_every_step_before_authentication_is_bounded(step):
    with sasl_sandbox() as box:
        w = Wire(box.bootstrap)
        try:
            version = 0 if step == "raw token" else 1
            assert w.call(SaslHandshakeRequest(version=version, mechanism="PLAIN"),
                          SaslHandshakeResponse).error_code == 0
            big = b"\0long\0" + b"p" * KAFKA_DEFAULT
            if step == "raw token":  # SaslHandshake v0: the next frame is the bare token
                frame = struct.pack(">i", len(big)) + big
            elif step == "authenticate":
                frame = w.frame(SaslAuthenticateRequest(version=2, auth_bytes=big))
            else:  # a second handshake, its mechanism name over the bound
                body = w.frame(SaslHandshakeRequest(version=1, mechanism="PLAIN"))[4:]
                body += bytes(KAFKA_DEFAULT + 1 - len(body))  # padded past the bound
                frame = struct.pack(">i", len(body)) + body
            try:
                w.sock.sendall(frame)
            except ConnectionError:  # closed (reset) while the body was still being sent: hung up
                return
            assert hung_up(w)
        finally:
            w.close()


def test_after_authentication_the_bound_is_socket_request_max_bytes():
    with sasl_sandbox() as box:
        w = Wire(box.bootstrap)
        try:
            authenticate(w)
            assert answered(w, api_versions_frame(2 * MIB, correlation=10)) == 0
            described = w.call(DescribeClientQuotasRequest(version=1, strict=False, components=[]),
                               DescribeClientQuotasResponse)
            assert described.error_code == 0
        finally:
            w.close()


def test_a_listener_without_sasl_keeps_socket_request_max_bytes():
    with Sandbox.start(SandboxConfig(cluster_id="bounds")) as box:
        w = Wire(box.bootstrap)
        try:
            assert answered(w, api_versions_frame(2 * MIB)) == 0
        finally:
            w.close()


def test_the_bound_is_configurable():
    with sasl_sandbox(sasl_server_max_receive_size=1024) as box:
        w = Wire(box.bootstrap)
        try:
            assert answered(w, api_versions_frame(1024)) == 0
            w.sock.sendall(api_versions_frame(1025, correlation=2))
            assert hung_up(w)
        finally:
            w.close()


def test_generated_hostile_size_prefixes_are_refused_and_the_sandbox_keeps_serving():
    with sasl_sandbox() as box:
        host, port = box.bootstrap.rsplit(":", 1)

        @settings(max_examples=40, deadline=None)
        @given(size=st.integers(KAFKA_DEFAULT + 1, 2**31 - 1) | st.integers(-(2**31), -1),
               tail=st.binary(max_size=64))
        def refused(size: int, tail: bytes) -> None:
            with socket.create_connection((host, int(port)), timeout=5) as sock:
                try:
                    sock.sendall(struct.pack(">i", size) + tail)
                    assert sock.recv(1) == b""
                except ConnectionError:
                    pass  # reset: closed with the tail unread

        refused()
        w = Wire(box.bootstrap)
        try:
            authenticate(w)
        finally:
            w.close()


# -- five hostile connections against a sandbox process: its memory ------------------------------

def _status(pid: int, field: str) -> int:
    """A /proc/PID/status value in KiB (VmRSS: now, VmHWM: the peak)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def _flood(host: str, port: int, size: int) -> tuple[socket.socket, int]:
    """Announce a frame of ``size`` bytes and send all but its last byte (the frame never
    completes); the open socket and how many body bytes the sandbox took before hanging up."""
    sock = socket.create_connection((host, port), timeout=10)
    chunk = bytes(MIB)
    sent = 0
    try:
        sock.sendall(struct.pack(">i", size))
        while sent < size - 1:
            sent += sock.send(chunk[: min(MIB, size - 1 - sent)])
    except ConnectionError:
        pass
    return sock, sent


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc/PID/status (Linux)")
def test_five_unauthenticated_100_mib_frames_do_not_grow_the_sandbox(tmp_path):
    users = tmp_path / "users.json"
    users.write_text(json.dumps({"admin": {"password": "admin-secret", "super": True}}))
    proc = subprocess.Popen([sys.executable, "-m", "kqplan", "sandbox", "--port", "0", "--sasl-users", users],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    socks: list[socket.socket] = []
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        port = int(line.rsplit(":", 1)[1])
        w = Wire(f"127.0.0.1:{port}")
        try:
            authenticate(w)  # warm: a served connection's memory is in the baseline
        finally:
            w.close()
        baseline = _status(proc.pid, "VmHWM")
        started = time.monotonic()
        taken = []
        for _ in range(5):  # all five stay open: an unbounded sandbox would hold 500 MiB
            sock, sent = _flood("127.0.0.1", port, 100 * MIB)
            socks.append(sock)
            taken.append(sent)
        assert time.monotonic() - started < 10
        grown_mib = (_status(proc.pid, "VmHWM") - baseline) / 1024
        assert grown_mib < 50, f"the sandbox grew {grown_mib:.0f} MiB"
        assert all(sent < 32 * MIB for sent in taken), taken  # hung up: socket buffers at most
        w = Wire(f"127.0.0.1:{port}")  # and it still serves
        try:
            authenticate(w)
        finally:
            w.close()
    finally:
        for sock in socks:
            sock.close()
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert "Traceback" not in err
    assert err.count("before authentication: a frame of 104857600 bytes "
                     f"(sasl.server.max.receive.size is {KAFKA_DEFAULT})") == 5, err


# -- the request log kept in memory ----------------------------------------------------------------

def test_the_requests_kept_in_memory_are_the_most_recent_and_the_log_file_has_them_all(tmp_path):
    log = tmp_path / "requests.jsonl"
    with Sandbox.start(SandboxConfig(cluster_id="bounds", request_history=5, request_log=log)) as box:
        w = Wire(box.bootstrap)
        try:
            for i in range(20):
                w.client_id = f"c{i}"
                assert w.call(ApiVersionsRequest(version=0), ApiVersionsResponse).error_code == 0
        finally:
            w.close()
        assert [r.client_id for r in box.requests] == [f"c{i}" for i in range(15, 20)]
        assert len(box.requests_of(18)) == 5
    lines = log.read_text().splitlines()
    assert [json.loads(line)["client_id"] for line in lines] == [f"c{i}" for i in range(20)]


def test_by_default_the_sandbox_keeps_the_last_10000_requests():
    assert SandboxConfig().request_history == REQUEST_HISTORY == 10_000
    with Sandbox.start(SandboxConfig(cluster_id="bounds")) as box:
        w = Wire(box.bootstrap)
        try:
            n = REQUEST_HISTORY + 50
            frames = []
            for _ in range(n):
                frames.append(w.frame(ApiVersionsRequest(version=0)))
            w.sock.sendall(b"".join(frames))  # pipelined: one write
            for _ in range(n):
                assert w.read_frame() is not None
        finally:
            w.close()
        assert len(box.requests) == REQUEST_HISTORY


def test_a_negative_history_is_refused():
    with pytest.raises(ValueError, match="request_history"):
        SandboxConfig(request_history=-1)
