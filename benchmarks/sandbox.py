"""The sandbox broker at N entities, in-process: snapshot write/read, engine load, describe-all,
encoding its answer, and a 10k-entry alter (committed and validateOnly).

Run: .venv/bin/python benchmarks/sandbox.py [N]   (default 100000). Best of RUNS, GC on and
paused (the broker runs with the collector on; the CLI pauses it per command).
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.generate import desired_state
from kqplan.perf import paused_gc
from kqplan.sandbox import apis
from kqplan.sandbox.engine import AlterEntry, QuotaEngine, WireOp
from kqplan.snapshot.file import read_snapshot, write_snapshot

RUNS = 3


def best(fn, paused: bool) -> float:
    times = []
    for _ in range(RUNS):
        with paused_gc() if paused else contextlib.nullcontext():
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return min(times)


def alter_entries(n: int) -> list[AlterEntry]:
    return [AlterEntry((("user", f"bench-new-{i}"),), (WireOp("producer_byte_rate", i + 1.0, False),))
            for i in range(n)]


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    state = desired_state(n)
    path = Path(tempfile.mkdtemp()) / "state.json"
    write_snapshot(path, state, "bench")
    engine = QuotaEngine(state)
    everything = engine.describe([], False, version=1)
    entries = alter_entries(10_000)

    def alter(validate_only: bool) -> None:
        QuotaEngine(state).alter(entries, validate_only, version=1)  # fresh engine: always a change

    alter_setup = best(lambda: QuotaEngine(state), False)
    print(f"| measure ({n:,} entities) | GC on s | GC paused s |")
    print("|---|---|---|")
    rows = [
        (f"snapshot write ({path.stat().st_size / 2**20:.1f} MiB, temp file + fsync + rename)",
         lambda: write_snapshot(path, state, "bench")),
        ("snapshot read", lambda: read_snapshot(path)),
        ("engine load", lambda: QuotaEngine(state)),
        ("engine describe-all", lambda: engine.describe([], False, version=1)),
        ("encode the describe-all answer (v1, kafka-python classes)",
         lambda: apis.describe_response(1, everything)),
    ]
    for label, fn in rows:
        print(f"| {label} | {best(fn, False):.3f} | {best(fn, True):.3f} |")
    for label, flag in (("alter 10k entries, committed", False), ("alter 10k entries, validateOnly", True)):
        on = best(lambda flag=flag: alter(flag), False) - alter_setup
        off = best(lambda flag=flag: alter(flag), True) - best(lambda: QuotaEngine(state), True)
        print(f"| {label} (engine load subtracted) | {on:.3f} | {off:.3f} |")


if __name__ == "__main__":
    main()
