"""Offline validate and snapshot plan: wall time per N, and where the time goes.

Run: .venv/bin/python benchmarks/validate.py [N ...]   (default 1000 10000 100000)
Prints a Markdown table; the numbers in benchmarks/README.md come from this script.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml
import yaml_rs

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.generate import write_fixture
from kqplan.config.model import ProjectConfig
from kqplan.manifest.compile import compile_manifests, load_desired
from kqplan.manifest.loader import load
from kqplan.manifest.parse import ALIAS_LIMITS
from kqplan.perf import paused_gc

OUT = Path(__file__).resolve().parent / "out"
KQPLAN = Path(sys.executable).with_name("kqplan")


def best_of(runs: int, fn) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def wall(args: list[str], runs: int = 3) -> tuple[float, float]:
    """(best, median) wall seconds of a kqplan process."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run([str(KQPLAN), *args], capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - t0)
        if proc.returncode not in (0, 2):
            raise SystemExit(f"kqplan {' '.join(args)} failed: {proc.stderr}")
    return min(times), statistics.median(times)


def measure(n: int) -> tuple[float, ...]:
    manifest, snapshot = write_fixture(OUT, n)
    text = manifest.read_text()
    parse_fast = best_of(3, lambda: yaml_rs.loads(text, parse_datetime=False,
                                                   alias_limits=ALIAS_LIMITS))
    parse_pyyaml = best_of(1, lambda: yaml.load(text, Loader=yaml.CSafeLoader))
    config = ProjectConfig()

    def phases() -> tuple[float, float]:
        with paused_gc():
            t0 = time.perf_counter()
            loaded = load([manifest], config)
            t1 = time.perf_counter()
            compile_manifests(loaded.manifests, config)
            return t1 - t0, time.perf_counter() - t1

    load_s, compile_s = min(phases() for _ in range(3))
    inproc = best_of(3, lambda: load_desired([manifest], config))
    v_best, v_med = wall(["validate", str(manifest)])
    p_best, p_med = wall(["plan", str(manifest), "--state", str(snapshot)])
    return (n, len(text) / 2**20, parse_pyyaml, parse_fast, load_s, compile_s, inproc,
            v_best, v_med, p_best, p_med)


def main(sizes: list[int]) -> None:
    rows = [measure(n) for n in sizes]
    print("| N | manifest MiB | pyyaml CSafeLoader s | yaml_rs parse s | load (parse+pydantic) s "
          "| compile s | validate in-process s | `kqplan validate` wall s (best/median) "
          "| `kqplan plan --state` wall s (best/median) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]:,} | {r[1]:.1f} | {r[2]:.2f} | {r[3]:.3f} | {r[4]:.3f} | {r[5]:.3f} | "
              f"{r[6]:.3f} | {r[7]:.2f} / {r[8]:.2f} | {r[9]:.2f} / {r[10]:.2f} |")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1000, 10000, 100000])
