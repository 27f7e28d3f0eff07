"""A saved plan knows its cluster (issue 43): made with ``--cluster west``, it records the inventory
name, ``apply --plan`` applies it there without being told (as ``terraform apply PLAN`` does), a
``--cluster`` or a target that disagrees is refused before anything is sent, and plans name an
inventory cluster by its name first. Two sandbox clusters over TCP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kqplan.core.entity import Entity
from kqplan.sandbox import Sandbox, SandboxConfig
from tests.helpers import run_cli, write_manifest

ALTER = 44
P = "producer_byte_rate"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Sandbox, Sandbox]]:
    with Sandbox.start(SandboxConfig(cluster_id="west-id")) as west, \
            Sandbox.start(SandboxConfig(cluster_id="east-id")) as east:
        (tmp_path / "kqplan.toml").write_text(
            f'[clusters.west]\nid = "west-id"\nbootstrap-server = "{west.bootstrap}"\nmanifests = ["west"]\n'
            f'[clusters.east]\nid = "east-id"\nbootstrap-server = "{east.bootstrap}"\nmanifests = ["east"]\n')
        for name in ("west", "east"):
            write_manifest(tmp_path / name / "q.yaml",
                           f"entities:\n  - user: {name}-app\n    quotas: {{{P}: 1024}}\n")
        monkeypatch.chdir(tmp_path)
        yield tmp_path, west, east


def saved(repo_dir: Path) -> Path:
    out = repo_dir / "p.json"
    made = run_cli("plan", "--cluster", "west", "--out", out)
    assert made.exit_code == 0, made.stderr
    return out


def test_the_plan_names_its_cluster_and_apply_goes_there(repo):
    repo_dir, west, east = repo
    made = run_cli("plan", "--cluster", "west", "--out", repo_dir / "p.json")
    assert f"on cluster west (id west-id, {west.bootstrap})" in made.stdout
    doc = json.loads((repo_dir / "p.json").read_text())
    assert doc["cluster"]["name"] == "west"
    markdown = run_cli("plan", "--cluster", "west", "--format", "markdown").stdout
    assert f"cluster west (id west-id, {west.bootstrap})" in markdown
    applied = run_cli("apply", "--plan", repo_dir / "p.json", "--auto-approve",
                      "--report", repo_dir / "r.json")
    assert applied.exit_code == 0, applied.stderr
    # the report names the plan it applied by the file's own digest (not the plan retargeted)
    assert json.loads((repo_dir / "r.json").read_text())["plan_digest"] == doc["digest"]
    assert west.state == {Entity.user("west-app"): {P: 1024.0}}
    assert east.state == {}
    assert f"on cluster west (id west-id, {west.bootstrap})" in applied.stdout


def test_another_cluster_is_refused_before_anything_is_sent(repo):
    repo_dir, west, east = repo
    out = saved(repo_dir)
    other = run_cli("apply", "--plan", out, "--cluster", "east", "--auto-approve")
    assert other.exit_code == 1
    assert "Error: the plan was made for cluster west, not east; nothing was changed" in other.stderr
    wrong_target = run_cli("apply", "--plan", out, "--bootstrap-server", east.bootstrap, "--auto-approve")
    assert wrong_target.exit_code == 1
    assert "east-id" in wrong_target.stderr
    assert west.requests_of(ALTER) == east.requests_of(ALTER) == []
    right_target = run_cli("apply", "--plan", out, "--bootstrap-server", west.bootstrap, "--auto-approve")
    assert right_target.exit_code == 0, right_target.stderr
    assert Entity.user("west-app") in west.state


def test_a_plan_for_a_cluster_this_inventory_lacks_needs_a_target(repo, monkeypatch):
    repo_dir, west, _ = repo
    out = saved(repo_dir)
    (repo_dir / "kqplan.toml").write_text('[clusters.east]\nid = "east-id"\nmanifests = ["east"]\n')
    lost = run_cli("apply", "--plan", out, "--auto-approve")
    assert lost.exit_code == 1
    assert "the plan was made for inventory cluster west, which" in lost.stderr
    assert "does not list; nothing was changed" in lost.stderr
    assert west.requests_of(ALTER) == []
    (repo_dir / "kqplan.toml").unlink()
    nowhere = run_cli("apply", "--plan", out, "--auto-approve")
    assert "which no kqplan.toml was found to list; nothing was changed" in nowhere.stderr
    # a target in the environment is a target given, as --bootstrap-server is
    monkeypatch.setenv("KQPLAN_BOOTSTRAP_SERVER", west.bootstrap)
    applied = run_cli("apply", "--plan", out, "--auto-approve")
    assert applied.exit_code == 0, applied.stderr
    assert Entity.user("west-app") in west.state


def test_a_plan_without_an_inventory_cluster_reads_as_before(repo, tmp_path):
    """A plan made with an explicit target records no name (and plans saved before names existed
    keep their digest): apply --plan needs the target, as it always did."""
    repo_dir, west, _ = repo
    out = repo_dir / "plain.json"
    path = write_manifest(repo_dir / "plain" / "q.yaml",
                          f"entities:\n  - user: solo\n    quotas: {{{P}: 1}}\n")
    assert run_cli("plan", path, "--bootstrap-server", west.bootstrap, "--out", out).exit_code == 0
    assert "name" not in json.loads(out.read_text())["cluster"]
    shown = run_cli("plan", path, "--bootstrap-server", west.bootstrap)
    assert f"on cluster west-id ({west.bootstrap})" in shown.stdout
    applied = run_cli("apply", "--plan", out, "--cluster", "west", "--auto-approve",
                      "--report", repo_dir / "r.json")
    assert applied.exit_code == 0, applied.stderr
    # applied to an inventory cluster it did not name, the report still records the file's digest
    recorded = json.loads((repo_dir / "r.json").read_text())["plan_digest"]
    assert recorded == json.loads(out.read_text())["digest"]
