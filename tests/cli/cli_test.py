"""The CLI: exit codes (0/1/2), outputs, saved plans, usage errors; README commands as processes."""

from __future__ import annotations

import json

import pytest

from kqplan.planfile.codec import loads_plan
from tests.helpers import REPO, run_cli, run_kqplan

PAY = "examples/payments"
PAY_STATE = "examples/payments/snapshot.json"
CONV = "examples/converged"
CONV_STATE = "examples/converged/snapshot.json"


@pytest.fixture(autouse=True)
def _repo_cwd(monkeypatch):
    monkeypatch.chdir(REPO)


def test_validate_examples():
    # every example project's manifests at once (examples/github and examples/gitlab hold CI
    # workflows, not manifests)
    result = run_cli("validate", "examples/payments", "examples/converged")
    assert result.exit_code == 0  # lint warnings only: the two example projects merged overlap
    assert result.stdout.endswith("Found 0 error(s) and 1 warning(s).\n")
    assert "warning[KQP170]" in result.stdout


@pytest.mark.parametrize("fmt", ["text", "markdown", "json"])
def test_plan_formats_and_detailed_exitcode(fmt):
    result = run_cli("plan", PAY, "--state", PAY_STATE, "--format", fmt, "--detailed-exitcode")
    assert result.exit_code == 2, result.stderr
    assert "Plan: 2 to add, 2 to change, 1 to delete." in result.stdout or fmt == "json"
    if fmt == "json":
        assert result.json["summary"] == {"add": 2, "change": 2, "delete": 1, "unchanged": 2}
    assert run_cli("plan", PAY, "--state", PAY_STATE, "--format", fmt).exit_code == 0


def test_converged_example_says_no_changes():
    result = run_cli("plan", CONV, "--state", CONV_STATE, "--detailed-exitcode")
    assert result.exit_code == 0
    assert result.stdout.startswith("No changes.")


def test_plan_out_saves_a_plan_file(tmp_path):
    out = tmp_path / "plan.json"
    result = run_cli("plan", PAY, "--state", PAY_STATE, "--out", out)
    assert result.exit_code == 0
    assert f"Saved the plan to {out}." in result.stdout
    plan = loads_plan(out.read_text(), source=str(out))
    assert plan.summary.total == 5
    assert plan.cluster.id == "kqplan-example-prod-eu"
    assert json.loads(out.read_text())["state_fingerprint"].startswith("sha256:")


def test_cluster_guard_refuses_another_cluster(tmp_path):
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"format_version": 1, "cluster_id": "someone-else", "entities": []}))
    result = run_cli("plan", PAY, "--state", other)
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: wrong cluster: the manifests are guarded to 'prod-eu' (id kqplan-example-prod-eu), "
        f"but snapshot:{other} is cluster someone-else\n"
        "  = help: point kqplan at the right cluster, or map the name to this id under [clusters] "
        "in kqplan.toml\n")


def test_invalid_manifests_stop_plan_before_the_cluster(tmp_path):
    result = run_cli("plan", "tests/manifest/bad/value_zero.yaml", "--state", tmp_path / "missing.json")
    assert result.exit_code == 1
    assert "error[KQP112]" in result.stderr
    assert "missing.json" not in result.stderr  # manifests are checked first


@pytest.mark.parametrize(("args", "message"), [
    (["plan", PAY], "Error: no cluster to work on"),
    (["plan", PAY, "--state", "nope.json"], "Error: cannot read snapshot nope.json: No such file"),
    (["plan", PAY, "--state", PAY_STATE, "--format", "yaml"], "Error: --format must be one of"),
    (["plan", PAY, "--nope"], "Error: No such option: --nope"),
    (["validate"], "Error: no manifests given"),  # paths may come from --cluster now
    (["frobnicate"], "Error: No such command 'frobnicate'"),
])
def test_usage_and_input_errors_exit_1_without_traceback(args, message):
    result = run_cli(*args)
    assert result.exit_code == 1
    assert result.stderr.startswith(message), result.stderr
    assert "Traceback" not in result.stderr


def test_bad_snapshot_is_a_clear_error(tmp_path):
    bad = tmp_path / "s.json"
    bad.write_text('{"format_version": 1, "entities": [{"entity": {"user": "a"}, "quotas": {"x": "y"}}]}')
    result = run_cli("plan", PAY, "--state", bad)
    assert result.exit_code == 1
    assert f"Error: {bad}: not a kqplan snapshot: entities.0.quotas.x:" in result.stderr


def test_readme_main_command_in_a_process():
    readme = (REPO / "README.md").read_text()
    assert f"kqplan plan {PAY} --sandbox {PAY_STATE}" in readme
    result = run_kqplan("plan", PAY, "--sandbox", PAY_STATE, cwd=REPO)
    assert result.exit_code == 0, result.stderr
    assert "Plan: 2 to add, 2 to change, 1 to delete." in result.stdout
    assert result.stderr == ""


def test_no_arguments_prints_help():
    result = run_kqplan(cwd=REPO)
    assert result.exit_code == 0
    assert "Usage: kqplan" in result.stdout + result.stderr
