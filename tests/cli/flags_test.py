"""A CLI people can script: version, help, python -m, completion, colour and JSON errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from kqplan import __version__
from tests.helpers import REPO, run_cli, run_kqplan, write_manifest

PAY = REPO / "examples" / "payments"


def test_version_help_and_python_m():
    assert run_cli("--version").stdout == f"kqplan {__version__}\n"
    assert run_cli("-V").stdout == f"kqplan {__version__}\n"
    helped = run_cli("plan", "-h")
    assert helped.exit_code == 0
    assert helped.stdout.startswith("Usage: kqplan plan [OPTIONS] [PATH...]\n")
    assert "<str>" not in helped.stdout and "<list" not in helped.stdout  # noqa: PT018
    module = subprocess.run([sys.executable, "-m", "kqplan", "-V"], capture_output=True, text=True,
                            check=False, cwd=REPO)
    assert module.stdout == f"kqplan {__version__}\n"


def test_shell_completion_script():
    done = run_kqplan("--show-completion", "bash", env={**os.environ, "SHELL": "/bin/bash"})
    assert done.exit_code == 0
    assert "_kqplan_completion()" in done.stdout


def test_errors_are_json_with_format_json():
    result = run_cli("plan", PAY, "--state", "nope.json", "--format", "json")
    assert result.exit_code == 1
    assert json.loads(result.stderr) == {"error": {
        "message": "cannot read snapshot nope.json: No such file or directory", "hint": None,
        "diagnostics": []}}
    bad = run_cli("validate", REPO / "tests" / "manifest" / "bad" / "value_zero.yaml", "--format", "json")
    assert bad.exit_code == 1
    assert json.loads(bad.stdout)[0]["code"] == "KQP112"


def test_colour_only_on_a_terminal_and_never_with_no_color():
    # run_cli's stdout is not a terminal: no escape codes, and NO_COLOR/--no-color keep it that way
    plain = run_cli("plan", PAY, "--state", PAY / "snapshot.json")
    assert "\x1b[" not in plain.stdout
    assert "\x1b[" not in run_cli("--no-color", "plan", PAY, "--state", PAY / "snapshot.json").stdout


def test_no_input_never_prompts():
    result = run_cli("--no-input", "apply", PAY, "--sandbox", PAY / "snapshot.json")
    assert result.exit_code == 1
    assert "refusing to apply without confirmation" in result.stderr


def test_only_the_named_command_is_built_and_the_app_is_left_whole(tmp_path):
    from kqplan.cli.main import app

    before = (list(app.registered_commands), list(app.registered_groups))
    plan_dir = tmp_path / "plan"  # a path that reads like a command name
    write_manifest(plan_dir / "q.yaml", "entities:\n  - user: a\n    quotas: {producer_byte_rate: 1}\n")
    done = run_cli("validate", plan_dir)
    assert (done.exit_code, done.stdout) == (0, "Valid: 1 entities in 1 file(s).\n")
    assert run_cli("fleet", "plan", "--help").stdout.startswith("Usage: kqplan fleet plan [OPTIONS]")
    typo = run_cli("valdate", plan_dir)  # nothing named: every command is there to suggest from
    assert "Did you mean 'validate', 'alter'?" in typo.stderr
    assert (list(app.registered_commands), list(app.registered_groups)) == before
