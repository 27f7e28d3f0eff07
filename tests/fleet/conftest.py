"""The fleet tests' fixtures: one local SparkSession (a JVM start costs seconds), a Spark Connect
server, a Spark standalone cluster (a master, two workers), and a fleet of two sandbox clusters and
one unreachable address."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from kqplan.core.entity import Entity
from kqplan.sandbox import Sandbox, SandboxConfig
from tests.helpers import write_manifest
from tests.kafka.broker import free_ports


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One local session for the whole run. pyspark refuses a Spark Connect session while a regular
    one runs in the process, so the tests that use it live in files named after connect_test.py
    (collected in name order): a file before it that asks for this fixture breaks connect_test."""
    from kqplan.fleet.spark import session

    # Spark puts its default warehouse (where a CREATE TABLE without LOCATION goes) under the
    # working directory of the session's start: a test directory, not the checkout
    here = Path.cwd()
    os.chdir(tmp_path_factory.mktemp("spark-cwd"))
    try:
        with session(master="local[1]") as active:
            os.chdir(here)
            _check_heap(active)
            yield active
    finally:
        os.chdir(here)


def _check_heap(spark: Any) -> None:
    """The driver's heap is the one tests/conftest.py asks for: a JVM started without it (an
    earlier launch in this process, PYSPARK_SUBMIT_ARGS set otherwise) ran out late in full runs."""
    from tests.lanes import DRIVER_HEAP_GIB

    heap = spark.sparkContext._jvm.java.lang.Runtime.getRuntime().maxMemory()
    if heap < DRIVER_HEAP_GIB * 0.9 * 2**30:
        pytest.fail(f"the test process's Spark driver has a {heap / 2**30:.2f} GiB heap, not "
                    f"{DRIVER_HEAP_GIB} GiB: PYSPARK_SUBMIT_ARGS={os.environ.get('PYSPARK_SUBMIT_ARGS')!r}")


SEED = {Entity.user("a"): {"producer_byte_rate": 1.0}, Entity.user("gone"): {"producer_byte_rate": 3.0},
        Entity.user("mallory"): {"request_percentage": 5.0}}


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Path]:
    with ExitStack() as stack:
        boxes = {n: stack.enter_context(Sandbox.start(SandboxConfig(seed=SEED, cluster_id=n)))
                 for n in ("east", "west")}
        write_manifest(tmp_path / "base" / "q.yaml", "ownership: {prune: true, scope: [{user: 'g*'}]}\n"
                       "entities:\n  - user: a\n    quotas: {producer_byte_rate: 2}\n")
        write_manifest(tmp_path / "west" / "q.yaml",
                       "entities:\n  - user: w\n    quotas: {consumer_byte_rate: 7}\n")
        layers = {"east": '["base"]', "west": '["base", "west"]'}
        text = "".join(f'[clusters.{n}]\nid = "{n}"\nbootstrap-server = "{b.bootstrap}"\n'
                       f"manifests = {layers[n]}\n\n" for n, b in boxes.items())
        text += '[clusters.down]\nbootstrap-server = "127.0.0.1:1"\nmanifests = ["base"]\n'
        (tmp_path / "kqplan.toml").write_text(text)
        yield tmp_path


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    import pyspark

    home = Path(pyspark.__file__).parent
    work = tmp_path_factory.mktemp("spark-connect")
    port = free_ports(1)[0]
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_PID_DIR": str(work), "SPARK_LOG_DIR": str(work), "SPARK_IDENT_STRING": "kqplan-test",
           "PYSPARK_PYTHON": sys.executable}  # a test's UDF runs with this venv's pyarrow
    subprocess.run([str(home / "sbin" / "start-connect-server.sh"), "--master", "local[1]",
                    "--conf", f"spark.connect.grpc.binding.port={port}", "--conf", "spark.ui.enabled=false",
                    "--conf", "spark.sql.shuffle.partitions=4"],
                   env=env, check=True, capture_output=True, timeout=120)
    pid_file = next(work.glob("*.pid"))
    pid = int(pid_file.read_text())
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"Spark Connect did not listen on {port}: "
                                       + "".join(p.read_text() for p in work.glob("*.out"))[-2000:]) from None
                time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
        else:
            os.kill(pid, signal.SIGKILL)


def _log_tails(work: Path) -> str:
    """The last lines of every daemon's log in ``work``, for a failure message."""
    return "".join(f"\n--- {p.name}:\n" + "\n".join(p.read_text(errors="replace").splitlines()[-25:])
                   for p in sorted(work.glob("*.out")))


def _descendants(pid: int) -> list[int]:
    """The processes ``pid`` started, and theirs (a worker's executors), from /proc."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
        for child in children:
            found += [child, *_descendants(child)]
    return found


def _alive(pid: int) -> bool:
    """A Java process runs as ``pid``: not a zombie, nor another that took the number of one gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    name, _, rest = stat.partition(" (")[2].rpartition(") ")
    return name == "java" and rest[:1] != "Z"


def _stop(pids: list[int], timeout: float = 30) -> None:
    """SIGTERM to each Java process of ``pids``, then SIGKILL to those alive after ``timeout`` s."""
    pids = [pid for pid in pids if _alive(pid)]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(map(_alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in filter(_alive, pids):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def ui_state(ui: str) -> dict[str, Any]:
    """A standalone master's or worker's state (workers, applications; executors) from its web
    UI's /json."""
    with urllib.request.urlopen(f"{ui}/json/", timeout=5) as response:
        return json.load(response)


QUICK_JVM = "-XX:TieredStopAtLevel=1"
"""For the short-lived JVMs of a test (daemons, executors): the C1 compiler only, which halved the
executors' task time of a ``fleet impact`` on a 2-core machine."""


class SparkCluster(str):
    """A standalone master's URL, ``spark://127.0.0.1:PORT``, that knows the web UIs of the master
    (:attr:`ui`) and of its workers (:attr:`workers`)."""

    ui: str
    workers: tuple[str, ...]

    def __new__(cls, url: str, ui: str, workers: Sequence[str]) -> SparkCluster:
        self = super().__new__(cls, url)
        self.ui, self.workers = ui, tuple(workers)
        return self


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """A Spark standalone master and two workers (1 core, 1 GiB each) from pyspark's own package,
    on loopback and free ports. pyspark ships sbin/spark-daemon.sh but not start-master.sh or
    start-worker.sh: the daemons start as those scripts start them. Stopped by the PIDs of their
    pid files (and any executor a worker left), even when the start failed."""
    import pyspark

    home = Path(pyspark.__file__).parent
    work = tmp_path_factory.mktemp("spark-standalone")
    port, master_ui, *worker_uis = free_ports(4)
    url, ui = f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{master_ui}"
    env = {k: v for k, v in os.environ.items()  # spark-daemon.sh would rsync from a SPARK_MASTER
           if k not in ("SPARK_MASTER", "SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")}
    env |= {"SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_MASTER_HOST": "127.0.0.1",
            "SPARK_PID_DIR": str(work), "SPARK_LOG_DIR": str(work), "SPARK_WORKER_DIR": str(work / "worker"),
            "SPARK_IDENT_STRING": f"kqplan-test-{os.getpid()}-{work.name}", "SPARK_DAEMON_MEMORY": "256m",
            "PYSPARK_PYTHON": sys.executable,
            # no REST submission server: it would take the fixed port 6066
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false", "SPARK_DAEMON_JAVA_OPTS": QUICK_JVM}
    daemon = str(home / "sbin" / "spark-daemon.sh")
    master = [daemon, "start", "org.apache.spark.deploy.master.Master", "1",
              "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(master_ui)]
    workers = [[daemon, "start", "org.apache.spark.deploy.worker.Worker", str(n),
                "--webui-port", str(w), "--cores", "1", "--memory", "1g", url]
               for n, w in enumerate(worker_uis, start=1)]
    try:
        def until(what: str, ready: Any, timeout: float = 90) -> None:
            deadline = time.monotonic() + timeout
            while not ready():
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the Spark standalone cluster: {what} within {timeout:g} s"
                                       + _log_tails(work))
                time.sleep(0.5)

        def listening() -> bool:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
            except OSError:
                return False
            return True

        def registered() -> bool:
            try:
                state = ui_state(ui)
            except OSError:
                return False
            return sum(w["state"] == "ALIVE" for w in state["workers"]) == len(workers)

        def start(*commands: list[str]) -> None:  # in parallel: spark-daemon.sh waits 2.5 s or more each
            launched = [subprocess.Popen(c, env=env, text=True, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT) for c in commands]
            try:
                for command, proc in zip(commands, launched, strict=True):
                    out = proc.communicate(timeout=120)[0]
                    if proc.returncode != 0 or "failed to launch" in out:
                        raise RuntimeError(f"{' '.join(command[2:4])}: {out}" + _log_tails(work))
            finally:
                for proc in launched:  # a launcher that hangs (its daemon's PID is in its pid file)
                    if proc.poll() is None:
                        proc.kill()
                        proc.wait()

        start(master)
        until(f"the master did not listen on {port}", listening)
        start(*workers)  # after the master listens: a worker's first retry comes seconds later
        until(f"{len(workers)} workers did not register", registered)
        yield SparkCluster(url, ui, [f"http://127.0.0.1:{w}" for w in worker_uis])
    finally:
        pids = [int(text) for p in work.glob("*.pid") if (text := p.read_text().strip()).isdigit()]
        executors = [child for pid in pids for child in _descendants(pid)]
        _stop(pids)
        _stop([pid for pid in executors if _alive(pid)], timeout=10)
