"""Peak memory and time of `kqplan validate` on a big manifest with one error at its end.

A located error used to compose the whole file with pyyaml (~50 bytes of memory per byte of
YAML); big files are now located by scanning lines (kqplan/manifest/positions.py fast_span).

    python benchmarks/manifest_memory.py [MiB ...]      (default: 13 100)
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.generate import manifest_text

BAD_TAIL = "  - user: zzz-bad\n    quotas: {producer_byte_rate: 0}\n"


def measure(path: Path) -> tuple[float, int, str]:
    """(wall seconds, peak RSS KiB, first output line) of `kqplan validate path`, via GNU time."""
    done = subprocess.run(["/usr/bin/time", "-f", "%e %M", sys.executable, "-m", "kqplan", "validate",
                           str(path)], capture_output=True, text=True, check=False)
    wall, rss = done.stderr.strip().splitlines()[-1].split()
    return float(wall), int(rss), done.stdout.splitlines()[0] if done.stdout else done.stderr


def main(sizes: list[int]) -> None:
    print("| manifest MiB | entities | validate wall s | peak RSS MiB | RSS / input |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for mib in sizes:
            n = int(mib * 1024 * 1024 / 130)  # ~130 bytes per generated entity
            path = Path(tmp) / f"big-{mib}.yaml"
            path.write_text(manifest_text(n) + BAD_TAIL)
            size = path.stat().st_size / 2**20
            wall, rss, first = measure(path)
            assert "KQP112" in first, first
            print(f"| {size:.0f} | {n:,} | {wall:.2f} | {rss / 1024:.0f} | {rss / 1024 / size:.1f}× |",
                  flush=True)
            path.unlink()


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [13, 100])
