"""The Spark engine: the fleet plan's change rows as a DataFrame join, checked row for row against
the local engine (tests/fleet). Spark pays off where data outgrows one process (many clusters, big
usage tables); for one cluster ``kqplan plan`` stays plain Python.

Which entities a plan deletes (ownership scopes are globs, layers can remove an entity) is decided
once per cluster by the core and passed in as data; the per-key diff — the bulk of the work — is a
full outer join on (cluster, entity, key) with null-safe comparison, no Python UDF. Here too: the
session, and frames made of rows in this process (a usage frame of samples: tests, small inputs).
"""

from __future__ import annotations

import logging
import os
import re
import socket
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kqplan.console import Progress
from kqplan.core.errors import KqplanError, error_text
from kqplan.fleet.changes import ChangeRow, ClusterDiff
from kqplan.fleet.usage import USAGE_KEYS, Usage

_KV = "cluster string, entity string, key string, value double"
CONNECT_TIMEOUT = 5.0
"""Seconds to reach a Spark Connect server's address before saying it cannot be reached (pyspark
itself retries a refused connection for minutes, silently)."""
CONNECT_PORT = 15002
"""The port of an ``sc://HOST`` without one (Spark Connect's default)."""
_CONNECT_ENV = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE")


def frame_of(spark: Any, rows: Sequence[tuple[Any, ...]], schema: str) -> Any:
    """A DataFrame from Python rows, shipped as one Arrow table (measured: 230k rows in 2.4 s,
    where pickled rows took 8.7 s); ``schema`` as in ``"cluster string, value double"``."""
    import pyarrow as pa

    types = {"string": pa.string(), "double": pa.float64(), "int": pa.int32(), "boolean": pa.bool_()}
    fields = [field.split() for field in schema.split(",")]
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(fields)
    return spark.createDataFrame(pa.table({name: pa.array(column, types[kind])
                                           for (name, kind), column in zip(fields, columns, strict=True)}))


def collect_rows(frame: Any) -> list[tuple[Any, ...]]:
    """A DataFrame's rows as tuples, through Arrow (2.4x faster than ``collect()``)."""
    table = frame.toArrow()
    return list(zip(*(column.to_pylist() for column in table.columns), strict=True)) if table.num_rows else []


WIDE = ("cluster string, user string, client_id string, bucket string, ts double, "
         + ", ".join(f"{k} double" for k in USAGE_KEYS))
"""A usage frame: a row per usage row (per sample for :func:`samples_frame`), a column per key —
null: no sample of it; a row of nothing but nulls still names an observed principal (or bucket).
``bucket``: empty for a principal's row, else ``user`` or ``client-id`` (``user`` then empty for
a ``{client-id=C}`` bucket, ``client_id`` for a ``{user=U}`` one). Wide, as usage files are: the
jobs aggregate the keys side by side in one pass."""
def samples_frame(spark: Any, usage: Usage | Sequence[Any]) -> Any:
    """Usage already in this process as a usage frame (tests, small inputs): a row per sample."""
    observed = usage if isinstance(usage, Usage) else Usage.of(usage)
    rows: list[tuple[Any, ...]] = [(s.cluster, s.user, s.client_id, s.bucket, s.ts,
                                    *(s.value if k == s.key else None for k in USAGE_KEYS))
                                   for s in observed.samples]
    rows += [(*unit, None, *(None for _ in USAGE_KEYS)) for unit in sorted(observed.units)]
    return frame_of(spark, rows, WIDE)


def samples_of(frame: Any) -> Any:
    """A usage frame as one row per unit, key and usage row: ``cluster, user, client_id, key,
    value, ts, bucket`` (:class:`~kqplan.fleet.usage.Sample`'s order; value null: no sample of
    that key in that row)."""
    from pyspark.sql import functions as F

    pairs = ", ".join(f"'{k}', `{k}`" for k in USAGE_KEYS)
    stacked = F.expr(f"stack({len(USAGE_KEYS)}, {pairs}) as (key, value)")
    return frame.select("cluster", "user", "client_id", stacked, "ts", "bucket")


@dataclass(frozen=True, slots=True)
class Where:
    """Where the Spark engine runs: a master (``local[*]``, ``spark://…``) or a Connect server."""

    master: str | None
    remote: str | None
    shown: str
    """For the user: ``Spark Connect sc://host:15002 (from SPARK_REMOTE)``, ``Spark local[*]``."""
    from_environment: bool = False


def where(master: str | None, remote: str | None, env: Mapping[str, str] | None = None) -> Where:
    """``--spark-master`` or ``--spark-remote`` when given; else ``SPARK_REMOTE`` from the
    environment, as pyspark itself honours it (Databricks and EMR Connect users have it set); else
    a local session."""
    env = os.environ if env is None else env
    if remote:
        return Where(None, remote, f"Spark Connect {redacted(remote)}")
    if master:
        return Where(master, None, f"Spark {master}")
    if env.get("SPARK_REMOTE"):
        remote = env["SPARK_REMOTE"]
        return Where(None, remote, f"Spark Connect {redacted(remote)} (from SPARK_REMOTE)",
                     from_environment=True)
    return Where("local[*]", None, "Spark local[*]")


def redacted(remote: str) -> str:
    """A Spark Connect URL as shown to the user: a ``token`` parameter's value left out
    (``sc://host:443/;token=…``), as it is a secret."""
    import re

    return re.sub(r"(;\s*token\s*=)[^;]*", r"\1…", remote, flags=re.IGNORECASE)


def connect_address(remote: str) -> tuple[str, int]:
    """The host and port of a Spark Connect URL, ``sc://HOST[:PORT][/;param=value…]``; a
    KqplanError saying what is wrong with any other text."""
    from urllib.parse import urlparse

    from kqplan.core.errors import KqplanError

    hint = "a Spark Connect URL is sc://HOST:PORT, e.g. sc://127.0.0.1:15002"
    parsed = urlparse(remote)
    try:
        port = parsed.port
    except ValueError:
        raise KqplanError(f"Spark Connect {redacted(remote)}: the port is not a number from 0 to 65535",
                          hint=hint) from None
    if parsed.scheme != "sc" or not parsed.hostname:
        raise KqplanError(f"Spark Connect {redacted(remote)}: not a Spark Connect URL", hint=hint)
    return parsed.hostname, port if port is not None else CONNECT_PORT


def reachable(remote: str, *, timeout: float = CONNECT_TIMEOUT) -> None:
    """Connect to the Spark Connect server's address once, for at most ``timeout`` seconds; a
    KqplanError naming the address, what happened and how to start a server when nothing answers."""
    from kqplan.core.errors import KqplanError

    host, port = connect_address(remote)
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        socket.create_connection((host, port), timeout=timeout).close()
        return
    except TimeoutError:
        why = f"no answer within {timeout:g} s"
    except ConnectionRefusedError:
        why = "connection refused: nothing listens there"
    except socket.gaierror as exc:
        why = f"the host is unknown ({exc.strerror})"
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
    raise KqplanError(
        f"cannot reach the Spark Connect server at {shown} ({redacted(remote)}): {why}",
        hint=f"start one, e.g. from the pyspark package: $(python -c 'import pyspark, os; "
        f"print(os.path.dirname(pyspark.__file__))')/sbin/start-connect-server.sh --conf "
        f"spark.connect.grpc.binding.port={port}; or give --spark-remote (SPARK_REMOTE) the address of a "
        "running server, or --spark-master local[*] to run Spark in this process")


@contextmanager
def ticking(progress: Progress, text: Callable[[], str], *, every: float = 0.5) -> Iterator[None]:
    """Tell ``progress`` the step ``text()`` names every ``every`` seconds while the block runs, so
    that a step that waits (a session starting, a Connect server's job between its progress
    messages) still reaches a CI log's "still running" line."""
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(every):
            progress(text())

    thread = threading.Thread(target=tick, name="kqplan-spark-ticking", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


@contextmanager
def session(*, master: str | None = None, remote: str | None = None,
            driver_memory: str | None = None) -> Iterator[Any]:
    """A SparkSession where :func:`where` says: local (``master``, default ``local[*]``) or Spark
    Connect (``remote``, ``sc://HOST:PORT``, or ``SPARK_REMOTE``); the driver binds to loopback
    unless SPARK_LOCAL_IP says otherwise, and Spark's log noise stays off the terminal.
    ``driver_memory``: ``spark.driver.memory`` of a driver this call starts
    (:func:`kqplan.fleet.spark_memory.driver_memory`)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise KqplanError("the Spark engine needs pyspark", hint="pip install 'kqplan[spark]'") from None
    target = where(master, remote)
    master, remote = target.master, target.remote
    if remote:  # a server that is not there: said within seconds, not after pyspark's retries
        reachable(remote)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if not remote and (master or "local").startswith("local"):  # its Python workers: this Python's
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # numpy and pyarrow (spark_sorted)
    # pyspark records a Connect session in the environment (SPARK_CONNECT_MODE_ENABLED, …), which
    # would turn every later local session of this process into a Connect one: restored after;
    # and a master given while SPARK_REMOTE is set is a local session (pyspark would refuse both)
    saved = {k: os.environ.get(k) for k in _CONNECT_ENV}
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    log, handler = None, None
    spark, existing, failed = None, None, True
    try:
        if not remote:
            for key in _CONNECT_ENV:
                os.environ.pop(key, None)
        builder = SparkSession.builder.appName("kqplan-fleet")
        if remote:
            builder = builder.remote(remote)
        else:
            builder = _started_here(builder, master or "local[*]", driver_memory)
        # a session this process already runs (an application embedding kqplan, a test suite) is
        # reused by getOrCreate and is not kqplan's to stop
        existing = None if remote else SparkSession.getActiveSession()
        if existing is not None and master is not None and not master.startswith("local") \
                and existing.sparkContext.master != master:
            raise KqplanError(f"this process already runs a Spark session on {existing.sparkContext.master}: "
                              f"--spark-master {master} cannot be used from it",
                              hint="run kqplan in a process of its own for another master")
        if remote or existing is not None:
            spark = builder.getOrCreate()
        else:
            fd, log = tempfile.mkstemp(prefix="kqplan-spark-", suffix=".log")
            os.close(fd)
            with _stderr_to(Path(log)):  # the JVM starts now and keeps this stderr
                spark = builder.getOrCreate()
            spark.sparkContext.setLogLevel("ERROR")
            if not logging.getLogger().handlers:  # py4j's records of a lost JVM (root's) go there too
                logging.getLogger().addHandler(handler := logging.FileHandler(log))
        yield spark
        failed = False
    finally:
        if spark is not None and existing is None:
            with suppress(ConnectionError):  # its JVM already gone (it died of an error): nothing to stop
                spark.stop()
        if handler is not None:
            logging.getLogger().removeHandler(handler)
            handler.close()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if log is not None and failed:
            sys.stderr.write(f"Spark's own log: {log}\n")
        elif log is not None:
            Path(log).unlink(missing_ok=True)


def _started_here(builder: Any, master: str, driver_memory: str | None) -> Any:
    """``builder`` of a session whose driver this process starts (on ``master``)."""
    builder = (builder.master(master).config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=ERROR"))
    if driver_memory:
        builder = builder.config("spark.driver.memory", driver_memory)
    if master.startswith("local"):
        # the driver's memory, one JVM with the executor's: each small table a join
        # broadcasts holds a memory page until Spark's cleaner frees it (the default, 32 MB
        # with one core and a 1 GB driver, let a few impact jobs in one process fill it), and
        # the UI's store, off with the UI, keeps every query's plan (1000 by default)
        builder = (builder.config("spark.buffer.pageSize", "2m")
                   .config("spark.sql.ui.retainedExecutions", "20")
                   # the status store keeps every job, stage and task (1000, 1000,
                   # 100,000 by default) though no UI reads them: ~0.4 GiB of the heap
                   # after a few hundred small jobs
                   .config("spark.ui.retainedJobs", "50").config("spark.ui.retainedStages", "50")
                   .config("spark.ui.retainedTasks", "1000"))
    return builder


# -- the filesystems of URIs: which one Spark lacks, or cannot reach, and how to add it -------------

_UNSUPPORTED = "org.apache.hadoop.fs.UnsupportedFileSystemException"
"""Hadoop knows no FileSystem class for the scheme (``No FileSystem for scheme "x"``)."""
_NOT_FOUND = ("java.lang.ClassNotFoundException", "java.lang.NoClassDefFoundError")
"""Hadoop knows the class (``fs.SCHEME.impl``: S3A, ABFS, GCS), and its jar is not on Spark's classpath."""
_UNKNOWN_HOST = "java.net.UnknownHostException"
_REFUSED = "java.net.ConnectException"
_JAVA_CLASS = re.compile(r"\b(?:java|javax|org|com)\.(?:[A-Za-z_$][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error)\b")
_AZURE = "org.apache.hadoop:hadoop-azure:{hadoop}"
_PACKAGES = {
    "s3a": "org.apache.hadoop:hadoop-aws:{hadoop}",
    "gs": ("org.apache.hadoop:hadoop-gcp:{hadoop} (Hadoop 3.5 on; or Google's shaded gcs-connector with "
           "spark.hadoop.fs.gs.impl=com.google.cloud.hadoop.fs.gcs.GoogleHadoopFileSystem)"),
    "abfs": _AZURE, "abfss": _AZURE, "wasb": _AZURE, "wasbs": _AZURE,
}
"""The package that brings a scheme's filesystem (``{hadoop}``: the version of Spark's Hadoop jars)."""


def java_classes(exc: BaseException) -> list[str]:
    """The Java classes of a pyspark error and of its causes, outermost first: a Py4JJavaError's
    ``java_exception``, a captured error's origin; a Spark Connect error carries only its message,
    where the server names the class (``(java.lang.ClassNotFoundException) …``)."""
    origin = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    classes: list[str] = []
    while origin is not None and len(classes) < 32:
        try:
            classes.append(str(origin.getClass().getName()))
            origin = origin.getCause()
        except Exception:  # the gateway is gone: what was read
            break
    return classes or _JAVA_CLASS.findall(error_text(exc))


def _connect(spark: Any) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _hadoop(spark: Any, scheme: str) -> tuple[str, str | None]:
    """The version of Spark's Hadoop jars and the class ``fs.SCHEME.impl`` names (a local session's
    JVM; a Connect server's are its own: unknown)."""
    if _connect(spark):
        return "<the Hadoop version of the server's Spark>", None
    try:
        version = str(spark._jvm.org.apache.hadoop.util.VersionInfo.getVersion())
        impl = spark._jsc.hadoopConfiguration().get(f"fs.{scheme}.impl")
    except Exception:
        return "<the Hadoop version of Spark's jars>", None
    return version, None if impl is None else str(impl)


def filesystem_error(spark: Any, exc: BaseException, flag: str, uri: str) -> KqplanError | None:
    """What Spark said of ``uri`` (given as ``flag``) when it is about its filesystem, by the Java
    classes of the error (:func:`java_classes`): no filesystem for the scheme, or its connector's
    jar missing — which one, and the package that adds it; a host (an HDFS namenode or nameservice)
    that does not resolve, or does not answer. None: another error."""
    from urllib.parse import urlsplit

    from kqplan.core.entity import visible

    parts = urlsplit(uri)
    scheme, shown = parts.scheme.lower(), f"{flag} {visible(uri)}"
    classes = java_classes(exc)
    if scheme == "file" or not classes:
        return None
    if _UNSUPPORTED in classes or any(c in classes for c in _NOT_FOUND):
        hadoop, impl = _hadoop(spark, scheme)
        package = _PACKAGES.get(scheme, "the Maven coordinates of a Hadoop FileSystem for {scheme}://").format(
            hadoop=hadoop, scheme=scheme)
        how = ("start the Spark Connect server with --packages PACKAGE (or its spark.jars.packages)"
               if _connect(spark) else "set spark.jars.packages PACKAGE in spark-defaults.conf (in "
               "$SPARK_CONF_DIR), or run kqplan with PYSPARK_SUBMIT_ARGS='--packages PACKAGE pyspark-shell'")
        missing = f"its class {impl} (fs.{scheme}.impl) is not on Spark's classpath" if impl else \
            f"Spark has no FileSystem for {scheme}://"
        return KqplanError(f"{shown}: Spark cannot use {scheme}:// URIs: {missing}",
                           hint=f"add the {scheme}:// filesystem to Spark: PACKAGE = {package}; {how}")
    host = visible(parts.hostname or parts.netloc)
    if _UNKNOWN_HOST in classes:
        if scheme in ("hdfs", "viewfs"):
            return KqplanError(f"{shown}: Spark cannot resolve {host}, the URI's namenode or nameservice",
                               hint="for an HA nameservice, give Spark the cluster's Hadoop configuration: "
                               "HADOOP_CONF_DIR pointing at its core-site.xml and hdfs-site.xml where Spark "
                               "starts (or the spark.hadoop.dfs.* settings); else hdfs://NAMENODE:PORT/PATH")
        return KqplanError(f"{shown}: Spark cannot resolve the host {host}",
                           hint="check the URI's bucket, account or host, and the network where Spark runs")
    if _REFUSED in classes:
        return KqplanError(f"{shown}: nothing answers at {visible(parts.netloc)}",
                           hint="check the namenode's address and port (hdfs://NAMENODE:8020/ by default)"
                           if scheme == "hdfs" else "check the URI's host and port")
    return None


@contextmanager
def filesystem_errors(spark: Any, flag: str, uri: str) -> Iterator[None]:
    """Spark's errors in the block about ``uri``'s filesystem, as :func:`filesystem_error` says them."""
    try:
        yield
    except KqplanError:
        raise
    except Exception as exc:
        found = filesystem_error(spark, exc, flag, uri)
        if found is None:
            raise
        raise found from None


def check_filesystems(spark: Any, uris: Sequence[tuple[str, str]]) -> None:
    """Before any work: Spark has a filesystem for the scheme of each ``(flag, uri)`` (a local
    session's JVM is asked; a Connect server's classpath is its own, and its read or write says
    it, through :func:`filesystem_error`)."""
    if _connect(spark):
        return
    for flag, uri in uris:
        scheme = uri.partition(":")[0].lower()
        if scheme == "file":
            continue
        with filesystem_errors(spark, flag, uri):
            conf = spark._jsc.hadoopConfiguration()
            spark._jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(scheme, conf)


def tasks_text(label: str, stages: Sequence[tuple[int, int]]) -> str:
    """``label: N/M tasks`` over the running stages' (completed, total) task counts."""
    if not stages:
        return label
    done, total = sum(s[0] for s in stages), sum(s[1] for s in stages)
    running = f"{len(stages)} stages, " if len(stages) > 1 else ""
    return f"{label}: {running}{done}/{total} tasks"


@contextmanager
def watch(spark: Any, progress: Progress, label: str, *, every: float = 0.5) -> Iterator[None]:
    """Report the running stages' task counts to ``progress`` while the block runs: from the
    status tracker in-process, from the server's progress messages (every 2 s by default) through
    Spark Connect, which has no status tracker."""
    progress(label)
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        latest = [label]

        def handler(stages: Any, inflight_tasks: int, operation_id: str | None, done: bool) -> None:
            latest[0] = tasks_text(label, [(s.num_completed_tasks, s.num_tasks)
                                           for s in stages or () if not s.done])
            progress(latest[0])

        spark.registerProgressHandler(handler)
        try:
            with ticking(progress, lambda: latest[0], every=every):  # between the server's messages
                yield
        finally:
            spark.removeProgressHandler(handler)
        return
    tracker = spark.sparkContext.statusTracker()
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(every):
            try:
                infos = [tracker.getStageInfo(i) for i in tracker.getActiveStageIds()]
            except Exception:  # the session is stopping: progress is best effort
                return
            progress(tasks_text(label, [(i.numCompletedTasks, i.numTasks) for i in infos if i is not None]))

    thread = threading.Thread(target=poll, name="kqplan-spark-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


@contextmanager
def _stderr_to(log: Path) -> Iterator[None]:
    """Point file descriptor 2 at ``log`` while the local JVM starts: it inherits that, so its
    banner, warnings and log lines go to the file, never the user's terminal (a log4j setting
    cannot silence the JVM's own start-up lines); this process's stderr is restored at once."""
    sys.stderr.flush()
    saved = os.dup(2)
    target = os.open(log, os.O_WRONLY | os.O_APPEND)
    try:
        os.dup2(target, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


def change_rows(spark: Any, diffs: Sequence[ClusterDiff]) -> list[ChangeRow]:
    """One row per changed key of every cluster, as :func:`kqplan.fleet.changes.rows_of_plan`."""
    return sorted(ChangeRow(*r) for r in collect_rows(change_frame(spark, diffs)))


def change_frame(spark: Any, diffs: Sequence[ClusterDiff]) -> Any:
    """:func:`change_rows` as a DataFrame (``changes.parquet``'s columns)."""
    from pyspark.sql import functions as F

    desired_rows, actual_rows = [], []
    for diff in diffs:
        managed = diff.desired.keys() | diff.deleted
        for entity, quotas in diff.desired.items():
            shown = entity.display
            desired_rows += [(diff.cluster, shown, k, float(v)) for k, v in quotas.items()]
        for entity, quotas in diff.actual.items():
            if entity in managed:  # unmanaged entities are never changed: not joined at all
                shown = entity.display
                actual_rows += [(diff.cluster, shown, k, float(v)) for k, v in quotas.items()]
    want = frame_of(spark, desired_rows, _KV).withColumnRenamed("value", "after")
    have = frame_of(spark, actual_rows, _KV).withColumnRenamed("value", "before")
    joined = want.join(have, ["cluster", "entity", "key"], "full_outer")
    changed = joined.where(~F.col("before").eqNullSafe(F.col("after")))
    action = (F.when(F.col("after").isNull(), F.lit("delete"))
              .when(F.col("before").isNull(), F.lit("add")).otherwise(F.lit("update")))
    return changed.select("cluster", "entity", action.alias("action"), "key", "before", "after")


