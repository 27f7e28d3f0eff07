"""The GitHub Action and the example workflows: actionlint (installed by .ci/run) and structure."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import REPO

ACTIONLINT = shutil.which("actionlint") or str(Path(sys.executable).with_name("actionlint"))
WORKFLOWS = sorted([*(REPO / "examples" / "github").glob("*.yml"),
                    *(REPO / ".github" / "workflows").glob("*.yml")])
ACTION = yaml.safe_load((REPO / "action.yml").read_text())


def actionlint(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    assert Path(ACTIONLINT).exists(), "actionlint is missing: .ci/run installs it (go install …)"
    return subprocess.run([ACTIONLINT, "-no-color", *args], cwd=cwd, capture_output=True, text=True,
                          check=False, timeout=120)


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_workflow_passes_actionlint(workflow):
    done = actionlint(str(workflow))
    assert done.returncode == 0, done.stdout + done.stderr


def _use(tmp_path: Path, inputs: dict[str, str]) -> subprocess.CompletedProcess[str]:
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    shutil.copy(REPO / "action.yml", tmp_path / "action.yml")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)  # actionlint looks for a repository
    workflow = {"name": "t", "on": "pull_request", "jobs": {"plan": {"runs-on": "ubuntu-latest", "steps": [
        {"uses": "actions/checkout@v4"}, {"id": "k", "uses": "./", "with": inputs},
        {"run": "echo ${{ steps.k.outputs.changes }} ${{ steps.k.outputs.exit-code }}"}]}}}
    (tmp_path / ".github" / "workflows" / "t.yml").write_text(yaml.safe_dump(workflow, sort_keys=False))
    return actionlint(cwd=tmp_path)


def test_the_action_is_checked_through_a_workflow_that_uses_it(tmp_path):
    ok = _use(tmp_path / "ok", {"command": "plan", "cluster": "prod", "command-config": "x"})
    assert ok.returncode == 0, ok.stdout + ok.stderr
    typo = _use(tmp_path / "typo", {"command": "plan", "clustr": "prod"})
    assert typo.returncode != 0
    assert 'input "clustr" is not defined in action' in typo.stdout


def test_the_action_only_uses_declared_inputs_and_valid_bash():
    declared = set(ACTION["inputs"])
    text = (REPO / "action.yml").read_text()
    used = set(re.findall(r"inputs\.([a-z-]+)", text))
    assert used <= declared, used - declared
    assert ACTION["runs"]["using"] == "composite"
    for step in ACTION["runs"]["steps"]:
        if "run" not in step:
            continue
        assert step["shell"] == "bash"
        script = re.sub(r"\$\{\{[^}]*\}\}", "x", step["run"])
        check = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, check=False)
        assert check.returncode == 0, check.stderr


def test_gitlab_example_is_valid_yaml_with_the_three_stages():
    doc = yaml.safe_load((REPO / "examples" / "gitlab" / ".gitlab-ci.yml").read_text())
    assert doc["stages"] == ["validate", "plan", "apply"]
    assert "kqplan apply --plan plan.json" in " ".join(doc["apply"]["script"])
