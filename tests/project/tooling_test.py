"""The linters are part of the suite, so CI enforces them: ruff and mypy --strict."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO

BIN = Path(sys.executable).parent


@pytest.mark.slow
def test_ruff_is_clean():
    proc = subprocess.run([str(BIN / "ruff"), "check", "."], cwd=REPO, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_mypy_strict_is_clean():
    proc = subprocess.run([str(BIN / "mypy"), "--strict", "kqplan"], cwd=REPO, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
