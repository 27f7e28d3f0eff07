"""``released:``: an entity kqplan stops managing stays on the cluster as it is — never deleted under
a prune scope, never changed, never reported as unmanaged — and the plan of the change that
releases it says so once (compared with the Git base), later plans nothing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from kqplan.core.entity import Entity
from kqplan.sandbox import Sandbox, SandboxConfig
from tests.helpers import run_cli

MANAGED = """\
apiVersion: kqplan/v1
kind: ClientQuotas
ownership:
  prune: true
  scope: [{user: "*"}]
entities:
  - user: api
    quotas: {producer_byte_rate: 10MiB}
  - user: legacy
    quotas: {producer_byte_rate: 1MiB}
"""
RELEASED = MANAGED.replace("  - user: legacy\n    quotas: {producer_byte_rate: 1MiB}\n", "").replace(
    "entities:\n", "released:\n  - {user: legacy}   # the old team's, not ours any more\nentities:\n")
CLUSTER = [({"user": "api"}, {"producer_byte_rate": 10485760.0}),
           ({"user": "legacy"}, {"producer_byte_rate": 2048.0})]  # changed by hand since


def snapshot(path: Path, entities: list[tuple[dict[str, str | None], dict[str, float]]]) -> Path:
    path.write_text(json.dumps({"format_version": 1, "cluster_id": "prod", "entities": [
        {"entity": e, "quotas": q} for e, q in entities]}), encoding="utf-8")
    return path


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                   check=True, capture_output=True, timeout=60)


@pytest.fixture
def repo(tmp_path, monkeypatch) -> Path:
    """A repository whose main lists {user=legacy}, and a branch that releases it."""
    monkeypatch.delenv("GITHUB_BASE_REF", raising=False)
    monkeypatch.delenv("KQPLAN_BASE_REF", raising=False)
    git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "q.yaml").write_text(MANAGED, encoding="utf-8")
    snapshot(tmp_path / "s.json", CLUSTER)
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "managed")
    git(tmp_path, "switch", "-q", "-c", "release")
    (tmp_path / "q.yaml").write_text(RELEASED, encoding="utf-8")
    git(tmp_path, "commit", "-qam", "release legacy")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_release_is_neither_changed_deleted_nor_reported(repo):
    before = run_cli("plan", "q.yaml", "--state", "s.json", "--fail-on-unmanaged")
    assert before.exit_code == 0
    assert before.stdout.splitlines()[0].startswith("No changes.")
    # the manifests of main would revert the change by hand; deleted, without the ownership entry
    git(repo, "switch", "-q", "main")
    managed = run_cli("plan", "q.yaml", "--state", "s.json")
    assert "~ producer_byte_rate = 2048 (2 KiB) -> 1048576 (1 MiB)" in managed.stdout


def test_the_plan_that_releases_says_so_once(repo, monkeypatch):
    monkeypatch.setenv("KQPLAN_BASE_REF", "main")  # the pull request: main does not release it
    shown = run_cli("plan", "q.yaml", "--state", "s.json")
    assert ("~ release {user=legacy}  # q.yaml:7:5: no longer managed, left on the cluster as it is "
            "(no request).") in shown.stdout
    assert shown.stdout.splitlines()[0].startswith("No changes.")  # no request: nothing to apply
    monkeypatch.setenv("KQPLAN_BASE_REF", "release")  # after the merge, the base releases it too
    later = run_cli("plan", "q.yaml", "--state", "s.json")
    assert "release" not in later.stdout
    monkeypatch.delenv("KQPLAN_BASE_REF")
    assert "release" not in run_cli("plan", "q.yaml", "--state", "s.json").stdout  # no base: silent
    monkeypatch.setenv("GITHUB_BASE_REF", "main")  # a GitHub pull request: origin/main
    git(repo, "update-ref", "refs/remotes/origin/main", "main")
    assert "~ release {user=legacy}" in run_cli("plan", "q.yaml", "--state", "s.json").stdout
    monkeypatch.setenv("GITHUB_BASE_REF", "unfetched")
    missing = run_cli("plan", "q.yaml", "--state", "s.json")
    assert ("Released entities are not shown: git cannot read the base origin/unfetched here (fetch it, "
            "or set KQPLAN_BASE_REF).") in missing.stdout


def test_apply_leaves_a_released_entity_alone(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "q.yaml").write_text(RELEASED, encoding="utf-8")
    legacy = Entity.user("legacy")
    seed = {legacy: {"producer_byte_rate": 2048.0}, Entity.user("gone"): {"producer_byte_rate": 1.0}}
    with Sandbox.start(SandboxConfig(port=0, seed=seed)) as sandbox:
        done = run_cli("apply", "q.yaml", "--bootstrap-server", sandbox.bootstrap, "--auto-approve")
        assert done.exit_code == 0, done.stdout + done.stderr
        assert "Apply complete: 1 added, 0 changed, 1 deleted." in done.stdout  # api added, gone pruned
        assert sandbox.state == {legacy: {"producer_byte_rate": 2048.0},
                                 Entity.user("api"): {"producer_byte_rate": 10485760.0}}


@pytest.mark.parametrize(("released", "message"), [
    ("  - {user: legacy}\n  - {user: legacy}\n",
     "q.yaml:8:5: error[KQP203] {user=legacy} is released twice\n  = note: first released at q.yaml:7:5"),
    ("  - {user: api}\n",
     "q.yaml:7:5: error[KQP203] {user=api} is both listed and released\n  = note: listed at q.yaml:9:5"),
    ("  - {usr: x}\n", "q.yaml:7:6: error[KQP104] unknown entity type 'usr' in released\n"
     "  = help: did you mean 'user'?"),
    ("  - {}\n", "q.yaml:7:5: error[KQP100] released entity names no entity type"),
    ("  - {user: x, ip: 1.2.3.4}\n",
     "q.yaml:7:5: error[KQP103] ip cannot be combined with user or client-id"),
])
def test_a_release_that_contradicts_the_manifests_is_located(tmp_path, monkeypatch, released, message):
    text = RELEASED.replace("  - {user: legacy}   # the old team's, not ours any more\n", released)
    (tmp_path / "q.yaml").write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = run_cli("validate", "q.yaml")
    assert result.exit_code == 1
    assert message in result.stdout, result.stdout


def test_released_in_two_layers_is_located(tmp_path, monkeypatch):
    (tmp_path / "base").mkdir()
    (tmp_path / "prod").mkdir()
    (tmp_path / "base" / "q.yaml").write_text(RELEASED, encoding="utf-8")
    (tmp_path / "prod" / "q.yaml").write_text(
        "apiVersion: kqplan/v1\nkind: ClientQuotas\nreleased: [{user: legacy}]\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = run_cli("validate", "base", "prod")
    assert result.exit_code == 1
    assert "prod/q.yaml:3:12: error[KQP203] {user=legacy} is released twice" in result.stdout
    assert "  = note: first released at base/q.yaml:7:5" in result.stdout


def test_import_leaves_a_released_entity_alone(tmp_path, monkeypatch):
    (tmp_path / "m").mkdir()
    scoped = RELEASED.replace('  scope: [{user: "*"}]', '  scope: [{user: "a*"}]')
    (tmp_path / "m" / "q.yaml").write_text(scoped, encoding="utf-8")
    snapshot(tmp_path / "s.json", [*CLUSTER, ({"user": "new"}, {"producer_byte_rate": 5.0})])
    monkeypatch.chdir(tmp_path)
    adopted = run_cli("import", "m", "--all-unmanaged", "--state", "s.json")
    assert adopted.exit_code == 0, adopted.stdout + adopted.stderr
    assert "Imported 1 entity" in adopted.stdout  # {user=new}, not the released one
    assert "legacy" not in (tmp_path / "m" / "q.yaml").read_text().split("released:")[1].split("entities:")[1]
    named = run_cli("import", "m", "--names", "user=legacy", "--state", "s.json")
    assert named.exit_code == 1
    assert "released by the manifests: {user=legacy} (m/q.yaml:7:5); nothing was changed" in named.stderr
