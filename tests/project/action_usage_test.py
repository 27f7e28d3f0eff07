"""The GitHub Action's ``usage`` and ``fail-on-throttle`` inputs, run as the runner runs the step
(``run_step``), against the sandbox: the usage files reach ``kqplan plan`` as ``--usage`` each, the
PR comment ends with the "Would throttle" section, and a bad input is refused before kqplan runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kqplan.sandbox import Sandbox, SandboxConfig
from tests.helpers import write_manifest
from tests.project.action_test import run_step

HEADER = "cluster,user,client_id,producer_byte_rate\n"


def _workspace(root: Path) -> Path:
    """Quotas of 40 KiB/s on {user=alice} (three clients of 20 000 B/s) and {client-id=shared}
    (two users of 25 000 B/s), the usage in two files: each client under its quota, each bucket
    over it."""
    workspace = root / "repo"
    write_manifest(workspace / "quotas" / "q.yaml",
                   "entities:\n  - user: alice\n    quotas: {producer_byte_rate: 40KiB}\n"
                   "  - client-id: shared\n    quotas: {producer_byte_rate: 40KiB}\n")
    (workspace / "usage").mkdir()
    (workspace / "usage" / "alice.csv").write_text(
        HEADER + "".join(f"prod,alice,alice-{n},20000\n" for n in (1, 2, 3)))
    (workspace / "usage" / "shared.csv").write_text(
        HEADER + "prod,bob,shared,25000\nprod,carol,shared,25000\n")
    return workspace


@pytest.mark.parametrize("usage", ["usage/alice.csv usage/shared.csv", "usage/alice.csv\nusage/shared.csv\n",
                                   "usage"])
def test_the_usage_files_reach_the_plan_and_its_comment(tmp_path, usage):
    workspace = _workspace(tmp_path)
    with Sandbox.start(SandboxConfig()) as box:
        plan = run_step(workspace, tmp_path / "r", command="plan", paths="quotas", usage=usage,
                        bootstrap_server=box.bootstrap)
    assert plan.code == 0, plan.stdout + plan.stderr
    assert plan.outputs["exit-code"] == "2"
    assert plan.summary.startswith("### kqplan: 2 to add, 0 to change, 0 to delete\n")
    assert "#### Would throttle: 2 buckets (2 newly)." in plan.summary
    assert "| newly throttled | `{user=alice}` | producer_byte_rate |" in plan.summary
    assert "| newly throttled | `{client-id=shared}` | producer_byte_rate |" in plan.summary
    assert "usage" not in json.loads((workspace / "kqplan-plan.json").read_text())  # the plan alone


def test_fail_on_throttle_fails_the_step_and_says_why(tmp_path):
    workspace = _workspace(tmp_path)
    with Sandbox.start(SandboxConfig()) as box:
        failed = run_step(workspace, tmp_path / "r1", command="plan", paths="quotas", usage="usage",
                          fail_on_throttle="true", bootstrap_server=box.bootstrap)
        (workspace / "usage" / "alice.csv").write_text(HEADER + "prod,alice,alice-1,20000\n")
        (workspace / "usage" / "shared.csv").write_text(HEADER + "prod,bob,shared,25000\n")
        calm = run_step(workspace, tmp_path / "r2", command="plan", paths="quotas", usage="usage",
                        fail_on_throttle="true", bootstrap_server=box.bootstrap)
    assert failed.code == 1
    assert failed.outputs["exit-code"] == "1"
    assert failed.summary.startswith("**kqplan plan failed (exit 1).**\n")
    assert "#### Would throttle: 2 buckets (2 newly)." in failed.summary  # the plan is still shown
    assert "the plan would newly throttle 2 buckets (--fail-on-throttle)" in failed.summary
    assert (workspace / "kqplan-plan.json").exists()
    # the control: under their quotas, the same gate passes
    assert calm.code == 0, calm.stdout + calm.stderr
    assert calm.outputs["exit-code"] == "2"
    assert "#### Would throttle: 0 buckets (0 newly)." in calm.summary


@pytest.mark.parametrize(("inputs", "said"), [
    ({"command": "plan", "usage": '"usage/a b.csv"'}, "usage: quotes and backslashes are not accepted"),
    ({"command": "plan", "usage": "usage\n--fail-on-throttle"}, "usage: a path must not start with '-'"),
    ({"command": "validate", "usage": "usage"}, "usage and fail-on-throttle are for command plan or drift, "
                                               "not 'validate'"),
    ({"command": "apply", "fail_on_throttle": "true"}, "usage and fail-on-throttle are for command plan or "
                                                      "drift, not 'apply'"),
    ({"command": "plan", "fail_on_throttle": "true"}, "fail-on-throttle needs usage"),
    ({"command": "plan", "fail_on_throttle": "yes", "usage": "usage"},
     "fail-on-throttle must be \"true\" or \"false\", not 'yes'"),
])
def test_bad_usage_inputs_are_refused_before_kqplan_runs(tmp_path, inputs, said):
    workspace = _workspace(tmp_path)
    refused = run_step(workspace, tmp_path / "r", paths="quotas", bootstrap_server="127.0.0.1:1", **inputs)
    assert refused.code == 1
    assert refused.stdout.startswith(f"::error title=kqplan::{said}"), refused.stdout
    assert len(refused.stdout.splitlines()) == 1
    assert not (tmp_path / "r" / "output").read_text()  # nothing ran
