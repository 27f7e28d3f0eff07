"""Peak memory and time of `kqplan validate` on a big manifest with one error at its end.

A located error used to compose the whole file with pyyaml (~50 bytes of memory per byte of
YAML); big files are now located by scanning lines (kqplan/manifest/positions.py fast_span).

    python benchmarks/manifest_memory.py [--files K] [MiB ...]      (default: 13 100)

``--files K`` splits the manifest into K files of a directory (the error at the end of the last):
a directory is parsed and compiled a batch of files at a time (loader.BATCH_CHARS).
An older checkout: ``cd OLD && PYTHONPATH=OLD python NEW/benchmarks/manifest_memory.py ...``.
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


def write(directory: Path, n: int, files: int) -> Path:
    """N generated entities and the bad one, in one file or split into ``files`` files."""
    text = manifest_text(n) + BAD_TAIL
    if files == 1:
        path = directory / "big.yaml"
        path.write_text(text)
        return path
    header, _, body = text.partition("entities:\n")
    entries = body.split("\n  - ")
    per = -(-len(entries) // files)
    for f in range(files):
        chunk = entries[f * per:(f + 1) * per]
        lines = "\n  - ".join(chunk)
        if f > 0 and chunk:
            lines = "  - " + lines
        (directory / f"q{f:03d}.yaml").write_text(f"{header}entities:\n{lines.rstrip()}\n")
    return directory


def main(sizes: list[int], files: int) -> None:
    print("| manifest MiB | files | entities | validate wall s | peak RSS MiB | RSS / input |")
    print("|---|---|---|---|---|---|")
    for mib in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            n = int(mib * 1024 * 1024 / 130)  # ~130 bytes per generated entity
            path = write(Path(tmp), n, files)
            size = sum(p.stat().st_size for p in (path.iterdir() if path.is_dir() else [path])) / 2**20
            wall, rss, first = measure(path)
            assert "KQP112" in first, first
            ratio = rss / 1024 / size
            print(f"| {size:.0f} | {files} | {n:,} | {wall:.2f} | {rss / 1024:.0f} | {ratio:.1f}× |",
                  flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    count = 1
    if args[:1] == ["--files"]:
        count, args = int(args[1]), args[2:]
    main([int(a) for a in args] or [13, 100], count)
