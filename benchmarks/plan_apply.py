"""plan and apply over the wire at N entities: wall time of the real command, where the time
goes (load+validate / describe / diff / render), and the Kafka requests each command costs.

Run: .venv/bin/python benchmarks/plan_apply.py [--real] [N ...]   (default 1000 10000 100000)

Sandbox: ``python -m kqplan.sandbox`` in its own process (so the client's time is the client's),
seeded with a drifted state (every 10th entity changed, every 10th missing); requests are read
from its ``--request-log``. ``--real`` also runs against the real Apache Kafka broker of the
test suite (tests/kafka), populated by kqplan's own apply; requests there come from a counting
proxy. Prints Markdown tables; best of RUNS for the timings (this is a noisy 2-core VM).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.generate import write_fixture
from kqplan.cluster.connection import config_from_properties
from kqplan.cluster.kafka import KafkaCluster
from kqplan.config.model import ProjectConfig
from kqplan.core.plan import ClusterRef, diff
from kqplan.core.state import fingerprint
from kqplan.manifest.compile import load_desired
from kqplan.perf import paused_gc
from kqplan.render.text import render_text

RUNS = 3
KQPLAN = Path(sys.executable).with_name("kqplan")


@contextmanager
def sandbox(seed: Path, log: Path) -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, "-m", "kqplan.sandbox", "--port", "0", "--seed", str(seed),
                             "--request-log", str(log)], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        yield line.split()[-1]
    finally:
        proc.terminate()
        proc.wait(30)


def wall(*args: str | Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    done = subprocess.run([str(KQPLAN), *map(str, args)], capture_output=True, text=True, check=False)
    return time.perf_counter() - t0, done


def requests_in(log: Path, since: int) -> tuple[Counter[str], int]:
    lines = log.read_text().splitlines()
    return Counter(json.loads(line)["api_name"] for line in lines[since:]), len(lines)


def phases(manifest: Path, bootstrap: str) -> dict[str, float]:
    """In-process split of one plan (best of RUNS per phase)."""
    best: dict[str, float] = {}
    for _ in range(RUNS):
        with paused_gc():
            t0 = time.perf_counter()
            desired = load_desired([manifest], ProjectConfig())
            t1 = time.perf_counter()
            with KafkaCluster(config_from_properties("", bootstrap=bootstrap, source="bench", env={})) as c:
                ident = c.identity()
                t2 = time.perf_counter()
                actual = c.describe()
                t3 = time.perf_counter()
            plan = diff(desired.quotas, actual, desired.ownership,
                        cluster=ClusterRef(ident.cluster_id, ident.address), fingerprint=fingerprint(actual))
            t4 = time.perf_counter()
            render_text(plan)
            t5 = time.perf_counter()
        for name, value in (("load+validate", t1 - t0), ("connect", t2 - t1), ("describe", t3 - t2),
                            ("diff", t4 - t3), ("render", t5 - t4)):
            best[name] = min(best.get(name, value), value)
    return best


def run_sandbox(n: int, out: Path) -> dict[str, object]:
    manifest, seed = write_fixture(out, n)
    log = out / f"requests-{n}.jsonl"
    log.unlink(missing_ok=True)
    row: dict[str, object] = {"N": n}
    with sandbox(seed, log) as bootstrap:
        seen = 0
        times = []
        for _ in range(RUNS):
            seconds, done = wall("plan", manifest, "--bootstrap-server", bootstrap)
            assert done.returncode == 0, done.stderr
            times.append(seconds)
            counts, seen = requests_in(log, seen)
        row["plan wall s"] = min(times)
        row["plan requests"] = dict(counts)
        row["summary"] = done.stdout.strip().splitlines()[-1]
        row.update({f"{k} s": round(v, 3) for k, v in phases(manifest, bootstrap).items()})
        _, seen = requests_in(log, 0)
        report = out / f"report-{n}.json"
        seconds, done = wall("apply", manifest, "--auto-approve", "--report", report,
                             "--bootstrap-server", bootstrap)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr
        counts, seen = requests_in(log, seen)
        row["apply wall s"] = seconds
        row["apply requests"] = dict(counts)
        row["apply batches"] = json.loads(report.read_text())["batches"]
        seconds, done = wall("plan", manifest, "--bootstrap-server", bootstrap)
        row["re-plan"] = done.stdout.strip().splitlines()[0]
    return row


def run_real(n: int, out: Path) -> dict[str, object]:
    from tests.cluster.proxy import CountingProxy
    from tests.kafka.broker import KafkaBroker, ensure_kafka_libs, kafka_version

    manifest, _ = write_fixture(out, n)
    version = kafka_version()
    row: dict[str, object] = {"N": n, "kafka": version}
    with tempfile.TemporaryDirectory() as work, \
            KafkaBroker(ensure_kafka_libs(version), Path(work), version) as broker:
        with CountingProxy(broker.bootstrap).running() as proxy:
            report = out / f"report-real-{n}.json"
            seconds, done = wall("apply", manifest, "--auto-approve", "--report", report,
                                 "--bootstrap-server", proxy.bootstrap)
            assert done.returncode == 0, done.stdout[-2000:] + done.stderr
            row["apply (all adds) wall s"] = seconds
            row["apply requests"] = dict(proxy.requests)
            proxy.reset()
            times = []
            for _ in range(RUNS):
                seconds, done = wall("plan", manifest, "--bootstrap-server", proxy.bootstrap)
                assert done.returncode == 0, done.stderr
                times.append(seconds)
            row["plan wall s"] = min(times)
            row["plan requests (per run)"] = {k: v // RUNS for k, v in proxy.requests.items()}
            row["re-plan"] = done.stdout.strip().splitlines()[0]
        row.update({f"{k} s": round(v, 3) for k, v in phases(manifest, broker.bootstrap).items()})
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("sizes", nargs="*", type=int, default=[1000, 10000, 100000])
    parser.add_argument("--real", action="store_true", help="also against the real Kafka broker")
    args = parser.parse_args()
    out = Path(__file__).resolve().parent / "out"
    for n in args.sizes:
        print(json.dumps(run_sandbox(n, out)))
        sys.stdout.flush()
    if args.real:
        for n in args.sizes:
            print(json.dumps(run_real(n, out)))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
