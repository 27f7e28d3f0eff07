"""The real monitoring stack of the metrics tests: a Kafka broker with Prometheus's JMX exporter
attached (``-javaagent``, the jar from Maven Central through tests/kafka/pom.xml, the rules of
examples/metrics/jmx-exporter.yml) and Prometheus from Debian's ``prometheus`` package, scraping
it every second with the scrape config of examples/metrics/prometheus.yml. Each process is
started here on free loopback ports and stopped by its PID."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.helpers import REPO
from tests.kafka.broker import (
    BROKER_JVM_OPTS,
    KafkaBroker,
    die_with_parent,
    free_ports,
    stop_process,
    tail,
)

EXAMPLES = REPO / "examples" / "metrics"
EXPORTER_CONFIG = EXAMPLES / "jmx-exporter.yml"
PROMETHEUS_EXAMPLE = EXAMPLES / "prometheus.yml"
CLUSTER_LABEL = "kafka_cluster"
PROMETHEUS_INSTALL = "apt-get install prometheus"


def prometheus_binary() -> str | None:
    return shutil.which("prometheus", path="/usr/bin:/usr/local/bin:/usr/sbin:/bin")


def own_stack(request: Any, needs: str) -> str:
    """The Prometheus binary for a test that starts its own broker and Prometheus: skipped against
    an external cluster (``needs``: what it would do to a broker of its own) or without Prometheus;
    the session pool's broker stopped first (two JVMs on two cores slow both; the pool starts it
    again if a later test asks)."""
    import os

    import pytest

    if os.environ.get("KQPLAN_TEST_BOOTSTRAP"):
        pytest.skip(f"an external cluster (KQPLAN_TEST_BOOTSTRAP): no broker here to {needs}")
    binary = prometheus_binary()
    if binary is None:
        pytest.skip(f"Prometheus is not installed ({PROMETHEUS_INSTALL})")
    request.getfixturevalue("kafka_pool").stop()
    return binary


def agent_jar(libs: Path) -> Path:
    """The JMX exporter's java agent among the jars tests/kafka/pom.xml fetched."""
    found = sorted(libs.glob("jmx_prometheus_javaagent-*.jar"))
    if not found:
        raise AssertionError(f"no jmx_prometheus_javaagent jar in {libs}: tests/kafka/pom.xml lists it")
    return found[-1]


def exporter_broker(libs: Path, workdir: Path, version: str,
                    users: Mapping[str, str]) -> tuple[KafkaBroker, int]:
    """A KRaft broker (not started) with the exporter attached, and the exporter's port."""
    port = free_ports(1)[0]
    agent = f"-javaagent:{agent_jar(libs)}=127.0.0.1:{port}:{EXPORTER_CONFIG}"
    return KafkaBroker(libs, workdir, version, users=users, jvm_opts=(*BROKER_JVM_OPTS, agent)), port


def get(url: str, params: Mapping[str, str] | None = None, timeout: float = 10.0) -> bytes:
    """GET ``url`` (with ``params``): the body; HTTP errors raise."""
    if params:
        url += "?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        return bytes(answer.read())


@dataclass
class PrometheusServer:
    """Prometheus on a free loopback port scraping ``targets`` every ``interval``."""

    workdir: Path
    targets: Sequence[str]
    cluster: str
    interval: str = "1s"
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    started: float = field(default=0.0)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.workdir / "prometheus.log"

    def config(self) -> dict[str, Any]:
        """examples/metrics/prometheus.yml with these targets, this interval and cluster label."""
        config: dict[str, Any] = yaml.safe_load(PROMETHEUS_EXAMPLE.read_text())
        config["global"] = {"scrape_interval": self.interval, "evaluation_interval": self.interval}
        (job,) = config["scrape_configs"]
        job["job_name"] = f"kafka-{self.cluster}"
        (static,) = job["static_configs"]
        static["targets"] = list(self.targets)
        static["labels"] = {CLUSTER_LABEL: self.cluster}
        return config

    def start(self, binary: str, timeout: float = 60.0) -> PrometheusServer:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "prometheus.yml"
        config.write_text(yaml.safe_dump(self.config()))
        self.port = free_ports(1)[0]
        command = [*die_with_parent(), binary, f"--config.file={config}",
                   f"--storage.tsdb.path={self.workdir / 'data'}",
                   f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=1d"]
        with self.log_file.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, cwd=self.workdir)
        self.started = time.time()
        deadline = time.monotonic() + timeout
        while True:
            try:
                get(f"{self.url}/-/ready", timeout=1.0)
                return self
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise AssertionError(f"Prometheus did not start; {self.log_file}:\n"
                                         f"{tail(self.log_file)}") from None
                time.sleep(0.2)

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process, grace=10.0)
            self.process = None

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        """An instant query, straight over HTTP (kqplan's client is what the tests check)."""
        params = {"query": expr} | ({"time": f"{at:.3f}"} if at is not None else {})
        answer = json.loads(get(f"{self.url}/api/v1/query", params))
        assert answer["status"] == "success", answer
        return list(answer["data"]["result"])

    def wait_for_scrape_after(self, moment: float, timeout: float = 30.0) -> None:
        """Until every target was scraped after ``moment`` (seconds since the epoch)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ups = self.query(f'timestamp(up{{{CLUSTER_LABEL}="{self.cluster}"}})')
            if len(ups) == len(self.targets) and all(float(u["value"][1]) > moment for u in ups):
                return
            time.sleep(0.3)
        raise AssertionError(f"Prometheus did not scrape {list(self.targets)} after {moment}; "
                             f"{self.log_file}:\n{tail(self.log_file)}")
