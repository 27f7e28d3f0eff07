"""Do two checkouts of kqplan give the same bytes? For a change that must not change behaviour
(a restructuring): every output of a set of commands on the examples and on the benchmark
inputs — stdout, stderr, exit code and each file written — compared byte for byte.

Run: .venv/bin/python benchmarks/same_outputs.py --against /path/to/older/checkout [--n 100000]

Each side runs ``python -m kqplan`` with its checkout as the working directory and first on the
path (as ``phases.py --against`` does), so relative paths in the outputs are the same strings;
the files a command writes go to the same path for both sides, one after the other. Prints one
line per command and exits 1 when anything differs.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))


def cases(work: Path, n: int) -> list[tuple[str, list[str]]]:
    """(name, arguments); ``OUT`` in an argument is the side's output directory."""
    pay = ["examples/payments", "--state", "examples/payments/snapshot.json"]
    # an inventory's layers are absolute paths, and a plan's digest covers them: one copy for both
    fleet = ["--config", str(work / "fleet" / "kqplan.toml")]
    bench_one, bench_snap = work / f"quotas-{n}.yaml", work / f"snapshot-{n}.json"
    bench_dir, bench_seed = work / f"m{n}", work / f"seed-{n}.json"
    principals = work / "principals.csv"
    return [
        ("payments plan json", ["plan", *pay, "--format", "json", "--out", "OUT/plan.json"]),
        ("payments plan text", ["plan", *pay, "--principals", str(principals)]),
        ("payments plan markdown", ["plan", *pay, "--format", "markdown", "--principals", str(principals)]),
        ("payments plan github", ["plan", *pay, "--format", "github"]),
        ("payments validate json", ["validate", "examples/payments", "--format", "json"]),
        ("payments export", ["export", "--state", "examples/payments/snapshot.json", "--out", "OUT/export"]),
        ("payments resolve json", ["resolve", "--state", "examples/payments/snapshot.json",
                                   "--names", "user=payments-api,client-id=app", "--format", "json"]),
        ("payments describe json", ["describe", "--state", "examples/payments/snapshot.json",
                                    "--format", "json"]),
        ("converged plan json", ["plan", "examples/converged/quotas.yaml", "--state",
                                 "examples/converged/snapshot.json", "--format", "json"]),
        ("fleet prod plan json", [*fleet, "plan", "--cluster", "prod", "--format", "json"]),
        ("fleet staging plan text", [*fleet, "plan", "--cluster", "staging"]),
        ("fleet validate", [*fleet, "validate", "--cluster", "prod", "--format", "json"]),
        ("fleet plan json", [*fleet, "fleet", "plan", "--format", "json"]),
        ("fleet plan markdown", [*fleet, "fleet", "plan", "--format", "markdown"]),
        ("fleet impact", [*fleet, "fleet", "impact", "--usage", str(work / "fleet" / "usage"),
                          "--out", "OUT/impact", "--format", "markdown"]),
        ("fleet rightsize", [*fleet, "fleet", "rightsize", "--usage", str(work / "fleet" / "usage"),
                             "--out", "OUT/rightsize"]),
        (f"bench plan {n} one file json", ["plan", str(bench_one), "--state", str(bench_snap),
                                            "--format", "json", "--out", "OUT/plan.json"]),
        (f"bench plan {n} in 10 files json", ["plan", str(bench_dir), "--state", str(bench_seed),
                                               "--format", "json", "--out", "OUT/plan.json"]),
        (f"bench plan {n} in 10 files markdown", ["plan", str(bench_dir), "--state", str(bench_seed),
                                                   "--format", "markdown"]),
        (f"bench validate {n} json", ["validate", str(bench_dir), "--format", "json"]),
        ("bad input", ["plan", "examples/payments", "--state", "examples/payments/defaults.yaml"]),
    ]


def run(checkout: Path, args: list[str], out: Path) -> tuple[int, bytes, bytes]:
    env = {**os.environ, "PYTHONPATH": str(checkout), "COLUMNS": "100", "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-m", "kqplan", *(a.replace("OUT", str(out)) for a in args)],
                          cwd=checkout, env=env, capture_output=True, check=False, timeout=600)
    return done.returncode, neutral(done.stdout, checkout, out), neutral(done.stderr, checkout, out)


def neutral(data: bytes, checkout: Path, out: Path) -> bytes:
    """The output with the side's own absolute paths (an inventory's layers are absolute) named
    alike: ``CHECKOUT`` and ``OUT``."""
    return data.replace(str(out).encode(), b"OUT").replace(str(checkout).encode(), b"CHECKOUT")


def same_tree(a: Path, b: Path) -> bool:
    compared = filecmp.dircmp(a, b)
    if compared.left_only or compared.right_only or compared.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(a, b, compared.common_files, shallow=False)
    return not mismatch and not errors and all(same_tree(a / d, b / d) for d in compared.common_dirs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--against", required=True, metavar="CHECKOUT")
    parser.add_argument("--n", type=int, default=100_000)
    args = parser.parse_args()
    from benchmarks.generate import write_fixture
    from benchmarks.phases import write_fleet

    work = Path(tempfile.mkdtemp(prefix="kqplan-same-"))
    write_fixture(work, args.n)
    write_fleet(work, args.n, 10)
    shutil.copytree(ROOT / "examples" / "fleet", work / "fleet")
    (work / "principals.csv").write_text("user,client-id\npayments-api,app\nalice,\nbob,x\n")
    out = work / "out"
    differ = 0
    for name, case in cases(work, args.n):
        seen = []
        for side, checkout in (("old", Path(args.against).resolve()), ("new", ROOT)):
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            code, stdout, stderr = run(checkout, case, out)
            kept = work / side / name.replace(" ", "-")
            shutil.rmtree(kept, ignore_errors=True)
            shutil.copytree(out, kept)
            for written in (p for p in kept.rglob("*") if p.is_file()):
                written.write_bytes(neutral(written.read_bytes(), checkout, out))
            seen.append((code, stdout, stderr, kept))
        (a_code, a_out, a_err, a_dir), (b_code, b_out, b_err, b_dir) = seen
        same = a_code == b_code and a_out == b_out and a_err == b_err and same_tree(a_dir, b_dir)
        files = sum(1 for p in b_dir.rglob("*") if p.is_file())
        print(f"{'same' if same else 'DIFFERENT'}  {name}: exit {b_code}, {len(b_out)} bytes out, "
              f"{len(b_err)} bytes err, {files} file(s)")
        differ += not same
    print(f"{differ} of {len(cases(work, args.n))} commands differ (outputs kept in {work})")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
