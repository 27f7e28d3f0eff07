"""``kqplan sandbox --state`` on a failing disk: an alter is persisted before it is committed and
answered; when the write fails the sandbox keeps (and serves) the old state, answers the alter
with a storage error per entity (KRaft: KAFKA_STORAGE_ERROR; ZooKeeper mode: UNKNOWN_SERVER_ERROR)
and logs the path and errno. Real faults: a file size limit (RLIMIT_FSIZE, EFBIG) on the sandbox
process, always; a full tmpfs (ENOSPC) where this container may mount one."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from kqplan.cluster.connection import config_from_properties
from kqplan.cluster.kafka import KafkaCluster
from kqplan.core.cluster import Alteration, Op
from kqplan.core.entity import Entity
from kqplan.core.state import QuotaState
from kqplan.sandbox import Sandbox, SandboxConfig
from kqplan.snapshot.file import read_snapshot, write_snapshot
from tests.helpers import run_cli, serving, write_manifest

LIMIT = 16 * 1024  # bytes a file of the sandbox process may reach (RLIMIT_FSIZE)
SMALL = {Entity.user(f"u{i}"): {"producer_byte_rate": 1000.0 + i} for i in range(5)}
BIG = 1000  # entities: ~100 KB of state, over LIMIT and over the 64 KiB tmpfs
FLAVORS = ("kraft", "zk")
STORAGE_ERROR = {"kraft": (56, "Disk error when trying to access log file on the disk."),
                 "zk": (-1, None)}


# ``python -m kqplan`` with a file size limit set first by the process itself (not a preexec_fn,
# unsafe in a threaded test process); SIGXFSZ ignored so that a write past it raises EFBIG
_LIMITED = ("import resource, runpy, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
            "limit = int(sys.argv.pop(1)); resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)); "
            "runpy.run_module('kqplan', run_name='__main__', alter_sys=True)")


def kqplan_command(*args: str, limit: int | None = None) -> list[str]:
    """The command line of ``python -m kqplan ARGS``, under RLIMIT_FSIZE ``limit`` if given."""
    if limit is None:
        return [sys.executable, "-m", "kqplan", *args]
    return [sys.executable, "-c", _LIMITED, str(limit), *args]


def sandbox_process(state: Path, flavor: str, *, limit: int | None = None
                    ) -> AbstractContextManager[tuple[subprocess.Popen[str], str]]:
    """``python -m kqplan sandbox --state STATE`` on a free port; yields (process, bootstrap)."""
    return serving(kqplan_command("sandbox", "--port", "0", "--state", str(state), "--flavor", flavor,
                                  limit=limit))


def stop(proc: subprocess.Popen[str]) -> str:
    """SIGTERM, wait for a clean exit; the process's stderr."""
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    return err


def describe(bootstrap: str) -> QuotaState:
    with KafkaCluster(config_from_properties("", bootstrap=bootstrap, source="t", env={})) as c:
        return c.describe()


def manifest(path: Path, state: QuotaState) -> Path:
    lines = ["entities:"]
    for entity, quotas in state.items():
        ((kind, name),) = entity.parts
        values = ", ".join(f"{k}: {v:g}" for k, v in quotas.items())
        lines.append(f"  - {kind}: {name}\n    quotas: {{{values}}}")
    return write_manifest(path, "\n".join(lines) + "\n")


def big_state() -> QuotaState:
    return {**SMALL, **{Entity.user(f"big{i:04d}"): {"consumer_byte_rate": 2000.0 + i} for i in range(BIG)}}


def apply(path: Path, bootstrap: str) -> int:
    return run_cli("apply", path, "--auto-approve", "--bootstrap-server", bootstrap).exit_code


def plan_output(path: Path, bootstrap: str) -> str:
    result = run_cli("plan", path, "--bootstrap-server", bootstrap)
    return result.stdout + result.stderr


def _storage_failure_checks(tmp_path: Path, state: Path, flavor: str, bootstrap: str) -> None:
    """With the sandbox serving SMALL from ``state``: a BIG apply that cannot be saved fails,
    the sandbox keeps serving SMALL, answers the storage error per entity, and saves nothing."""
    big = manifest(tmp_path / "big" / "q.yaml", big_state())
    on_disk = state.read_bytes()
    assert apply(big, bootstrap) != 0
    assert describe(bootstrap) == SMALL  # the old state, not the one that was never saved
    assert state.read_bytes() == on_disk
    shown = plan_output(big, bootstrap)
    assert "No changes." not in shown, shown
    assert "big0999" in shown, shown  # still to do
    # on the wire: every entity of the request answered with the storage error
    code, message = STORAGE_ERROR[flavor]
    change = [Alteration(Entity.user("wire"), (Op("producer_byte_rate", 1.0),)),
              *(Alteration(e, (Op("consumer_byte_rate", 1.0),)) for e in list(big_state())[5:])]
    with KafkaCluster(config_from_properties("", bootstrap=bootstrap, source="t", env={})) as c:
        results = c.alter(change, validate_only=False)
        assert {(r.error_code, r.error_message) for r in results} == {(code, message)}
        assert {r.entity for r in results} == {a.entity for a in change}
        assert all(r.ok for r in c.alter(change, validate_only=True))  # validateOnly writes nothing
    assert describe(bootstrap) == SMALL
    assert not [p for p in state.parent.iterdir() if p.name != state.name]  # no temp file left


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_state_write_past_the_file_size_limit_keeps_the_old_state(tmp_path, flavor):
    state = tmp_path / "state" / "state.json"
    state.parent.mkdir()
    small = manifest(tmp_path / "small" / "q.yaml", SMALL)
    with sandbox_process(state, flavor, limit=LIMIT) as (proc, bootstrap):
        assert apply(small, bootstrap) == 0
        _storage_failure_checks(tmp_path, state, flavor, bootstrap)
        proc.kill()  # no clean shutdown: what is on disk is all there is
        proc.wait(10)
        err = proc.stderr.read() if proc.stderr else ""
    assert "malformed request" not in err
    assert f"storage error: cannot write --state {state}: [Errno 27] EFBIG: File too large" in err, err
    assert read_snapshot(state)[0] == SMALL

    # restarted from the same file: it serves what it served before the failed alter
    changed = {**SMALL, Entity.user("u0"): {"producer_byte_rate": 1.0}}
    with sandbox_process(state, flavor, limit=LIMIT) as (proc, bootstrap):
        assert describe(bootstrap) == SMALL
        assert apply(manifest(tmp_path / "big" / "q.yaml", big_state()), bootstrap) != 0
        # a small alter that fits still works after the failure
        assert apply(manifest(tmp_path / "changed" / "q.yaml", changed), bootstrap) == 0
        assert describe(bootstrap) == changed
        stop(proc)
    assert read_snapshot(state)[0] == changed

    # without the limit the same apply goes through and is saved
    with sandbox_process(state, flavor) as (proc, bootstrap):
        assert describe(bootstrap) == changed
        assert apply(manifest(tmp_path / "big" / "q.yaml", big_state()), bootstrap) == 0
        assert stop(proc) == ""
    assert read_snapshot(state)[0] == big_state()


@contextmanager
def small_tmpfs(tmp_path: Path, size: str) -> Iterator[Path]:
    mount = tmp_path / f"tmpfs-{uuid.uuid4().hex[:8]}"
    mount.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount(8) in this environment: the full-disk case needs a small tmpfs")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a {size} tmpfs here (mount exited {done.returncode}: "
                    f"{done.stderr.strip() or done.stdout.strip()}); the full-disk case needs one")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_full_disk_keeps_the_old_state(tmp_path, flavor):
    with small_tmpfs(tmp_path, "64k") as disk:
        state = disk / "state.json"
        with sandbox_process(state, flavor) as (proc, bootstrap):
            assert apply(manifest(tmp_path / "small" / "q.yaml", SMALL), bootstrap) == 0
            _storage_failure_checks(tmp_path, state, flavor, bootstrap)
            err = stop(proc)
        assert "malformed request" not in err
        assert f"storage error: cannot write --state {state}: [Errno 28] ENOSPC: No space left" in err
        with sandbox_process(state, flavor) as (proc, bootstrap):
            assert describe(bootstrap) == SMALL
            changed = {**SMALL, Entity.user("u1"): {"producer_byte_rate": 7.0}}
            assert apply(manifest(tmp_path / "changed" / "q.yaml", changed), bootstrap) == 0
            stop(proc)
        assert read_snapshot(state)[0] == changed


def test_a_state_path_that_cannot_be_written_refuses_the_alter_in_process(tmp_path, capfd):
    """In-process too (``Sandbox.start``): the directory of ``--state`` replaced by a file under a
    running sandbox (a removed one is created again, as for every output file): the alter is
    refused, the state stays, stderr names the path."""
    directory = tmp_path / "gone"
    directory.mkdir()
    state = directory / "state.json"
    config = SandboxConfig(state_file=state, seed=SMALL)
    with Sandbox.start(config) as sandbox:
        directory.rmdir()
        directory.write_text("")
        with KafkaCluster(config_from_properties("", bootstrap=sandbox.bootstrap, source="t", env={})) as c:
            results = c.alter([Alteration(Entity.user("u0"), (Op("producer_byte_rate", 1.0),))],
                              validate_only=False)
            assert [(r.error_code, r.ok) for r in results] == [(56, False)]
            assert c.describe() == SMALL
        assert sandbox.state == SMALL
    err = capfd.readouterr().err
    assert "storage error: --state: cannot write" in err, err
    assert str(directory) in err, err


def test_validate_only_writes_nothing(tmp_path):
    state = tmp_path / "state.json"
    with Sandbox.start(SandboxConfig(state_file=state, seed=SMALL)) as sandbox:
        with KafkaCluster(config_from_properties("", bootstrap=sandbox.bootstrap, source="t", env={})) as c:
            change = [Alteration(Entity.user("new"), (Op("producer_byte_rate", 1.0),))]
            assert all(r.ok for r in c.alter(change, validate_only=True))
        assert not state.exists()
        assert sandbox.state == SMALL


def test_a_request_log_past_the_file_size_limit_never_breaks_a_request(tmp_path):
    """``--request-log`` is a diagnostic: when it cannot be written (here EFBIG) the sandbox says so
    once and keeps answering, an alter included."""
    log = tmp_path / "requests.jsonl"
    with serving(kqplan_command("sandbox", "--port", "0", "--request-log", str(log), limit=4096)) as (
            proc, bootstrap):
        with KafkaCluster(config_from_properties("", bootstrap=bootstrap, source="t", env={})) as c:
            for i in range(60):  # ~200 bytes a line: the log reaches the limit on the way
                results = c.alter([Alteration(Entity.user(f"u{i}"), (Op("producer_byte_rate", 1.0 + i),))],
                                  validate_only=False)
                assert results[0].ok
            assert len(c.describe()) == 60
        err = stop(proc)
    assert "malformed request" not in err
    assert err.count("cannot write --request-log") == 1, err
    assert f"--request-log {log}: [Errno 27] EFBIG" in err
    assert os.path.getsize(log) <= 4096


def test_a_seed_with_a_state_file_is_saved_before_the_first_request(tmp_path):
    """``--seed`` with ``--state``: the state file holds what is served from the start, so a
    restart without ``--seed`` serves the same (it was written only at the first alter)."""
    seed, state = tmp_path / "seed.json", tmp_path / "state.json"
    write_snapshot(seed, SMALL, "seeded-id")
    with serving(kqplan_command("sandbox", "--port", "0", "--seed", str(seed), "--state", str(state))):
        assert read_snapshot(state) == (SMALL, "seeded-id")
    with sandbox_process(state, "kraft") as (_, bootstrap):
        assert describe(bootstrap) == SMALL


@pytest.mark.parametrize("syncs_failing", [1, 2], ids=["written back", "cannot be written back"])
def test_a_directory_that_cannot_be_synced_after_the_rename(tmp_path, monkeypatch, capsys, syncs_failing):
    """The new file was renamed into place, then syncing its directory failed (EIO): the alter is
    refused with a storage error, and the file must not keep what was refused — the previous
    state is written back; when that fails too, the log says the file may hold the alter."""
    import errno

    import kqplan.files

    state_file = tmp_path / "state.json"
    write_snapshot(state_file, SMALL, "c")
    real_sync = kqplan.files._sync_directory
    failures = [syncs_failing]

    def sync(directory: Path) -> None:
        if failures[0] > 0:
            failures[0] -= 1
            raise OSError(errno.EIO, "Input/output error")
        real_sync(directory)

    with Sandbox.start(SandboxConfig(port=0, cluster_id="c", state_file=state_file)) as box:
        monkeypatch.setattr(kqplan.files, "_sync_directory", sync)
        config = config_from_properties("", bootstrap=box.bootstrap, source="t", env={})
        with KafkaCluster(config) as cluster:
            [result] = cluster.alter([Alteration(Entity.user("new"), (Op("producer_byte_rate", 5.0),))],
                                     validate_only=False)
            assert result.error_code == STORAGE_ERROR["kraft"][0]
            assert cluster.describe() == SMALL  # the refused alter is never served
    log = capsys.readouterr().err
    assert f"cannot write --state {state_file}: [Errno 5] EIO: Input/output error" in log
    on_disk, _ = read_snapshot(state_file)
    if syncs_failing == 1:
        assert "the previous state was written back" in log
        assert on_disk == SMALL
    else:
        assert "writing the previous state back failed too" in log
        assert "the file may hold the refused alter" in log
