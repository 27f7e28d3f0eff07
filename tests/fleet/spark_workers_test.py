"""The Spark engine aggregates each unit's samples in the executors' Python
(kqplan/fleet/spark_sorted.py). A Python there without numpy or pyarrow is said as such: what is
missing, where, and how to fix it; no traceback, nothing written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO

KQPLAN = Path(sys.executable).with_name("kqplan")


def test_executors_without_pyarrow_are_said(tmp_path: Path) -> None:
    bare = tmp_path / "bare"  # a Python of its own: no numpy, no pyarrow
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    out = tmp_path / "out"
    env = {**os.environ, "PYSPARK_PYTHON": str(bare / "bin" / "python")}
    done = subprocess.run([str(KQPLAN), "fleet", "impact", "--usage", "usage/quota-metrics.csv",
                           "--out", str(out), "--engine", "spark"], cwd=REPO / "examples" / "fleet", env=env,
                          capture_output=True, text=True, check=False, timeout=240)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the Spark executors' Python has no pyarrow" in done.stderr
    assert "install numpy and pyarrow in the Python the executors run" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert not out.exists()
