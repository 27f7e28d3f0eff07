"""Connections and commands that give up cleanly (issue 32 §4, issue 33 item 3): the client
settings that bound waiting are honoured (``socket.connection.setup.timeout.ms`` for the
connection, ``request.timeout.ms`` for each request, ``default.api.timeout.ms`` for one operation
with its retries), ``--timeout`` bounds the whole command, and the message says what happened —
"connected, but the broker did not answer within …" is not "cannot connect"."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kqplan import deadline
from kqplan.apply import protocol
from kqplan.apply.verify import VerifyPolicy
from kqplan.sandbox import Sandbox, SandboxConfig
from tests.apply.torn import BATCH, OLD, Users, real_alter
from tests.fault_proxy import ALTER_CLIENT_QUOTAS, Kind, Rule, proxied
from tests.helpers import run_cli, write_manifest


@pytest.fixture
def silent_listener() -> Iterator[str]:
    """A TCP listener that accepts every connection and never answers (a hung broker, or some
    other service on the port)."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        for conn in [server, *accepted]:
            conn.close()


def manifest(tmp_path: Path) -> Path:
    return write_manifest(tmp_path / "q.yaml",
                          "entities:\n  - user: a\n    quotas: {producer_byte_rate: 1}\n")


def timed(*args: str | Path) -> tuple[float, int, str]:
    started = time.monotonic()
    result = run_cli(*args)
    return time.monotonic() - started, result.exit_code, result.stdout + result.stderr


def test_request_timeout_ms_bounds_a_broker_that_never_answers(silent_listener, tmp_path):
    config = tmp_path / "client.properties"
    config.write_text("request.timeout.ms=1500\n")
    took, code, out = timed("plan", manifest(tmp_path), "--bootstrap-server", silent_listener,
                            "--command-config", config)
    assert code == 1, out
    assert took < 6, took  # one wait of 1.5 s, not three attempts of 10 s
    assert (f"Error: connected to {silent_listener}, but the broker did not answer within 1.5 s "
            "(request.timeout.ms)") in out
    assert "cannot connect" not in out
    assert "Traceback" not in out


def test_timeout_bounds_the_whole_command(silent_listener, tmp_path):
    took, code, out = timed("plan", manifest(tmp_path), "--bootstrap-server", silent_listener,
                            "--timeout", "2s")
    assert code == 1, out
    assert took < 5, took
    assert f"connected to {silent_listener}, but the broker did not answer within" in out
    assert "(--timeout 2 s)" in out
    assert deadline.current() is None  # one command's limit, not the next one's


@pytest.mark.parametrize("value", ["3x", "0s", "-1s", "soon"])
def test_a_bad_timeout_is_refused_before_anything_is_sent(value, tmp_path):
    with Sandbox.start(SandboxConfig(port=0)) as box:
        result = run_cli("plan", manifest(tmp_path), "--bootstrap-server", box.bootstrap, "--timeout", value)
        assert box.requests_of(48) == []
    assert result.exit_code != 0
    if result.exit_code == 1:  # "-1s" is read as an unknown option by the parser (exit 2)
        assert f"Error: --timeout: '{value}' is not a" in result.stderr
        assert "e.g. 30s, 2m or 500ms" in result.stderr


def test_default_api_timeout_ms_bounds_the_retries(tmp_path):
    port = socket.create_server(("127.0.0.1", 0))
    address = f"127.0.0.1:{port.getsockname()[1]}"
    port.close()  # nothing listens: every attempt is refused at once
    config = tmp_path / "client.properties"
    config.write_text("default.api.timeout.ms=100\n")
    _, code, out = timed("plan", manifest(tmp_path), "--bootstrap-server", address,
                         "--command-config", config)
    assert code == 1
    assert "gave up after 1 attempt (" in out
    _, _, out = timed("plan", manifest(tmp_path), "--bootstrap-server", address)
    assert "gave up after 3 attempts (" in out


def test_timeout_mid_apply_still_ends_with_a_report(tmp_path, monkeypatch):
    """The broker holds the real alter past the command's --timeout: the batch is reported as
    timed out (it may still land), the rest not sent, verifying is skipped for want of time —
    and the report lists every entity."""
    monkeypatch.setattr(protocol, "MAX_RECORDS_PER_REQUEST", BATCH)
    monkeypatch.setattr(protocol, "DEFAULT_VERIFY", VerifyPolicy(timeout_s=5.0))
    with Sandbox.start(SandboxConfig(port=0, cluster_id="t", seed=Users("").seed_state())) as box, \
            proxied(box.bootstrap) as proxy:
        ents = Users(box.bootstrap)
        proxy.add(Rule(ALTER_CLIENT_QUOTAS, real_alter(1), Kind.DELAY, seconds=8.0))
        report = tmp_path / "r.json"
        started = time.monotonic()
        result = run_cli("apply", ents.manifest(tmp_path), "--auto-approve", "--report", report,
                         "--bootstrap-server", proxy.bootstrap, "--timeout", "3s")
        took = time.monotonic() - started
        out = result.stdout + result.stderr
        assert result.exit_code == 1, out
        assert took < 6, took
        assert "Batch 1 of 4 timed out after" in out
        assert "(it may still be applied); batches 2–4 not sent." in out
        assert "--timeout 3 s reached" in out
        document = json.loads(report.read_text())
        statuses = {e["entity"]["user"]: e["status"] for e in document["entities"]}
        assert sorted(statuses) == sorted(ents.names)
        assert {statuses[u] for u in ents.users(1)} == {"unknown"}
        assert {statuses[u] for u in ents.users(2, 3, 4)} == {"not sent"}
        assert {v for u, v in ents.stored().items() if u in ents.users(2, 3, 4)} == {OLD}


def test_timeout_bounds_a_fleet_command(silent_listener, tmp_path):
    (tmp_path / "kqplan.toml").write_text(f'[clusters.hung]\nbootstrap-server = "{silent_listener}"\n')
    took, code, out = timed("--config", tmp_path / "kqplan.toml", "fleet", "snapshot", "--out",
                            tmp_path / "out", "--timeout", "2s")
    assert code == 1, out
    assert took < 6, took
    assert f"connected to {silent_listener}, but the broker did not answer within" in out
    assert "(--timeout 2 s)" in out
