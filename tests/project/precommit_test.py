"""The pre-commit hooks, run by pre-commit itself against a temporary git repository."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO

pytestmark = pytest.mark.slow
PRE_COMMIT = Path(sys.executable).with_name("pre-commit")
BAD = ("apiVersion: kqplan/v1\nkind: ClientQuotas\nentities:\n  - user: a\n"
       "    quotas: {producer_byte_rate: 0}\n")
GOOD = ("apiVersion: kqplan/v1\nkind: ClientQuotas\nprofiles:\n  gold: {producer_byte_rate: 1MiB}\n"
        "entities: []\n")
USES_PROFILE = "kind: ClientQuotas\napiVersion: kqplan/v1\nentities:\n  - {user: b, profile: gold}  # b\n"


def git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": f"{PRE_COMMIT.parent}:{os.environ['PATH']}"}
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env,
                          check=False, timeout=600)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    git(tmp_path, "init", "-q")
    (tmp_path / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {REPO}\n    rev: {head}\n    hooks:\n      - id: kqplan-validate\n"
        "      - id: kqplan-fmt\n")
    (tmp_path / "ci.yml").write_text("on: push\njobs: {}\n")  # other YAML: the hooks leave it alone
    subprocess.run([str(PRE_COMMIT), "install"], cwd=tmp_path, check=True, capture_output=True)
    return tmp_path


def test_a_bad_manifest_blocks_the_commit_with_its_location(repo):
    (repo / "m").mkdir()
    (repo / "m" / "q.yaml").write_text(BAD)
    git(repo, "add", "-A")
    done = git(repo, "commit", "-qm", "bad")
    assert done.returncode != 0
    assert "m/q.yaml:5:34: error[KQP112] producer_byte_rate: Quota producer_byte_rate must be greater " \
           "than 0" in done.stdout + done.stderr
    assert git(repo, "log", "--oneline").returncode != 0  # nothing was committed


def test_a_good_manifest_passes_with_what_it_needs_from_other_files_and_fmt_fixes_it(repo):
    (repo / "m").mkdir()
    (repo / "m" / "profiles.yaml").write_text(GOOD)
    git(repo, "add", "-A")
    assert git(repo, "commit", "-qm", "profiles").returncode == 0
    (repo / "m" / "b.yaml").write_text(USES_PROFILE)  # valid only with profiles.yaml beside it
    git(repo, "add", "-A")
    first = git(repo, "commit", "-qm", "b")
    assert first.returncode != 0  # kqplan-fmt rewrote the file: pre-commit stops so it can be reviewed
    shown = first.stdout + first.stderr
    assert "kqplan validate...." in shown
    assert "Passed" in shown
    assert "- hook id: kqplan-fmt\n- files were modified by this hook" in shown
    fixed = (repo / "m" / "b.yaml").read_text()
    assert fixed == ("apiVersion: kqplan/v1\nkind: ClientQuotas\nentities:\n"
                     "  - {user: b, profile: gold}  # b\n")
    git(repo, "add", "-A")
    second = git(repo, "commit", "-qm", "b")
    assert second.returncode == 0, second.stdout + second.stderr
