"""`kqplan test` beside `kqplan validate` on the same manifests: what judging quota tests adds to the
offline check a pre-commit hook runs (whole processes, alternating runs, medians).

Run: .venv/bin/python benchmarks/quota_tests.py [--entities N ...] [--tests M ...] [--runs R]
Prints a Markdown table; the numbers in benchmarks/README.md come from this script.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.generate import manifest_text

OUT = Path(__file__).resolve().parent / "out" / "quota-tests"
KQPLAN = Path(sys.executable).with_name("kqplan")


def tests_text(n: int, m: int) -> str:
    """M tests over the fixture's principals, all holding: half name a client-id, half stand for
    every one (each client-id named beside the user, none sent, any other)."""
    lines = ["apiVersion: kqplan/v1", "kind: QuotaTests", "tests:"]
    for j in range(m):
        i = (j * 7919) % n  # spread over the file
        if j % 2:
            user, client = (f"user-{i // 3}", f"client-{i}") if i % 3 == 2 else (f"user-{i}", "app")
            principal = f"{{user: {user}, client-id: {client}}}"
        else:
            principal = f"{{user: user-{i if i % 3 != 2 else i // 3}}}"
        expect = "{producer_byte_rate: {at-least: 1KiB}, consumer_byte_rate: {at-least: 1KiB}}"
        lines.append(f"  - name: test {j}\n    principal: {principal}\n    expect: {expect}")
    return "\n".join(lines) + "\n"


def fixture(n: int, m: int) -> Path:
    directory = OUT / f"{n}-{m}"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "quotas.yaml").write_text(manifest_text(n))
    (directory / "tests.yaml").write_text(tests_text(n, m))
    return directory


def run(args: list[str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run([str(KQPLAN), *args], capture_output=True, text=True, check=False)
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"kqplan {' '.join(args)} failed ({proc.returncode}): "
                         f"{proc.stdout[-500:]}{proc.stderr}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entities", type=int, nargs="*", default=[10_000, 100_000])
    parser.add_argument("--tests", type=int, nargs="*", default=[100, 1000])
    parser.add_argument("--runs", type=int, default=5)
    opts = parser.parse_args()
    print("| entities | tests | `validate` s (median) | `test` s (median) | test / validate |")
    print("|---|---|---|---|---|")
    for n in opts.entities:
        for m in opts.tests:
            directory = fixture(n, m)
            run(["test", str(directory)])  # warm: bytecode, page cache
            validate, test = [], []
            for _ in range(opts.runs):  # alternating, so that drift of the machine hits both
                validate.append(run(["validate", str(directory)]))
                test.append(run(["test", str(directory)]))
            v, t = statistics.median(validate), statistics.median(test)
            print(f"| {n:,} | {m:,} | {v:.2f} | {t:.2f} | {t / v:.2f}× |", flush=True)


if __name__ == "__main__":
    main()
