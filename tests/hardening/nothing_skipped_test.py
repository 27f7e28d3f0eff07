"""Nothing in a manifest directory is silently dropped: with prune, a skipped file is a deletion."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.helpers import run_cli, write_manifest

PRUNE = ("ownership: {prune: true, scope: [{user: '*'}]}\nentities:\n  - user: a\n"
         "    quotas: {producer_byte_rate: 1}\n")


def snapshot(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"format_version": 1, "cluster_id": "c", "entities": [
        {"entity": {"user": u}, "quotas": {"producer_byte_rate": 1.0}} for u in ("a", "b")]}))
    return path


def test_a_nul_byte_does_not_cut_the_manifest_short(tmp_path):
    m = tmp_path / "m"
    write_manifest(m / "q.yaml", PRUNE + "\x00\n  - user: b\n    quotas: {producer_byte_rate: 1}\n")
    result = run_cli("plan", m, "--state", snapshot(tmp_path))
    assert result.exit_code == 1
    assert f"{m / 'q.yaml'}:7:1: error[KQP009] character U+0000 is not allowed in YAML" in result.stderr
    assert "- {user=b}" not in result.stdout  # nothing planned, nothing deleted


@pytest.mark.parametrize("case", ["dangling", "loop"])
def test_a_broken_symlink_is_an_error_not_a_skip(tmp_path, case):
    m = tmp_path / "m"
    write_manifest(m / "a.yaml", PRUNE)
    if case == "dangling":
        (m / "b.yaml").symlink_to(tmp_path / "gone.yaml")
    else:
        (m / "b.yaml").symlink_to(m / "c.yaml")
        (m / "c.yaml").symlink_to(m / "b.yaml")
    result = run_cli("validate", m)
    assert result.exit_code == 1
    assert f"{m / 'b.yaml'}: error[KQP008] symlink to nothing (dangling, or a loop)" in result.stdout


def test_an_unreadable_directory_is_an_error():
    # root reads every directory, so the check runs kqplan as an unprivileged user when it can
    as_user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
    base = Path(tempfile.mkdtemp(prefix="kqplan-perm-"))
    try:
        base.chmod(0o755)
        m = base / "m"
        write_manifest(m / "a.yaml", PRUNE)
        for p in (m, m / "a.yaml"):
            p.chmod(0o755)
        (m / "locked").mkdir()
        (m / "locked").chmod(0)
        done = subprocess.run([*as_user, sys.executable, "-m", "kqplan", "validate", str(m)],
                              capture_output=True, text=True, check=False, cwd=base,
                              env={**os.environ, "HOME": str(base)})
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{m / 'locked'}: error[KQP008] cannot read directory: Permission denied" in done.stdout


def test_a_directory_symlink_loop_is_reported(tmp_path):
    m = tmp_path / "m"
    write_manifest(m / "a.yaml", PRUNE)
    (m / "sub").mkdir()
    (m / "sub" / "up").symlink_to(m)
    result = run_cli("validate", m)
    assert result.exit_code == 1
    assert f"{m / 'sub' / 'up'}: error[KQP008] directory symlink loop" in result.stdout
