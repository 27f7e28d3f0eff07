"""The Spark driver's memory (issue 42): a driver kqplan starts gets ``[limits] engine-memory-mib``
or a size from the machine, the user's own Spark configuration wins, too little is refused before
a JVM starts, and a JVM out of heap is an error naming the heap and the ways out — never an
internal error with a Java stack. The JVMs here are real, each in a process of its own (the test
process's session has its own heap, tests/conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kqplan.core.errors import KqplanError
from kqplan.fleet.resources import default_memory
from kqplan.fleet.spark_memory import DRIVER_FLOOR, driver_memory, set_elsewhere
from tests.fleet.engine_memory_test import _project, _windows
from tests.helpers import run_kqplan

MIB = 2**20


def test_the_driver_gets_kqplan_toml_s_memory_or_a_size_from_the_machine() -> None:
    assert driver_memory(2048, {}) == "2048m"
    assert driver_memory(512, {}) == "512m"
    assert driver_memory(None, {}) == f"{max(DRIVER_FLOOR, default_memory()) // MIB}m"
    assert max(DRIVER_FLOOR, default_memory()) >= 2**30  # never below pyspark's own 1 GiB


@pytest.mark.parametrize("args", ["--driver-memory 3g pyspark-shell", "--driver-memory=3g pyspark-shell",
                                  "--conf spark.driver.memory=3g pyspark-shell",
                                  "--master local[2] --conf 'spark.driver.memory=3g' pyspark-shell"])
def test_pyspark_submit_args_that_size_the_driver_win(args: str) -> None:
    assert set_elsewhere({"PYSPARK_SUBMIT_ARGS": args})
    assert driver_memory(2048, {"PYSPARK_SUBMIT_ARGS": args}) is None
    assert driver_memory(1, {"PYSPARK_SUBMIT_ARGS": args}) is None  # kqplan.toml's value is not used


@pytest.mark.parametrize(("defaults", "theirs"), [
    ("spark.driver.memory 6g\n", True),
    ("spark.master local[2]\n  spark.driver.memory=6g\n", True),
    ("# spark.driver.memory 6g\nspark.executor.memory 2g\n", False),
    ("spark.driver.memoryOverhead 1g\n", False),
])
def test_spark_defaults_conf_that_sizes_the_driver_wins(tmp_path: Path, defaults: str, theirs: bool) -> None:
    (tmp_path / "spark-defaults.conf").write_text(defaults)
    assert set_elsewhere({"SPARK_CONF_DIR": str(tmp_path)}) is theirs
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "spark-defaults.conf").write_text(defaults)
    assert set_elsewhere({"SPARK_HOME": str(tmp_path)}) is theirs
    assert (driver_memory(2048, {"SPARK_CONF_DIR": str(tmp_path)}) is None) is theirs
    assert not set_elsewhere({"SPARK_CONF_DIR": str(tmp_path / "nowhere")})
    # unbalanced quotes: spark-submit's to refuse
    assert not set_elsewhere({"PYSPARK_SUBMIT_ARGS": "--master 'local[2] pyspark-shell"})


def test_less_than_a_driver_needs_is_refused_before_spark_starts(tmp_path: Path) -> None:
    with pytest.raises(KqplanError, match=r"engine-memory-mib = 300 in kqplan.toml is less than the 512 MiB"):
        driver_memory(300, {})
    home = _project(tmp_path, "engine-memory-mib = 300")
    _windows(home / "usage.parquet", 3, 2)
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR")}
    for command in (["impact", "--usage", "usage.parquet", "--out", "out"],
                    ["rightsize", "--usage", "usage.parquet", "--out", "out"], ["plan", "--out", "out"]):
        result = run_kqplan("fleet", *command, "--engine", "spark", cwd=home, env=env)
        assert result.exit_code == 1, result.stderr
        assert "[limits] engine-memory-mib = 300 in kqplan.toml is less than the 512 MiB a Spark driver " \
            "needs" in result.stderr, command
        assert "Traceback" not in result.stderr
        assert "internal error" not in result.stderr
        assert not (home / "out").exists()


_OUT_OF_HEAP = """
import json, sys
from kqplan.core.errors import KqplanError
from kqplan.fleet.spark import session
from kqplan.fleet.spark_memory import driver_memory, heap_mib, memory_errors

said = {}
with session(master="local[1]", driver_memory=driver_memory(600)) as spark:
    said["heap"] = heap_mib(spark)
    for out_is_uri in (False, True):
        try:
            with memory_errors(spark, out_is_uri=out_is_uri):  # a 1.2 GB string in a 600 MiB heap
                spark.range(1).selectExpr("repeat('x', 400000000) as s").selectExpr(
                    "length(concat(s, s, s)) as n").collect()
        except KqplanError as exc:
            said[str(out_is_uri)] = [exc.message, exc.hint]
    with memory_errors(spark, out_is_uri=False):  # any other error passes as it was
        try:
            spark.sql("select * from no_such_table").collect()
        except KqplanError:
            said["other"] = "said as out of memory"
        except Exception as exc:
            said["other"] = type(exc).__name__
json.dump(said, sys.stdout)
"""


def test_a_driver_out_of_heap_is_an_error_that_names_its_heap_and_the_ways_out(tmp_path: Path) -> None:
    """A real local driver started with 600 MiB (from kqplan.toml's value) runs out of it."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR")}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_OUT_OF_HEAP)], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = json.loads(proc.stdout)
    assert 540 <= said["heap"] <= 600  # the JVM's -Xmx is the value asked for
    message, hint = said["False"]
    assert message == ("Spark's driver ran out of its {} MiB of heap (java.lang.OutOfMemoryError); in local "
                       "mode the driver's JVM runs the tasks too").format(said["heap"])
    assert "raise [limits] engine-memory-mib in kqplan.toml" in hint
    assert "spark.driver.memory" in hint
    assert "give --out a URI" in hint
    assert said["True"][0] == message
    assert "give --out a URI" not in said["True"][1]  # the tables already go to one
    assert said["other"] == "AnalysisException"


_TASK_OUT_OF_HEAP = """
import json, sys
from pyspark.sql import functions as F
from kqplan.core.errors import KqplanError
from kqplan.fleet.spark import session, watch
from kqplan.fleet.spark_memory import driver_memory, memory_errors

said = {}
with session(master="local[1]", driver_memory=driver_memory(600)) as spark:
    try:  # one group's exact percentile over 40M values: its buffer outgrows 600 MiB in a task
        with watch(spark, lambda text: None, "Working"), memory_errors(spark, out_is_uri=False):
            spark.range(40_000_000).selectExpr("0 as g", "rand(7) as v").groupBy("g").agg(
                F.percentile("v", F.lit(0.99))).collect()
    except KqplanError as exc:
        said["error"] = [exc.message, exc.hint]
json.dump(said, sys.stdout)
"""


def test_a_task_out_of_heap_that_ends_the_driver_is_an_error_not_a_lost_connection(tmp_path: Path) -> None:
    """A task thread out of heap makes Spark end the driver's JVM (local mode: exit code 52,
    SparkExitCode.OOM); pyspark sees only a connection refused, which was an internal error
    (issue 42: the skewed fleet of 10^7 samples). Now a located error with the ways out, the
    session's end raises nothing more, and py4j's records go to Spark's own log, not stderr."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR")}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_TASK_OUT_OF_HEAP)], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    message, hint = json.loads(proc.stdout)["error"]
    assert message.startswith("Spark's driver JVM exited (52: a task ran out of its "), message
    assert message.endswith(" MiB of heap); in local mode the driver's JVM runs the tasks too"), message
    assert "raise [limits] engine-memory-mib in kqplan.toml" in hint
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "ERROR:root" not in proc.stderr, proc.stderr[-3000:]


_KILLED = """
import json, os, signal, sys
from kqplan.core.errors import KqplanError
from kqplan.fleet.spark import session
from kqplan.fleet.spark_memory import memory_errors

said = {}
with session(master="local[1]") as spark:
    try:
        with memory_errors(spark, out_is_uri=False):
            os.kill(spark.sparkContext._gateway.proc.pid, signal.SIGKILL)
            spark.range(3).count()
    except KqplanError as exc:
        said["error"] = [exc.message, exc.hint]
json.dump(said, sys.stdout)
"""


def test_a_driver_jvm_that_dies_otherwise_is_an_error_with_its_exit_code(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_KILLED)], capture_output=True,
                          text=True, cwd=tmp_path, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["error"] == ["Spark's driver JVM stopped (exit code -9) while it worked",
                                                "Spark's own log, named above, says why"]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]


_UNREADABLE = """
import json, os, signal, sys
from kqplan.core.errors import KqplanError
from kqplan.fleet.spark import session
from kqplan.fleet.spark_memory import memory_errors

said = {}
with session(master="local[1]") as spark:
    try:  # a real Java error, whose text py4j reads from the JVM only when it is asked for
        spark._jvm.java.lang.Class.forName("no.such.Class")  # a class pyspark does not convert
    except Exception as exc:
        error = exc
    said["class"] = type(error).__name__
    process = spark.sparkContext._gateway.proc
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    try:
        with memory_errors(spark, out_is_uri=False):
            raise error
    except KqplanError as exc:
        said["error"] = [exc.message, exc.hint]
json.dump(said, sys.stdout)
"""


def test_an_error_whose_jvm_is_gone_before_its_text_is_read_is_the_jvms_exit(tmp_path: Path) -> None:
    """A Py4JJavaError reads its text from the JVM when it is printed: when the JVM has gone
    between the error and its reading (the clean-clone run of 3d43e3b: a task out of heap, the
    JVM's exit 52 after the error came back), reading it raised a refused connection, an internal
    error. Made certain here: a real Py4JJavaError, then its JVM killed, then the error."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_UNREADABLE)], capture_output=True,
                          text=True, cwd=tmp_path, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = json.loads(proc.stdout)
    assert said["class"] == "Py4JJavaError"
    assert said["error"] == ["Spark's driver JVM stopped (exit code -9) while it worked",
                             "Spark's own log, named above, says why"]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]


_LIVE = """
import json, sys, time
from kqplan.core.errors import KqplanError
from kqplan.fleet.spark import session
from kqplan.fleet.spark_memory import memory_errors

said = {}
with session(master="local[1]") as spark:
    try:  # a job's own error, the JVM alive: the job is not what is timed, its handling is
        spark.sql("SELECT raise_error('a job that fails, its JVM alive')").collect()
    except Exception as exc:
        error = exc
    started = time.monotonic()
    try:
        with memory_errors(spark, out_is_uri=False):
            raise error
    except KqplanError as exc:
        said["error"] = ["KqplanError", exc.message]
    except Exception as exc:
        said["error"] = [type(exc).__name__, exc is error]
    said["seconds"] = time.monotonic() - started
    said["alive"] = spark.range(3).count() == 3
json.dump(said, sys.stdout)
"""


def test_an_error_while_the_jvm_runs_is_raised_as_it_was_without_waiting_for_an_exit(tmp_path: Path) -> None:
    """A job's own error, the JVM alive and its context running, is not the JVM's end: it is
    raised as it was, at once. memory_errors used to wait 10 s for an exit that never came."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_LIVE)], capture_output=True,
                          text=True, cwd=tmp_path, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = json.loads(proc.stdout)
    name, same = said["error"]
    assert name != "KqplanError", said
    assert same is True, said  # the very error, raised again
    assert said["seconds"] < 5, said  # its handling: a few calls to the JVM; the wait took 10 s
    assert said["alive"]
