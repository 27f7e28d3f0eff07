"""The Spark driver's memory: sized from the machine like the local engine's, and a driver (or a
Connect server) out of memory said as an error with the ways out, not as a Java stack.

A session kqplan starts (``local[*]``, or a ``spark://`` master in client mode) runs its driver in
a JVM of its own; in local mode that JVM is the executor too, so every task's rows and every
task's serialized closure share its heap. pyspark gives it 1 GiB, which a skewed fleet's impact of
10^6 samples runs out of (benchmarks/README.md): kqplan gives it ``[limits] engine-memory-mib`` when
kqplan.toml sets it, else a quarter of the machine's memory (1–4 GiB), unless the user's Spark
configuration already says (``PYSPARK_SUBMIT_ARGS``, ``spark-defaults.conf``).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kqplan.core.errors import KqplanError, error_text
from kqplan.fleet.resources import default_memory

DRIVER_FLOOR = 2**30
"""pyspark's own default: kqplan's sizing never gives the driver less unless kqplan.toml says so."""
DRIVER_LEAST = 512 * 2**20
"""Spark refuses to start a driver with less than 1.5 × its 300 MiB of reserved memory (450 MiB,
471,859,200 bytes: ``UnifiedMemoryManager``): the least ``[limits] engine-memory-mib`` the Spark
engine takes, rounded up."""
OUT_OF_MEMORY = "java.lang.OutOfMemoryError"


def driver_memory(memory_mib: int | None, env: Mapping[str, str] | None = None) -> str | None:
    """``spark.driver.memory`` for a session kqplan starts: ``memory_mib`` (``[limits]
    engine-memory-mib``) when given, else the local engine's default (a quarter of the machine's
    memory within 1 and 4 GiB); None when the user's Spark configuration sets it
    (:func:`set_elsewhere`), theirs then."""
    if set_elsewhere(os.environ if env is None else env):
        return None
    if memory_mib is not None:
        if memory_mib < DRIVER_LEAST // 2**20:
            raise KqplanError(f"[limits] engine-memory-mib = {memory_mib} in kqplan.toml is less than the "
                              f"{DRIVER_LEAST // 2**20} MiB a Spark driver needs to start",
                              hint=f"raise it to {DRIVER_LEAST // 2**20} or more, or use --engine local")
        return f"{memory_mib}m"
    return f"{max(DRIVER_FLOOR, default_memory()) // 2**20}m"


def set_elsewhere(env: Mapping[str, str]) -> bool:
    """Whether ``PYSPARK_SUBMIT_ARGS`` (``--driver-memory``, ``--conf spark.driver.memory=…``) or
    the ``spark-defaults.conf`` Spark reads (``$SPARK_CONF_DIR``, else ``$SPARK_HOME/conf``) sets
    the driver's memory. A command-line ``--conf`` would override the file, so it is read here."""
    try:
        args = shlex.split(env.get("PYSPARK_SUBMIT_ARGS", ""))
    except ValueError:  # unbalanced quotes: spark-submit refuses it itself
        args = []
    if any(a == "--driver-memory" or a.startswith("--driver-memory=") or "spark.driver.memory" in a
           for a in args):
        return True
    home = env.get("SPARK_HOME")
    folder = env.get("SPARK_CONF_DIR") or (str(Path(home) / "conf") if home else "")
    if not folder:
        return False
    try:
        text = (Path(folder) / "spark-defaults.conf").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return re.search(r"^\s*spark\.driver\.memory\b", text, flags=re.MULTILINE) is not None


def heap_mib(spark: Any) -> int | None:
    """The MiB of heap the driver's JVM may use (its ``-Xmx``); None on Spark Connect, whose JVM is
    the server's."""
    try:
        return int(spark._jvm.java.lang.Runtime.getRuntime().maxMemory()) // 2**20
    except Exception:  # Connect: no gateway to ask
        return None


@contextmanager
def memory_errors(spark: Any, *, out_is_uri: bool) -> Iterator[None]:
    """A Java ``OutOfMemoryError`` in the block said as a :class:`KqplanError` that names the
    heap the driver had and the ways out; any other error as it was. ``out_is_uri``: the tables
    already go to a URI (so that way out is not offered again)."""
    from kqplan.fleet.spark import java_classes

    heap = heap_mib(spark)  # asked now: a driver that dies cannot say it
    try:
        yield
    except KqplanError:
        raise
    except Exception as exc:
        if OUT_OF_MEMORY in java_classes(exc) or OUT_OF_MEMORY in error_text(exc):
            raise out_of_memory(heap, out_is_uri=out_is_uri) from None
        # a JVM on its way out (its exit stops the context first) gets time to end; a live one none
        code = driver_exit(spark, wait=10 if stopping(spark) else 0)
        if code is None:
            raise
        if code == OOM_EXIT:
            raise out_of_memory(heap, out_is_uri=out_is_uri, died=True) from None
        raise KqplanError(f"Spark's driver JVM stopped (exit code {code}) while it worked",
                          hint="Spark's own log, named above, says why") from None


OOM_EXIT = 52
"""Spark's exit code for a JVM whose task thread ran out of heap (``SparkExitCode.OOM``): in local
mode the executor's uncaught-exception handler ends the driver's JVM with it, so pyspark sees only
a connection refused."""


def stopping(spark: Any) -> bool:
    """Whether the driver's SparkContext is stopped, or its JVM does not answer: a JVM that exits
    runs Spark's shutdown hook, which marks the context stopped before it cancels the jobs, so an
    error that a JVM's exit caused finds it so (exit code 52: a task out of heap). A context that
    runs says the error is not the JVM's end, which is then not waited for."""
    try:
        return bool(spark.sparkContext._jsc.sc().isStopped())
    except Exception:  # the JVM is gone or going (or Spark Connect: no context here)
        return True


def driver_exit(spark: Any, *, wait: float = 0.0) -> int | None:
    """The exit code of the driver's JVM of a session this process started, once it has exited
    (waiting up to ``wait`` seconds for it), else None: it runs, or no JVM of this process's
    (Spark Connect)."""
    import subprocess

    try:
        process = spark.sparkContext._gateway.proc
    except Exception:  # Spark Connect: no gateway here
        return None
    if not isinstance(process, subprocess.Popen):
        return None
    try:
        return process.wait(timeout=wait) if wait else process.poll()
    except subprocess.TimeoutExpired:
        return None


def out_of_memory(heap: int | None, *, out_is_uri: bool, died: bool = False) -> KqplanError:
    """The error of a Spark JVM out of heap: the driver's (``heap`` MiB, a session kqplan
    started; ``died``: a task ran out and the JVM exited) or, ``heap`` None, the Connect server's."""
    uri = "" if out_is_uri else "; or give --out a URI (hdfs://, s3a://, …) so that the tables are written " \
        "where Spark runs and only the summaries come back"
    if heap is None:
        return KqplanError("the Spark Connect server ran out of memory (java.lang.OutOfMemoryError)",
                           hint="give the server's driver more memory (spark.driver.memory where it starts) "
                                "or run on a cluster with executors of their own" + uri)
    how = (f"Spark's driver JVM exited ({OOM_EXIT}: a task ran out of its {heap} MiB of heap)" if died
           else f"Spark's driver ran out of its {heap} MiB of heap (java.lang.OutOfMemoryError)")
    return KqplanError(
        f"{how}; in local mode the driver's JVM runs the tasks too",
        hint="raise [limits] engine-memory-mib in kqplan.toml (kqplan gives it to the driver it starts), "
             "or set spark.driver.memory in spark-defaults.conf or PYSPARK_SUBMIT_ARGS='--driver-memory 8g "
             "pyspark-shell'; give fewer usage files (a shorter time span); or run on a cluster "
             "(--spark-master spark://…, --spark-remote sc://…)" + uri)
