"""The real-broker test harness (tests/kafka): what it costs on this machine.

Run: .venv/bin/python benchmarks/real_broker.py [--runs N] [--cold] [--jvm-opts "-Xmx512m ..."]

1. Jars: ``ensure_kafka_libs`` on a warm cache, a Maven copy with a warm ~/.m2, and with ``--cold``
   a first run (empty Maven repository, so everything comes from Maven Central).
2. Broker start (TLS files, ports, StorageTool format -> ApiVersions answers -> reader ACL visible),
   the JVM's RSS (/proc) when ready, after 1,000 quota entities, and the stop time.
3. One ConfigCommand JVM run (describe of one user).
Prints a Markdown table; best and median of ``--runs`` (this is a noisy 2-core VM).
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kqplan.cluster.connection import config_from_properties
from kqplan.cluster.kafka import KafkaCluster
from kqplan.core.cluster import Alteration, Op
from kqplan.core.entity import Entity
from tests.kafka.broker import (
    BROKER_JVM_OPTS,
    KafkaBroker,
    download_kafka_libs,
    ensure_kafka_libs,
    kafka_mode,
    kafka_version,
)
from tests.kafka.configcommand import ConfigCommand, Select

MB = 1024 * 1024


def timed(fn: Callable[[], object]) -> float:
    started = time.monotonic()
    fn()
    return time.monotonic() - started


def summary(values: Sequence[float], unit: str = "s", scale: float = 1.0) -> str:
    """``best / median`` of ``values``."""
    fmt = "{:.2f}" if unit == "s" else "{:.0f}"
    best, median = min(values) / scale, statistics.median(values) / scale
    return f"{fmt.format(best)} / {fmt.format(median)} {unit}"


def jar_rows(version: str, cold: bool) -> list[tuple[str, str]]:
    rows = []
    libs = ensure_kafka_libs(version)  # make sure the cache is warm before timing the warm path
    warm = timed(lambda: ensure_kafka_libs(version))
    rows.append(("ensure_kafka_libs, warm cache", f"{warm * 1000:.1f} ms"))
    with tempfile.TemporaryDirectory() as scratch:
        seconds = timed(lambda: download_kafka_libs(version, Path(scratch) / "libs"))
    rows.append(("mvn copy-dependencies, warm ~/.m2", f"{seconds:.1f} s"))
    if cold:
        with tempfile.TemporaryDirectory() as scratch:
            repo = Path(scratch) / "m2"
            seconds = timed(lambda: download_kafka_libs(version, Path(scratch) / "libs",
                                                        maven_args=[f"-Dmaven.repo.local={repo}"]))
            downloaded = sum(f.stat().st_size for f in repo.rglob("*") if f.is_file())
        rows.append(("mvn copy-dependencies, first run (empty Maven repo)",
                     f"{seconds:.1f} s ({downloaded / MB:.0f} MB from Maven Central, plugins included)"))
    jars = list(libs.glob("*.jar"))
    rows.append(("jars", f"{len(jars)} files, {sum(j.stat().st_size for j in jars) / MB:.0f} MB"))
    return rows


def load(bootstrap: str, count: int) -> None:
    config = config_from_properties("", bootstrap=bootstrap, source="benchmark", env={})
    with KafkaCluster(config) as cluster:
        cluster.alter([Alteration(Entity.user(f"bench-{i}"), (Op("producer_byte_rate", float(i + 1)),))
                       for i in range(count)], validate_only=False)
        deadline = time.monotonic() + 30
        while len(cluster.describe()) < count and time.monotonic() < deadline:
            time.sleep(0.2)


def broker_rows(version: str, runs: int, jvm_opts: list[str]) -> list[tuple[str, str]]:
    libs = ensure_kafka_libs(version)
    formats, ready, acls, rss_ready, rss_loaded, stops, config_command = [], [], [], [], [], [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as scratch:
            broker = KafkaBroker(libs, Path(scratch), version, kafka_mode(), jvm_opts=jvm_opts)
            try:
                broker.start()
                formats.append(broker.timings["format"])
                ready.append(broker.timings["ready"])
                acls.append(broker.timings["acls"])
                rss_ready.append(broker.rss_bytes() or 0)
                load(broker.bootstrap, 1000)
                rss_loaded.append(broker.rss_bytes() or 0)
                command = ConfigCommand(libs, broker.bootstrap)
                config_command.append(command.describe(Select.named("users", "bench-1")).seconds)
            finally:
                stops.append(timed(broker.stop))
    return [
        ("StorageTool format (JVM), incl. TLS files", summary(formats)),
        ("start: format -> ApiVersions answers", summary(ready)),
        ("start: ... -> reader ACL visible (fixture ready)", summary(acls)),
        ("broker JVM RSS when ready", summary(rss_ready, "MB", MB)),
        ("broker JVM RSS after 1,000 quota entities", summary(rss_loaded, "MB", MB)),
        ("stop (SIGTERM -> exit)", summary(stops)),
        ("ConfigCommand --describe (one JVM run)", summary(config_command)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cold", action="store_true", help="also time a first Maven download")
    parser.add_argument("--jvm-opts", default=shlex.join(BROKER_JVM_OPTS))
    args = parser.parse_args()
    version = kafka_version()
    print(f"Apache Kafka {version} ({kafka_mode()}), broker JVM options: {args.jvm_opts}, "
          f"best / median of {args.runs}\n")
    print("| measure | value |\n|---|---|")
    for name, value in jar_rows(version, args.cold) + broker_rows(version, args.runs,
                                                                   shlex.split(args.jvm_opts)):
        print(f"| {name} | {value} |", flush=True)


if __name__ == "__main__":
    main()
