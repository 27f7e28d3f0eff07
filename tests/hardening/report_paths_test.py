"""An output path that can never be written is refused up front, with the other report checks:
a symbolic-link loop (ELOOP) or a path below a regular file (ENOTDIR) used to fail only after the
apply had altered the cluster (issue 41). Sandbox over TCP."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kqplan.core.entity import Entity
from kqplan.sandbox import Sandbox, SandboxConfig
from tests.helpers import run_cli, write_manifest

ALTER = 44
MANIFEST = "entities:\n  - user: a\n    quotas: {producer_byte_rate: 1}\n"

MANIFEST = "entities:\n  - user: a\n    quotas: {producer_byte_rate: 1}\n"


def loop(tmp_path: Path) -> Path:
    os.symlink(tmp_path / "b", tmp_path / "a")
    os.symlink(tmp_path / "a", tmp_path / "b")
    return tmp_path / "a"


def self_loop(tmp_path: Path) -> Path:
    os.symlink("me", tmp_path / "me")
    return tmp_path / "me"


def under_loop(tmp_path: Path) -> Path:
    return loop(tmp_path) / "report.json"


def under_file(tmp_path: Path) -> Path:
    (tmp_path / "plain").write_text("x")
    return tmp_path / "plain" / "report.json"


@pytest.mark.parametrize(("make", "why"), [
    (loop, "it is a symbolic link that loops"),
    (self_loop, "it is a symbolic link that loops"),
    (under_loop, "it is a symbolic link that loops (or one of its directories is)"),
    (under_file, "a part of its directory is not a directory"),
])
@pytest.mark.parametrize("command", ["apply", "apply --format json"])
def test_a_report_path_that_cannot_be_written_is_refused_before_anything_is_sent(tmp_path, make, why,
                                                                                 command):
    path = write_manifest(tmp_path / "q.yaml", MANIFEST)
    report = make(tmp_path)
    extra = ("--format", "json") if "json" in command else ()
    with Sandbox.start(SandboxConfig(cluster_id="c")) as box:
        result = run_cli("apply", path, "--bootstrap-server", box.bootstrap, "--auto-approve",
                         "--report", report, *extra)
        assert result.exit_code == 1, result.stdout + result.stderr
        assert f"cannot write the report {report}: {why}" in result.stderr
        assert "Traceback" not in result.stderr
        assert "internal error" not in result.stderr
        assert box.requests_of(ALTER) == []
        assert Entity.user("a") not in box.state
