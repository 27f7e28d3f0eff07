"""Progress of long fleet jobs: Spark's running stages reach the spinner, and a CI log gets a
"still running" line at a bounded rate instead of silence (or a spinner's escape codes)."""

from __future__ import annotations

import io
import re
import time
from pathlib import Path

from kqplan.console import Streams
from kqplan.fleet.spark import tasks_text, watch
from tests.helpers import fleet_cli


def test_tasks_text_sums_the_running_stages():
    assert tasks_text("Joining", []) == "Joining"
    assert tasks_text("Joining", [(3, 8)]) == "Joining: 3/8 tasks"
    assert tasks_text("Joining", [(3, 8), (0, 4)]) == "Joining: 2 stages, 3/12 tasks"


def test_a_ci_log_gets_a_line_only_once_a_step_has_run_that_long():
    err = io.StringIO()
    with Streams(out=io.StringIO(), err=err, interactive=False).progress(log_every=0.3) as progress:
        progress("Planning")  # at once: nothing, a short job leaves the log clean
        assert err.getvalue() == ""
        time.sleep(0.35)
        progress("Joining on Spark: 1/4 tasks")
        progress("Joining on Spark: 2/4 tasks")  # within the interval: dropped
    assert re.fullmatch(r"Joining on Spark: 1/4 tasks… \(0 s elapsed\)\n", err.getvalue())


def test_without_log_every_a_ci_log_stays_silent():
    err = io.StringIO()
    with Streams(out=io.StringIO(), err=err, interactive=False).progress() as progress:
        time.sleep(0.01)
        progress("Verifying")
    assert err.getvalue() == ""


def test_watch_reports_the_running_stages_task_counts(spark):
    heard: list[str] = []

    def slow(x: int) -> int:
        time.sleep(0.3)
        return x

    with watch(spark, heard.append, "Resolving", every=0.1):
        assert spark.sparkContext.parallelize(range(4), 4).map(slow).sum() == 6
    assert heard[0] == "Resolving"
    counts = [m for m in heard if re.fullmatch(r"Resolving: [0-3]/4 tasks", m)]
    assert counts, heard
    # the watcher has stopped with the block: nothing more is reported
    before = len(heard)
    time.sleep(0.3)
    assert len(heard) == before


def test_a_fleet_job_names_its_steps_in_a_ci_log(fleet, spark, monkeypatch):
    monkeypatch.setattr("kqplan.commands.fleet.LOG_EVERY", 0.0)
    usage = Path(fleet) / "usage.csv"
    usage.write_text("cluster,user,client_id,producer_byte_rate\neast,a,x,3\n")
    result = fleet_cli(fleet, "impact", "--cluster", "east", "--cluster", "west", "--usage", usage,
                       "--out", fleet / "impact", "--engine", "spark")
    assert result.exit_code == 0, result.stdout + result.stderr
    lines = [re.sub(r" \(\d+ s elapsed\)$", "", line) for line in result.stderr.splitlines()]
    # a step slower than a tick (LOG_EVERY 0: every tick) is named again: the same line, once here
    lines = [line for i, line in enumerate(lines) if i == 0 or line != lines[i - 1]]
    assert lines[:3] == ["Planning (0/2 clusters)…", "Planning (1/2 clusters)…", "Planning (2/2 clusters)…"]
    assert lines[3:5] == ["Starting Spark local[*]…", "Resolving the usage on Spark…"]
