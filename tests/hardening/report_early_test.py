"""Every report describes its own run, even one refused while its options are read (a review of
issue 41): `--timeout 30` (no unit), an unknown `--cluster`, a flag that needs another, a project
whose kqplan.toml is wrong — each used to leave an earlier run's `"ok": true` standing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import REPO, run_cli

STALE = {"ok": True, "status": "finished", "stale": "an earlier run"}
PAY = REPO / "examples" / "payments"


def stale(path: Path) -> Path:
    path.write_text(json.dumps(STALE))
    return path


@pytest.mark.parametrize(("args", "error"), [
    (("--timeout", "30"), "--timeout: '30' is not a duration"),
    (("--cluster", "nosuch"), "nosuch"),
    (("--prometheus", "http://127.0.0.1:9"), "--prometheus is used only with --verify-enforcement"),
    (("--verify-enforcement=0s",), "--verify-enforcement"),
    (("--format", "yaml"), "--format"),
])
def test_a_single_apply_refused_while_reading_its_options_replaces_the_report(tmp_path, args, error):
    report = stale(tmp_path / "r.json")
    result = run_cli("apply", PAY, "--sandbox", "--auto-approve", "--report", report, *args)
    assert result.exit_code == 1
    assert error in result.stderr
    doc = json.loads(report.read_text())
    assert (doc["ok"], doc["status"]) == (False, "failed"), doc
    assert error in doc["error"]
    assert "stale" not in doc


def test_a_fleet_apply_refused_while_reading_its_options_replaces_the_report(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO / "examples" / "fleet")
    report = stale(tmp_path / "f.json")
    result = run_cli("fleet", "apply", "--auto-approve", "--timeout", "30", "--report", report)
    assert result.exit_code == 1
    doc = json.loads(report.read_text())
    assert (doc["status"], doc["ok"]) == ("failed", False), doc
    assert "--timeout: '30' is not a duration" in doc["error"]


def test_the_apply_s_own_document_is_not_overwritten_by_the_early_one(tmp_path):
    """An apply that fails inside its own recorder (its manifests) keeps that fuller document."""
    report = stale(tmp_path / "r.json")
    bad = tmp_path / "q.yaml"
    bad.write_text("entities:\n  - user: a\n    quotas: {producer_byte_rat: 1}\n")
    snapshot = PAY / "snapshot.json"
    result = run_cli("apply", bad, "--state", snapshot, "--auto-approve", "--report", report)
    assert result.exit_code == 1
    doc = json.loads(report.read_text())
    assert (doc["status"], doc["cluster"]["bootstrap"]) == ("failed", str(snapshot)), doc
    assert "error[KQP022] missing required field 'apiVersion'" in doc["error"]
