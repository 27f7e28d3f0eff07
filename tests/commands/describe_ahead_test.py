"""``kqplan plan`` (and ``apply`` of manifests) against a bootstrap server sends the describe
from a thread while the manifests load (commands/plan.py ``describing_ahead``,
``KafkaCluster.describe_ahead``): the describe is in flight before the manifests are compiled,
it is sent once, a retriable error in its answer asks again, and nothing found online — a
silent broker, a refused connection — ever delays or hides an error in the manifests. Over
TCP, against the sandbox broker."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kqplan.commands import apply as apply_command
from kqplan.commands import plan as plan_command
from kqplan.core.entity import Entity
from kqplan.sandbox import Fault, Sandbox, SandboxConfig
from tests.helpers import run_cli, write_manifest

DESCRIBE = 48
SEED = {Entity.user("alice"): {"producer_byte_rate": 1024.0}}


ALICE = "  - user: alice\n    quotas: {producer_byte_rate: 2048}\n"


def _manifests(tmp_path: Path, body: str = ALICE) -> Path:
    write_manifest(tmp_path / "m" / "q.yaml", "entities:\n" + body)
    return tmp_path / "m"


def _waiting(load: Any, sb: Sandbox, seen: list[bool]) -> Any:
    """``load`` that first waits (10 s at most) for a describe to reach the broker, noting if one did."""
    def waiting(*args: Any, **kwargs: Any) -> Any:
        deadline = time.monotonic() + 10
        while not sb.requests_of(DESCRIBE) and time.monotonic() < deadline:
            time.sleep(0.01)
        seen.append(bool(sb.requests_of(DESCRIBE)))
        return load(*args, **kwargs)

    return waiting


def test_the_describe_is_in_flight_while_the_manifests_load(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    with Sandbox.start(SandboxConfig(port=0, seed=SEED)) as sb:
        monkeypatch.setattr(plan_command, "load_checked", _waiting(plan_command.load_checked, sb, seen))
        result = run_cli("plan", _manifests(tmp_path), "--bootstrap-server", sb.bootstrap)
        assert seen == [True], "no describe reached the broker while the manifests loaded"
        assert result.exit_code == 0, result.stderr
        assert "producer_byte_rate = 1024 -> 2048" in result.stdout.replace("→", "->") or \
            "1 to change" in result.stdout
        assert len(sb.requests_of(DESCRIBE)) == 1


def test_apply_describes_while_the_manifests_load_too(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    with Sandbox.start(SandboxConfig(port=0, seed=SEED)) as sb:
        monkeypatch.setattr(apply_command, "load_checked", _waiting(apply_command.load_checked, sb, seen))
        result = run_cli("apply", _manifests(tmp_path), "--bootstrap-server", sb.bootstrap, "--auto-approve")
        assert seen == [True]
        assert result.exit_code == 0, result.stderr
        assert sb.state[Entity.user("alice")] == {"producer_byte_rate": 2048.0}


def test_a_manifest_error_in_apply_does_not_wait_for_a_silent_broker(tmp_path: Path,
                                                                     silent_broker: str) -> None:
    bad = _manifests(tmp_path, "  - user: alice\n    quotas: {producer_bytes_rate: 1}\n")
    started = time.monotonic()
    result = run_cli("apply", bad, "--bootstrap-server", silent_broker, "--auto-approve")
    assert result.exit_code == 1
    assert "producer_bytes_rate" in result.stderr
    assert time.monotonic() - started < 5


def test_a_retriable_error_in_the_early_answer_asks_again(tmp_path: Path) -> None:
    config = SandboxConfig(port=0, seed=SEED, faults=(Fault("describe", error_code=7, times=1),))
    with Sandbox.start(config) as sb:
        result = run_cli("plan", _manifests(tmp_path), "--bootstrap-server", sb.bootstrap)
        assert result.exit_code == 0, result.stderr
        assert "1 to change" in result.stdout
        assert [r.error_codes for r in sb.requests_of(DESCRIBE)] == [(7,), (0,)]


def test_a_denied_early_describe_is_reported_as_before(tmp_path: Path) -> None:
    config = SandboxConfig(port=0, seed=SEED, faults=(Fault("describe", error_code=31),))
    with Sandbox.start(config) as sb:
        result = run_cli("plan", _manifests(tmp_path), "--bootstrap-server", sb.bootstrap)
    assert result.exit_code == 1
    assert "not authorized to describe client quotas" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture
def silent_broker() -> Iterator[str]:
    """Accepts connections and never answers a byte."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()


def test_a_manifest_error_does_not_wait_for_a_silent_broker(tmp_path: Path, silent_broker: str) -> None:
    bad = _manifests(tmp_path, "  - user: alice\n    quotas: {producer_bytes_rate: 1}\n")
    started = time.monotonic()
    result = run_cli("plan", bad, "--bootstrap-server", silent_broker)
    took = time.monotonic() - started
    assert result.exit_code == 1
    assert "unknown quota key 'producer_bytes_rate'" in result.stderr
    assert "no answer" not in result.stderr
    assert "Traceback" not in result.stderr
    assert took < 5, f"the manifest error waited {took:.1f} s for the broker (request timeout 30 s)"


def _closed_port() -> str:
    with socket.create_server(("127.0.0.1", 0)) as s:
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_a_refused_connection_comes_after_the_manifests(tmp_path: Path) -> None:
    address = _closed_port()
    bad = run_cli("plan", _manifests(tmp_path / "bad", "  - user: ''\n    quotas: {producer_byte_rate: 1}\n"),
                  "--bootstrap-server", address)
    assert bad.exit_code == 1
    assert "KQP101" in bad.stderr
    assert address not in bad.stderr
    good = run_cli("plan", _manifests(tmp_path / "good"), "--bootstrap-server", address)
    assert good.exit_code == 1
    assert address in good.stderr
    assert "Traceback" not in good.stderr


def test_a_target_that_cannot_be_opened_is_reported_after_the_manifests(tmp_path: Path) -> None:
    bad = _manifests(tmp_path, "  - user: alice\n    quotas: {producer_bytes_rate: 1}\n")
    missing = tmp_path / "nope.properties"
    result = run_cli("plan", bad, "--bootstrap-server", "127.0.0.1:1", "--command-config", missing)
    assert result.exit_code == 1
    assert "producer_bytes_rate" in result.stderr
    assert "nope.properties" not in result.stderr


@pytest.mark.parametrize("principals", [False, True])
def test_a_broker_that_fails_the_identity_is_tried_once_as_usual(tmp_path: Path, principals: bool) -> None:
    """The thread's attempts at the identity (3) are the command's: its failure is raised by the
    next call, whichever it is (describe first with --principals), not tried 3 more times."""
    from kqplan.sandbox import Drop

    config = SandboxConfig(port=0, seed=SEED, faults=(Fault("metadata", drop=Drop.BEFORE),))
    extra: list[str | Path] = []
    if principals:
        (tmp_path / "who.txt").write_text("user,client-id\nalice,app\n")
        extra = ["--principals", tmp_path / "who.txt"]
    with Sandbox.start(config) as sb:
        result = run_cli("plan", _manifests(tmp_path), "--bootstrap-server", sb.bootstrap, *extra)
        assert result.exit_code == 1
        assert "Traceback" not in result.stderr
        assert len(sb.requests_of(3)) == 3  # Metadata, dropped each time
