"""``kqplan fmt``'s three modes: plain ``fmt`` writes, ``--diff`` and ``--check`` write nothing
(``--diff`` is a preview, as black's, ruff's and ``gofmt -d``; it used to rewrite the files too),
``--check`` exits 1 when anything would change."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import run_cli

HAND_WRITTEN = ("kind: ClientQuotas\napiVersion: kqplan/v1\nentities:\n"
                "  - user: fmt-a   # kept\n    quotas: {producer_byte_rate: 1048576}\n")
CANONICAL = ("apiVersion: kqplan/v1\nkind: ClientQuotas\nentities:\n"
             "  - user: fmt-a   # kept\n    quotas: {producer_byte_rate: 1MiB}\n")


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    path = tmp_path / "q.yaml"
    path.write_text(HAND_WRITTEN)
    return path


def _unchanged(path: Path, stat_before: tuple[int, int]) -> bool:
    st = path.stat()
    return path.read_text() == HAND_WRITTEN and (st.st_mtime_ns, st.st_ino) == stat_before


def _stat(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_mtime_ns, st.st_ino


def test_diff_shows_the_change_and_writes_nothing(manifest: Path):
    before = _stat(manifest)
    result = run_cli("fmt", "--diff", manifest)
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout == (
        f"--- {manifest}\n+++ {manifest} (formatted)\n@@ -1,5 +1,5 @@\n+apiVersion: kqplan/v1\n"
        " kind: ClientQuotas\n-apiVersion: kqplan/v1\n entities:\n   - user: fmt-a   # kept\n"
        "-    quotas: {producer_byte_rate: 1048576}\n+    quotas: {producer_byte_rate: 1MiB}\n")
    assert _unchanged(manifest, before)


def test_check_names_the_file_exits_1_and_writes_nothing(manifest: Path):
    before = _stat(manifest)
    result = run_cli("fmt", "--check", manifest)
    assert (result.exit_code, result.stdout) == (1, f"{manifest}\n")
    assert _unchanged(manifest, before)
    both = run_cli("fmt", "--check", "--diff", manifest.parent)
    assert both.exit_code == 1
    assert both.stdout.startswith(f"--- {manifest}\n+++ {manifest} (formatted)\n")
    assert _unchanged(manifest, before)


def test_plain_fmt_writes_and_then_nothing_would_change(manifest: Path):
    result = run_cli("fmt", manifest)
    assert (result.exit_code, result.stdout) == (0, f"{manifest}\n")
    assert manifest.read_text() == CANONICAL
    assert run_cli("fmt", "--check", manifest).exit_code == 0
    assert run_cli("fmt", "--diff", manifest).stdout == ""
    assert run_cli("fmt", manifest).stdout == ""  # nothing rewritten the second time


def test_help_says_which_modes_write():
    text = " ".join(run_cli("fmt", "--help").stdout.split())
    assert "--check and --diff write nothing." in text
    assert ("--diff Write nothing; show the changes as a unified diff (with --check: exit 1 if any). "
            "Unlike terraform fmt -diff, which also writes.") in text
