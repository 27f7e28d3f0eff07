"""CLI details of issue 13: version/-h/python -m, colour on a terminal and --no-color, lint warnings in
plan (stderr, JSON notes, --format github), the plan --out hint that works as printed."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

from kqplan import __version__
from kqplan.core.entity import Entity
from kqplan.sandbox import Sandbox, SandboxConfig
from tests.helpers import REPO, run_cli, run_kqplan, write_manifest

LINTY = (
    'entities:\n  - user: "User:alice"\n    quotas: {producer_byte_rate: 1MiB}\n'
    "  - user: <default>\n    quotas: {producer_byte_rate: 2MiB}\n"
)
KQP172 = (
    "warning[KQP172] user 'User:alice' will never match: Kafka compares the principal name without the "
    "'User:' prefix"
)
DEFAULT_NOTE = (
    "warning: the change to {user=<default>} (producer_byte_rate) affects every principal without a "
    "more specific entry for these keys; pass --principals FILE to see who"
)


def _empty_snapshot(tmp_path: Path) -> Path:
    snap = tmp_path / "s.json"
    snap.write_text('{"format_version": 1, "cluster_id": "x", "entities": []}')
    return snap


def test_version_and_help_from_the_console_script_and_python_m():
    assert run_kqplan("--version").stdout == f"kqplan {__version__}\n"
    assert run_kqplan("-V").stdout == f"kqplan {__version__}\n"
    helped = run_kqplan("-h")
    assert helped.exit_code == 0
    assert helped.stdout.startswith("Usage: kqplan [OPTIONS] COMMAND [ARGS]...\n")
    module = subprocess.run(
        [sys.executable, "-m", "kqplan", "--version"], capture_output=True, text=True, check=False, cwd=REPO
    )
    assert (module.returncode, module.stdout) == (0, f"kqplan {__version__}\n")


def _on_a_terminal(*args: str | Path) -> bytes:
    """Run the console script with stdout on a pseudo-terminal; all it wrote."""
    exe = Path(sys.executable).with_name("kqplan")
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env["TERM"] = "xterm"
    master, slave = pty.openpty()
    proc = subprocess.Popen([str(exe), *map(str, args)], stdout=slave, stderr=subprocess.DEVNULL, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(master)
    return b"".join(chunks)


def test_colour_on_a_terminal_and_none_with_no_color(tmp_path):
    q = write_manifest(
        tmp_path / "q.yaml", "entities:\n  - user: a\n    quotas: {producer_byte_rate: 1MiB}\n"
    )
    snap = _empty_snapshot(tmp_path)
    coloured = _on_a_terminal("plan", q, "--state", snap)
    assert b"\x1b[" in coloured
    assert b"  \x1b[32m+\x1b[0m {user=a}  # " in coloured
    plain = _on_a_terminal("--no-color", "plan", q, "--state", snap)
    assert b"\x1b[" not in plain
    assert b"  + {user=a}" in plain


def test_plan_shows_lint_warnings_on_stderr_and_in_json_notes(tmp_path):
    q = write_manifest(tmp_path / "q.yaml", LINTY)
    snap = _empty_snapshot(tmp_path)
    text = run_cli("plan", q, "--state", snap)
    assert text.exit_code == 0, text.stderr
    assert f"{q}:4:11: {KQP172}\n  = help: write `user: alice`\n" in text.stderr
    assert "KQP172" not in text.stdout
    js = run_cli("plan", q, "--state", snap, "--format", "json")
    assert js.exit_code == 0, js.stderr
    assert js.json["notes"] == [DEFAULT_NOTE, f"{q}:4:11: {KQP172}"]


def test_plan_format_github_is_workflow_commands(tmp_path):
    q = write_manifest(tmp_path / "q.yaml", LINTY)
    result = run_cli("plan", q, "--state", _empty_snapshot(tmp_path), "--format", "github")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert all(line.startswith("::") for line in lines), lines
    assert (
        f"::warning title=kqplan KQP172,file={q},line=4,col=11::user 'User:alice' will never match: Kafka "
        "compares the principal name without the 'User:' prefix (help: write `user: alice`) "
        "(see https://kqplan.dev/diagnostics/KQP172/)"
    ) in lines
    assert lines[-1] == "::notice title=kqplan plan::Plan: 2 to add, 0 to change, 0 to delete."


def test_plan_format_github_reports_each_warning_once(tmp_path):
    q = write_manifest(tmp_path / "q.yaml", LINTY)
    result = run_cli("plan", q, "--state", _empty_snapshot(tmp_path), "--format", "github")
    assert sum("KQP172" in line for line in result.stdout.splitlines()) == 1, result.stdout


def test_plan_out_hint_with_bootstrap_server_works_as_printed(tmp_path):
    q = write_manifest(
        tmp_path / "q.yaml", "entities:\n  - user: a\n    quotas: {producer_byte_rate: 1MiB}\n"
    )
    with Sandbox.start(SandboxConfig(cluster_id="hint")) as box:
        planned = run_cli("plan", q, "--bootstrap-server", box.bootstrap, "--out", tmp_path / "p.json")
        assert planned.exit_code == 0, planned.stderr
        hint = planned.stdout.strip().splitlines()[-1]
        command = hint.split("Apply exactly these changes with: ", 1)[1]
        assert command == f"kqplan apply --plan {tmp_path / 'p.json'} --bootstrap-server {box.bootstrap}"
        applied = run_cli(*command.split()[1:], "--auto-approve")
        assert applied.exit_code == 0, applied.stdout + applied.stderr
        assert box.state[Entity.user("a")] == {"producer_byte_rate": 2.0**20}


def test_plan_out_hint_with_sandbox_seed_works_as_printed(tmp_path):
    q = write_manifest(
        tmp_path / "q.yaml", "entities:\n  - user: a\n    quotas: {producer_byte_rate: 1MiB}\n"
    )
    seed = _empty_snapshot(tmp_path)
    planned = run_cli("plan", q, "--sandbox", seed, "--out", tmp_path / "p.json")
    assert planned.exit_code == 0, planned.stderr
    command = planned.stdout.strip().splitlines()[-1].split("Apply exactly these changes with: ", 1)[1]
    assert command == f"kqplan apply --plan {tmp_path / 'p.json'} --sandbox {seed}"
    applied = run_kqplan(*command.split()[1:], "--auto-approve")
    assert applied.exit_code == 0, applied.stdout + applied.stderr


def test_no_input_with_cluster_refuses_to_prompt(tmp_path):
    write_manifest(
        tmp_path / "q.yaml", "entities:\n  - user: a\n    quotas: {producer_byte_rate: 1MiB}\n"
    )
    (tmp_path / "kqplan.toml").write_text('[clusters.s]\nsnapshot = "s.json"\nmanifests = ["q.yaml"]\n')
    _empty_snapshot(tmp_path)
    result = run_cli("--no-input", "--config", tmp_path / "kqplan.toml", "apply", "--cluster", "s")
    assert result.exit_code == 1
    assert result.stderr.startswith(
        "Error: refusing to apply without confirmation: not running on a terminal\n"
    )
