"""Files kqplan writes, through the real command line: a symlinked manifest stays a symlink (its
target is rewritten) with its mode, an existing file keeps its mode, and a file kqplan creates gets
``0666 & ~umask`` like any file the user creates (it was 0600, whatever the umask)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kqplan.core.entity import Entity
from kqplan.snapshot.file import write_snapshot
from tests.helpers import REPO, run_cli, write_manifest


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(params=[0o022, 0o002], ids=["umask-022", "umask-002"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    """The process's umask for one test (subprocesses inherit it)."""
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


STATE = {Entity.user("alice"): {"producer_byte_rate": 1024.0},
         Entity.user(None): {"consumer_byte_rate": 2048.0}}


def test_fmt_keeps_a_symlinked_manifest_a_symlink_and_its_mode(tmp_path):
    target = write_manifest(tmp_path / "shared" / "quotas.yaml",
                            "entities:\n  - quotas: {producer_byte_rate: 1048576}\n    user: a\n")
    target.chmod(0o640)
    link = tmp_path / "manifests" / "quotas.yaml"
    link.parent.mkdir()
    link.symlink_to(Path("..") / "shared" / "quotas.yaml")
    result = run_cli("fmt", tmp_path / "manifests")
    assert result.exit_code == 0, result.stderr
    assert link.is_symlink()
    assert os.readlink(link) == str(Path("..") / "shared" / "quotas.yaml")
    assert target.read_text() == ("apiVersion: kqplan/v1\nkind: ClientQuotas\nentities:\n"
                                  "  - user: a\n    quotas: {producer_byte_rate: 1MiB}\n")
    assert mode(target) == 0o640
    assert not [p for p in (tmp_path / "shared").iterdir() if p != target]  # no temporary file left


def test_export_keeps_the_mode_of_a_file_it_replaces(tmp_path):
    snap = tmp_path / "s.json"
    write_snapshot(snap, STATE, "c-1")
    out = tmp_path / "m"
    assert run_cli("export", "--state", snap, "--out", out, "--split-by", "user").exit_code == 0
    alice = out / "users" / "alice.yaml"
    alice.chmod(0o640)
    write_snapshot(snap, {Entity.user("alice"): {"producer_byte_rate": 2048.0}}, "c-1")
    result = run_cli("export", "--state", snap, "--out", out, "--split-by", "user", "--force")
    assert result.exit_code == 0, result.stderr
    assert "2KiB" in alice.read_text()
    assert mode(alice) == 0o640


def test_export_and_import_create_files_with_the_umask(tmp_path, umask):
    expected = 0o666 & ~umask
    snap = tmp_path / "s.json"
    write_snapshot(snap, STATE, "c-1")
    out = tmp_path / "m"
    assert run_cli("export", "--state", snap, "--out", out, "--split-by", "user").exit_code == 0
    assert {p.relative_to(out).as_posix(): mode(p) for p in out.rglob("*.yaml")} == {
        "defaults.yaml": expected, "ownership.yaml": expected, "users/alice.yaml": expected}
    snapshot = run_cli("export", "--state", snap, "--out", tmp_path / "s2.json", "--format", "json")
    assert snapshot.exit_code == 0, snapshot.stderr
    assert mode(tmp_path / "s2.json") == expected
    manifests = tmp_path / "imported"
    write_manifest(manifests / "base.yaml", "entities: []\n").chmod(0o600)
    result = run_cli("import", manifests, "--all-unmanaged", "--split-by", "user", "--state", snap)
    assert result.exit_code == 0, result.stderr
    assert mode(manifests / "users" / "alice.yaml") == expected
    assert mode(manifests / "defaults.yaml") == expected


def test_plan_out_and_apply_report_are_created_with_the_umask(tmp_path, umask):
    expected = 0o666 & ~umask
    snap = tmp_path / "s.json"
    write_snapshot(snap, STATE, "c-1")
    manifest = write_manifest(tmp_path / "m" / "q.yaml",
                              "entities:\n  - user: bob\n    quotas: {producer_byte_rate: 1KiB}\n")
    planned = run_cli("plan", manifest, "--state", snap, "--out", tmp_path / "plan.json")
    assert planned.exit_code == 0, planned.stderr
    assert mode(tmp_path / "plan.json") == expected
    applied = run_cli("apply", manifest, "--sandbox", snap, "--auto-approve", "--report", tmp_path / "r.json")
    assert applied.exit_code == 0, applied.stderr
    assert mode(tmp_path / "r.json") == expected


def test_fleet_rightsize_creates_files_with_the_umask(tmp_path, umask):
    expected = 0o666 & ~umask
    write_snapshot(tmp_path / "east.json", STATE, "east-id")
    (tmp_path / "kqplan.toml").write_text('[clusters.east]\nid = "east-id"\nsnapshot = "east.json"\n')
    (tmp_path / "usage.csv").write_text("cluster,user,client_id,producer_byte_rate,ts\n"
                                        "east,alice,app,5000,1\neast,bob,app,70000,1\n")
    out = tmp_path / "out"
    result = run_cli("--config", tmp_path / "kqplan.toml", "fleet", "rightsize", "--usage",
                     tmp_path / "usage.csv", "--out", out)
    assert result.exit_code == 0, result.stdout + result.stderr
    written = {p.relative_to(out).as_posix(): mode(p) for p in out.rglob("*") if p.is_file()}
    assert "east/rightsize.yaml" in written
    assert written == dict.fromkeys(written, expected)


def test_the_sandbox_state_file_is_created_with_the_umask(tmp_path, umask):
    expected = 0o666 & ~umask
    state = tmp_path / "state.json"
    exe = Path(sys.executable).with_name("kqplan")
    proc = subprocess.Popen([str(exe), "sandbox", "--port", "0", "--state", str(state)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("listening on 127.0.0.1:"), (line, proc.stderr.read() if proc.stderr else "")
        altered = run_cli("alter", "--names", "user=x", "--add", "producer_byte_rate=1",
                          "--bootstrap-server", line.split()[-1])
        assert altered.exit_code == 0, altered.stderr
    finally:
        proc.terminate()
        proc.wait(10)
    assert mode(state) == expected
