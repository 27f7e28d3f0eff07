"""Issue 16's bound, measured: `kqplan validate` of a big manifest with one error at its end
peaks under 64 MiB + 12x the input, whether the input is one file (read in slices from 4 MiB:
~8x), a file just under the slicing threshold (read from its text when its list is plain, else
parsed whole), or a directory (plain files read from their text; others parsed a 16 MiB batch
at a time by two threads: the worst case, ~10x). Peak RSS of the kqplan process alone, read by
a fresh parent from RUSAGE_CHILDREN (this test process has had other children, brokers among
them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.manifest_memory import write

MEASURE = ("import json, resource, subprocess, sys\n"
           "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
           "print(json.dumps([done.returncode, done.stdout + done.stderr,\n"
           "                  resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss]))\n")


def peak_of_validate(path: Path) -> tuple[int, str, float]:
    """(exit code, output, peak RSS in MiB) of `kqplan validate path`."""
    done = subprocess.run([sys.executable, "-c", MEASURE, sys.executable, "-m", "kqplan", "validate",
                           str(path)], capture_output=True, text=True, check=True, timeout=120)
    code, output, kib = json.loads(done.stdout)
    return code, output, kib / 1024


def written(directory: Path, n: int, files: int, *, plain: bool) -> tuple[Path, float]:
    """The benchmark's input (N entities and the bad one, in ``files`` files) and its size in MiB;
    not ``plain``: a comment after each ``entities:``, so no file is read from its text."""
    path = write(directory, n, files)
    paths = sorted(path.iterdir()) if path.is_dir() else [path]
    if not plain:
        for p in paths:
            p.write_text(p.read_text().replace("entities:\n", "entities:\n  # not plain\n", 1))
    return path, sum(p.stat().st_size for p in paths) / 2**20


@pytest.mark.parametrize(("n", "files", "plain", "factor"), [
    (100_000, 1, True, 8),  # 12 MiB in one file: sliced (parsed whole, it peaked at 193 MiB)
    (30_000, 1, True, 8),  # 3.6 MiB: just under the slicing threshold, read from its text
    (30_000, 1, False, 8),  # the same, parsed whole
    (130_000, 8, True, 12),  # 15 MiB in 8 files of 2 MiB, read from their text
    (130_000, 8, False, 12),  # the same, one batch parsed whole by two threads
])
def test_validate_peaks_under_64_mib_plus_a_multiple_of_the_input(n: int, files: int, plain: bool,
                                                                  factor: int, tmp_path: Path) -> None:
    path, mib = written(tmp_path, n, files, plain=plain)
    code, output, peak = peak_of_validate(path)
    assert code == 1, output[-2000:]
    assert "KQP112" in output, output[-2000:]
    assert peak <= 64 + factor * mib, f"{mib:.1f} MiB of manifests peaked at {peak:.0f} MiB"
