"""Where a big plan's time goes, phase by phase, plus the issue-15 end-to-end measures.

Run: .venv/bin/python benchmarks/phases.py [--n 100000] [--files 10] [--real]
(an older checkout: PYTHONPATH=/path/to/checkout .venv/bin/python benchmarks/phases.py ...)

Phases (in-process, one run each after one warm-up, the collector paused as the CLI does):
import, load+compile (read, parse, shape check and compile, file by file as the command does),
describe (request + decode), diff, checks (versions, lint, notes), encode (plan JSON), write.
End to end (processes, as a user runs them; wall seconds and peak RSS from GNU time; with
``--repeat K`` the best and the median of K runs, as this VM's timings vary by ~10 %):

- ``kqplan plan DIR --bootstrap-server SANDBOX --format json --out plan.json`` warm, and on the
  sandbox's first describe after a committed alter;
- ``kqplan validate`` of N, of N/10 and of one small file; ``kqplan --help``;
- the sandbox's own time to answer a describe-all right after a commit;
- with ``--real``: 1000-entity apply, no-op plan and 10 % change on a fresh real Kafka broker
  (tests/kafka), with the number of verify polls from ``--report``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# appended, not inserted: with PYTHONPATH=<an older checkout> (and that checkout as the working
# directory, which `python -m` puts first) both the commands and the in-process phases run it
sys.path.append(str(ROOT))

# `python -m kqplan` rather than the console script, so that PYTHONPATH=<an older checkout> measures
# that checkout with the same interpreter and libraries (the before/after table).
KQPLAN = [sys.executable, "-m", "kqplan"]

# Measured as installed: Python caches compiled modules (pip compiles an installed package's at
# install time; an editable checkout's on its first run). This machine's environment sets
# PYTHONDONTWRITEBYTECODE=1, which would make every command recompile kqplan's ~45 modules from
# source (+0.05-0.1 s); `--no-bytecode` keeps that setting to show the difference.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None) if "--no-bytecode" not in sys.argv else None


def timed(args: list[str], checkout: str | None = None
          ) -> tuple[float, int, subprocess.CompletedProcess[bytes]]:
    """Wall seconds and peak RSS (KiB) of one process, measured by GNU time (``wait4`` in this
    process would count the pages the child inherited from the fork, before its exec);
    ``checkout``: run that kqplan checkout instead (``python -m kqplan`` with it on PYTHONPATH
    and as the working directory, which ``-m`` puts first)."""
    env = None if checkout is None else {**os.environ, "PYTHONPATH": checkout}
    with tempfile.NamedTemporaryFile("r") as report:
        done = subprocess.run(["/usr/bin/time", "-o", report.name, "-f", "%e %M", *args],
                              capture_output=True, check=False, env=env, cwd=checkout)
        wall, rss = report.read().split()[-2:]
    return float(wall), int(rss), done


def repeated(run: Callable[[], tuple[float, int, subprocess.CompletedProcess[bytes]]], k: int) -> str:
    """One run's wall and peak RSS; with k > 1 the best and the median of k."""
    results = []
    for _ in range(k):
        wall, rss, done = run()
        assert done.returncode == 0, done.stderr.decode()
        results.append((wall, rss // 1024))
    if k == 1:
        return f"{results[0][0]:.2f} s, {results[0][1]} MiB"
    walls = sorted(w for w, _ in results)
    peaks = sorted(r for _, r in results)
    return (f"best {walls[0]:.2f} s, median {statistics.median(walls):.2f} s; "
            f"peak {peaks[0]}–{peaks[-1]} MiB ({k} runs)")


def against(old: str, measures: list[tuple[str, Callable[[str | None], list[str]]]], k: int,
            before: Callable[[str | None], None] | None = None) -> list[tuple[str, str]]:
    """Each measure run k times for ``old`` and for this checkout, alternately (this VM's speed
    drifts over minutes: alternating puts both sides under the same drift)."""
    rows = []
    for label, command in measures:
        walls: dict[str, list[float]] = {"old": [], "new": []}
        peaks: dict[str, list[int]] = {"old": [], "new": []}
        for _ in range(k):
            for side, checkout in (("old", old), ("new", None)):
                if before is not None:
                    before(checkout)
                wall, rss, done = timed(command(checkout), checkout)
                assert done.returncode == 0, done.stderr.decode()
                walls[side].append(wall)
                peaks[side].append(rss // 1024)
        med = {side: statistics.median(w) for side, w in walls.items()}
        rows.append((label, f"before: best {min(walls['old']):.2f} s, median {med['old']:.2f} s, peak "
                     f"{max(peaks['old'])} MiB · after: best {min(walls['new']):.2f} s, median "
                     f"{med['new']:.2f} s, peak {max(peaks['new'])} MiB · {med['old'] / med['new']:.2f}x "
                     f"({k} runs each, alternating)"))
    return rows


def write_fleet(directory: Path, n: int, files: int) -> tuple[Path, Path]:
    """``files`` manifests holding N entities together, and the drifted snapshot (generate.py)."""
    from benchmarks.generate import drifted_state, manifest_text
    from kqplan.snapshot.file import write_snapshot

    manifests = directory / f"m{n}"
    manifests.mkdir(parents=True, exist_ok=True)
    entries = manifest_text(n).split("\n  - ")[1:]
    per = -(-n // files)
    for f in range(files):
        chunk = entries[f * per:(f + 1) * per]
        body = "".join(f"  - {e.rstrip()}\n" for e in chunk)
        header = "apiVersion: kqplan/v1\nkind: ClientQuotas\nentities:\n"
        (manifests / f"q{f:02d}.yaml").write_text(header + body)
    seed = directory / f"seed-{n}.json"
    write_snapshot(seed, drifted_state(n), "bench")
    return manifests, seed


@contextmanager
def sandbox(seed: Path, log: Path | None = None, checkout: str | None = None) -> Iterator[str]:
    """A sandbox broker process seeded with ``seed`` (``checkout``: that kqplan's sandbox)."""
    args = [sys.executable, "-m", "kqplan.sandbox", "--port", "0", "--seed", str(seed)]
    if log is not None:
        args += ["--request-log", str(log)]
    env = None if checkout is None else {**os.environ, "PYTHONPATH": checkout}
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env, cwd=checkout)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        yield line.split()[-1]
    finally:
        proc.terminate()
        proc.wait(30)


def touch_cluster(bootstrap: str) -> None:
    """One committed alter (a new entity), so the sandbox's next describe is a first one."""
    subprocess.run([*KQPLAN, "alter", "--bootstrap-server", bootstrap, "--names",
                    f"user=touch-{time.time_ns()}", "--add", "producer_byte_rate=1024"],
                   check=True, capture_output=True)


def phases(manifests: Path, bootstrap: str) -> dict[str, float]:
    """In-process split of one ``plan --format json --out`` (second of two runs)."""
    t0 = time.perf_counter()
    from kqplan.cluster.connection import config_from_properties
    from kqplan.cluster.kafka import KafkaCluster
    from kqplan.config.model import ProjectConfig
    from kqplan.core.versions import ClusterProfile
    from kqplan.files import write_atomically
    from kqplan.manifest.compile import load_desired
    from kqplan.perf import paused_gc
    from kqplan.pipeline.guarded import check_versions, compute_plan, lint_warnings
    from kqplan.planfile.codec import dumps_plan

    imported = time.perf_counter() - t0
    result: dict[str, float] = {}
    for _ in range(2):
        config = ProjectConfig()
        marks = [time.perf_counter()]
        with paused_gc():
            # read, parse, shape-check and compile, file by file as the command does
            desired = load_desired([manifests], config)
            marks.append(time.perf_counter())
            with KafkaCluster(config_from_properties("", bootstrap=bootstrap, source="bench", env={})) as c:
                c.identity()
                actual = c.describe()
                marks.append(time.perf_counter())
                plan = compute_plan(desired, c, config, actual=actual)
                marks.append(time.perf_counter())
            check_versions(desired, ClusterProfile())
            lint_warnings(desired, plan)
            marks.append(time.perf_counter())
            encoded = dumps_plan(plan)
            marks.append(time.perf_counter())
            with tempfile.TemporaryDirectory() as tmp:
                write_atomically(Path(tmp) / "plan.json", encoded)
            marks.append(time.perf_counter())
        names = ("load+compile", "describe", "diff", "checks", "encode", "write")
        result = {name: marks[i + 1] - marks[i] for i, name in enumerate(names)}
    return {"import": imported, **result}


def sandbox_first_describe(seed: Path) -> float:
    """The sandbox's own time to answer a describe-all right after a committed alter."""
    from kqplan.sandbox import apis
    from kqplan.sandbox.engine import AlterEntry, QuotaEngine, WireOp
    from kqplan.snapshot.file import read_snapshot

    engine = QuotaEngine(read_snapshot(seed)[0])
    best = float("inf")
    for i in range(3):
        engine.alter([AlterEntry((("user", f"touch-{i}"),), (WireOp("producer_byte_rate", 1024.0, False),))],
                     False, version=1)
        t0 = time.perf_counter()
        apis.describe_response(1, engine.describe([], False, version=1))
        best = min(best, time.perf_counter() - t0)
    return best


def users_manifest(path: Path, n: int, *, changed_every: int = 0) -> Path:
    """N ``{user}`` entities with 2 keys (every ``changed_every``-th with another value)."""
    body = "".join(
        f"  - user: bench-{i}\n    quotas: {{producer_byte_rate: "
        f"{2048 if changed_every and i % changed_every == 0 else 1024}, consumer_byte_rate: 4096}}\n"
        for i in range(n))
    path.write_text(f"apiVersion: kqplan/v1\nkind: ClientQuotas\nentities:\n{body}")
    return path


def real_broker(work: Path, n: int, big: int | None, repeat: int = 1,
                old: str | None = None) -> list[tuple[str, str]]:
    """1000-entity apply, no-op plan and 10 % change on a fresh real broker (tests/kafka); with
    ``old`` (``--against``), only the big plan, alternating with that checkout."""
    from tests.kafka.broker import KafkaBroker, ensure_kafka_libs, kafka_version

    version = kafka_version()
    measured = subprocess.run([*KQPLAN[:1], "-c", "import kqplan; print(kqplan.__file__)"],
                              capture_output=True, text=True, check=True).stdout.strip()
    rows: list[tuple[str, str]] = [("kqplan measured", measured)]
    with tempfile.TemporaryDirectory() as home, \
            KafkaBroker(ensure_kafka_libs(version), Path(home), version) as broker:
        target = ["--bootstrap-server", broker.bootstrap]
        first = users_manifest(work / "real.yaml", n)
        for label, args in () if old else (
                (f"real Kafka {version}: apply {n} new entities", ["apply", str(first), "--auto-approve"]),
                (f"real Kafka {version}: no-op plan of {n}", ["plan", str(first)]),
                (f"real Kafka {version}: apply a 10 % change of {n}",
                 ["apply", str(users_manifest(work / "real-changed.yaml", n, changed_every=10)),
                  "--auto-approve"])):
            report = work / "report.json"
            extra = ["--report", str(report)] if args[0] == "apply" else []
            wall, rss, done = timed([*KQPLAN, *args, *extra, *target])
            assert done.returncode == 0, done.stdout.decode()[-2000:] + done.stderr.decode()
            polls = ""
            if extra:
                doc = json.loads(report.read_text())
                verify = doc.get("verify") or {"polls": f"{doc['requests']['describe']}?", "seconds": "?"}
                polls = f", verify {verify['polls']} describe(s) in {verify['seconds']} s"
            rows.append((label, f"{wall:.2f} s, {rss // 1024} MiB{polls}"))
        if big:
            manifests = users_manifest(work / "real-big.yaml", big)
            done = subprocess.run([*KQPLAN, "apply", str(manifests), "--auto-approve", *target],
                                  capture_output=True, check=False)
            assert done.returncode == 0, done.stderr.decode()
            label = f"real Kafka {version}: plan {big} (no changes), --format json --out"
            plan = [*KQPLAN, "plan", str(manifests), "--format", "json",
                    "--out", str(work / "plan-real.json"), *target]
            if old:
                rows += against(old, [(label, lambda _: plan)], repeat)
            else:
                rows.append((label, repeated(lambda: timed(plan), repeat)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--real", action="store_true", help="also the real Kafka broker (tests/kafka)")
    parser.add_argument("--no-bytecode", action="store_true",
                        help="keep PYTHONDONTWRITEBYTECODE from the environment (compile every run)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each end-to-end measure")
    parser.add_argument("--against", metavar="CHECKOUT", default=None,
                        help="only the end-to-end measures, alternating with this older checkout")
    parser.add_argument("--real-n", type=int, default=1000)
    parser.add_argument("--real-big", type=int, default=None, help="also plan this many on the real broker")
    args = parser.parse_args()
    if not args.no_bytecode:
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # for the commands this script runs
        sys.dont_write_bytecode = False  # and for its own in-process phases
    work = Path(tempfile.mkdtemp(prefix="kqplan-phases-"))
    manifests, seed = write_fleet(work, args.n, args.files)
    small, _ = write_fleet(work / "small", max(args.n // 10, 1), args.files)
    one = work / "one.yaml"
    one.write_text("apiVersion: kqplan/v1\nkind: ClientQuotas\nentities:\n"
                   "  - user: alice\n    quotas:\n      producer_byte_rate: 1MiB\n")
    rows: list[tuple[str, str]] = []
    subprocess.run([*KQPLAN, "validate", str(one)], capture_output=True, check=True)  # caches bytecode
    if args.against:
        timed([*KQPLAN, "validate", str(one)], args.against)  # caches the old checkout's bytecode
        # each side plans against its own checkout's sandbox (the sandbox is measured too)
        with sandbox(seed, checkout=args.against) as old_bootstrap, sandbox(seed) as new_bootstrap:
            def bootstrap_of(checkout: str | None) -> str:
                return new_bootstrap if checkout is None else old_bootstrap

            def plan(checkout: str | None) -> list[str]:
                return [*KQPLAN, "plan", str(manifests), "--bootstrap-server", bootstrap_of(checkout),
                        "--format", "json", "--out", str(work / "plan.json")]

            rows += against(args.against, [(f"plan {args.n} (sandbox, first describe after a change)", plan)],
                            args.repeat, before=lambda checkout: touch_cluster(bootstrap_of(checkout)))
            rows += against(args.against, [(f"plan {args.n} (sandbox, warm)", plan)], args.repeat)
        rows += against(args.against, [
            (f"validate {args.n}", lambda _: [*KQPLAN, "validate", str(manifests)]),
            (f"validate {args.n // 10}", lambda _: [*KQPLAN, "validate", str(small)]),
            ("validate one small file", lambda _: [*KQPLAN, "validate", str(one)]),
            ("kqplan --help", lambda _: [*KQPLAN, "--help"])], args.repeat)
        if args.real_big:
            rows += real_broker(work, args.real_n, args.real_big, args.repeat, old=args.against)
        print("| measure | result |\n|---|---|")
        for label, value in rows:
            print(f"| {label} | {value} |")
        return
    with sandbox(seed) as bootstrap:
        plan_args = [*KQPLAN, "plan", str(manifests), "--bootstrap-server", bootstrap,
                     "--format", "json", "--out", str(work / "plan.json")]

        def first_after_a_change() -> tuple[float, int, subprocess.CompletedProcess[bytes]]:
            touch_cluster(bootstrap)
            return timed(plan_args)

        rows.append((f"plan {args.n} (sandbox, first describe after a change)",
                     repeated(first_after_a_change, args.repeat)))
        rows.append((f"plan {args.n} (sandbox, warm)", repeated(lambda: timed(plan_args), args.repeat)))
        for name, value in phases(manifests, bootstrap).items():
            rows.append((f"  phase {name}", f"{value:.3f} s"))
    rows.append(("sandbox: describe-all answer after a commit (in-process, encode included)",
                 f"{sandbox_first_describe(seed):.3f} s"))
    for label, target in ((f"validate {args.n}", manifests), (f"validate {args.n // 10}", small),
                          ("validate one small file", one)):
        rows.append((label, repeated(lambda t=target: timed([*KQPLAN, "validate", str(t)]), args.repeat)))
    wall, _, _ = timed([*KQPLAN, "--help"])
    rows.append(("kqplan --help", f"{wall:.2f} s"))
    if args.real:
        rows += real_broker(work, args.real_n, args.real_big, args.repeat)
    print("| measure | result |\n|---|---|")
    for label, value in rows:
        print(f"| {label} | {value} |")
    print(json.dumps({"workdir": str(work)}))


if __name__ == "__main__":
    main()
