"""Spark's own output (the JVM's start-up lines, log4j, pyspark's warnings) stays off the user's
terminal: a `kqplan fleet plan --engine spark` in a fresh process prints kqplan's lines only
(on stderr at most its own "still running" lines, when the job passes 10 s)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO

KQPLAN = Path(sys.executable).with_name("kqplan")


def test_spark_engine_keeps_its_noise_off_the_terminal() -> None:
    done = subprocess.run([str(KQPLAN), "fleet", "plan", "--engine", "spark"],
                          cwd=REPO / "examples" / "fleet",
                          capture_output=True, text=True, check=False, timeout=240)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith("Fleet: 2 clusters")
    still_running = re.compile(r"(Planning|Starting Spark|Joining on Spark)[^\n]*… \(\d+ s elapsed\)")
    assert [line for line in done.stderr.splitlines() if not still_running.fullmatch(line)] == []
