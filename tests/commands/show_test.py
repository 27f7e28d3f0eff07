"""``kqplan show PLANFILE``: a saved plan printed as ``plan`` prints it (text, Markdown, JSON), read
and checked as ``apply --plan`` reads it, with no cluster; plan's exit codes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kqplan.sandbox import Sandbox, SandboxConfig
from tests.helpers import run_cli, write_manifest

MANIFEST = "entities:\n  - user: show-a\n    quotas: {producer_byte_rate: 1MiB}\n"


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    with Sandbox.start(SandboxConfig(port=0)) as box:
        yield box


def _saved(tmp_path: Path, sandbox: Sandbox, *args: str) -> tuple[Path, Path]:
    manifest = write_manifest(tmp_path / "m" / "q.yaml", MANIFEST)
    out = tmp_path / "plan.json"
    made = run_cli("plan", manifest, "--bootstrap-server", sandbox.bootstrap, "--out", out, *args)
    assert made.exit_code == 0, made.stderr
    return manifest, out


def test_show_prints_what_plan_printed_in_every_format(tmp_path: Path, sandbox: Sandbox):
    manifest, out = _saved(tmp_path, sandbox)
    for fmt in ("text", "markdown", "json"):
        shown = run_cli("show", out, "--format", fmt)
        planned = run_cli("plan", manifest, "--bootstrap-server", sandbox.bootstrap, "--format", fmt,
                          *(("--out", tmp_path / "again.json") if fmt != "text" else ()))
        assert (shown.exit_code, shown.stderr) == (0, "")
        # Markdown points at the plan file for anything cut: the file named, each time
        assert shown.stdout == planned.stdout.replace(str(tmp_path / "again.json"), str(out)), fmt
    assert run_cli("show", out).stdout.startswith(
        f"kqplan will perform the following actions on cluster kqplan-sandbox-cluster ({sandbox.bootstrap}), "
        "Kafka >=4.3 (kraft):\n\n  + {user=show-a}  # ")
    assert run_cli("show", out, "--format", "json").stdout == out.read_text()  # the file itself


def test_show_exits_as_plan_does(tmp_path: Path, sandbox: Sandbox):
    _, out = _saved(tmp_path, sandbox)
    assert run_cli("show", out).exit_code == 0
    assert run_cli("show", out, "--detailed-exitcode").exit_code == 2  # changes
    applied = run_cli("apply", "--plan", out, "--bootstrap-server", sandbox.bootstrap, "--auto-approve")
    assert applied.exit_code == 0, applied.stderr
    _, converged = _saved(tmp_path, sandbox)
    nothing = run_cli("show", converged, "--detailed-exitcode")
    assert nothing.exit_code == 0
    assert nothing.stdout.startswith("No changes. The cluster matches the manifests. (1 entity checked on ")


def test_show_reads_a_plan_made_against_a_snapshot_offline(tmp_path: Path):
    snapshot = tmp_path / "s.json"
    snapshot.write_text(json.dumps({"format_version": 1, "cluster_id": "snap", "entities": []}))
    out = tmp_path / "p.json"
    made = run_cli("plan", write_manifest(tmp_path / "q.yaml", MANIFEST), "--state", snapshot, "--out", out)
    assert made.exit_code == 0, made.stderr
    shown = run_cli("show", out, "--format", "markdown")
    assert shown.exit_code == 0, shown.stderr
    assert shown.stdout.startswith("### kqplan: 1 to add, 0 to change, 0 to delete\n")


@pytest.mark.parametrize(("content", "message"), [
    (None, "Error: cannot read saved plan {path}: No such file or directory\n"),
    ("{", "Error: {path}: not a kqplan plan file: (top level): Invalid JSON: EOF while parsing an object at "
          "line 1 column 1\n  = help: plan files are written by `kqplan plan --out FILE`\n"),
    ('{"format_version": 1}', "Error: {path}: not a kqplan plan file: cluster: Field required\n"
                              "  = help: plan files are written by `kqplan plan --out FILE`\n"),
])
def test_a_bad_plan_file_is_a_located_error_without_a_traceback(tmp_path: Path, content: str | None,
                                                                message: str):
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    result = run_cli("show", path)
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == message.format(path=path)


def test_an_edited_plan_is_refused_as_apply_refuses_it(tmp_path: Path, sandbox: Sandbox):
    _, out = _saved(tmp_path, sandbox)
    out.write_text(out.read_text().replace("1048576.0", "2097152.0"))
    result = run_cli("show", out)
    assert result.exit_code == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith(f"Error: {out}: ")


def test_a_directory_or_device_is_refused_by_name(tmp_path: Path):
    for path in (tmp_path, Path("/dev/zero")):
        result = run_cli("show", path)
        assert result.exit_code == 1
        assert result.stderr.startswith(f"Error: cannot read saved plan {path}: it is a "), result.stderr
        assert "Traceback" not in result.stderr


def test_json_errors_for_format_json_and_a_bad_format_is_a_usage_error(tmp_path: Path):
    path = tmp_path / "bad.json"
    path.write_text("[]")
    as_json = run_cli("show", path, "--format", "json")
    assert as_json.exit_code == 1
    assert json.loads(as_json.stderr)["error"]["message"].startswith(f"{path}: not a kqplan plan file")
    wrong = run_cli("show", path, "--format", "yaml")
    assert (wrong.exit_code, wrong.stderr) == (1, "Error: --format must be one of text | markdown | json, "
                                                  "not 'yaml'\n")
