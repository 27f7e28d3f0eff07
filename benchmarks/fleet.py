"""The fleet pipeline, local engine vs Spark: wall time and peak memory of the whole process tree
(the JVM included), on synthetic fleets.

Run: .venv/bin/python benchmarks/fleet.py [--sizes plan1,plan10,usage1m,usage10m] [--budget-gib 4]

- ``plan1`` / ``plan10``: ``kqplan fleet plan --out DIR`` over 1 and 10 clusters of 100k entities
  each (offline: snapshots, generate.py's drifted state), ``--engine local`` then ``spark``.
- ``usage1m`` / ``usage10m``: ``kqplan fleet impact --stat p99`` over 10 clusters of 10k entities
  with 1M and 10M usage samples (Parquet, 100k principal draws: 20k distinct principals), side by
  side on the same files with the floors under each engine (issue 28): DuckDB doing the same impact
  join alone (``impact_duckdb.py``: the statistics, window sums and statistic over windows in SQL,
  the bucket of each principal's key given as a table computed here, off the clock, with kqplan's
  core from the same snapshot states), in both of its formulations, and Spark's own plain
  aggregation (``impact_spark_plain.py``: a local[*] session reading the same files, exact
  percentile per principal and key, written to Parquet). Then the ratios: local / DuckDB,
  Spark engine / Spark plain.
- ``usageNm`` for any N (e.g. ``usage30m``): to find where the local engine passes the budget.
- ``rightsizeNm``: ``kqplan fleet rightsize --stat p99`` on the same fleet and usage files as
  ``usageNm`` (each engine of ``--engines``, into a fresh ``--out``; no floor).

Peak memory is the largest sum of RSS over the command's process tree, sampled every 50 ms from
/proc. A run over ``--budget-gib`` is stopped and recorded as over budget.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KQPLAN = Path(sys.executable).with_name("kqplan")
PAGE = os.sysconf("SC_PAGE_SIZE")


def tree_rss(root: int) -> int:
    """Bytes of RSS of ``root`` and all its descendants."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            children.setdefault(int(fields[1]), []).append(int(entry))
            rss[int(entry)] = int(fields[21]) * PAGE
        except (OSError, ValueError, IndexError):
            continue
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return total


def measure(args: list[str], budget: int, cwd: Path) -> tuple[float, int, str]:
    """Wall seconds, peak tree RSS (bytes), and "ok" / "over budget" / "failed: ..."."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    peak, verdict = 0, "ok"
    while proc.poll() is None:
        peak = max(peak, tree_rss(proc.pid))
        if peak > budget:
            os.killpg(proc.pid, 9)
            proc.wait()
            verdict = "over budget"
            break
        time.sleep(0.05)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode() if proc.stderr else ""
    if verdict == "ok" and proc.returncode not in (0, 2):
        verdict = "failed: " + (err.strip().splitlines() or ["?"])[-1][:200]
    return wall, peak, verdict


def write_fleet(work: Path, clusters: int, n: int) -> Path:
    """``clusters`` inventory entries, each a manifest of N entities and a drifted snapshot."""
    from benchmarks.generate import drifted_state, manifest_text
    from kqplan.snapshot.file import write_snapshot

    manifest = work / f"manifests-{n}" / "quotas.yaml"
    if not manifest.exists():
        manifest.parent.mkdir(parents=True)
        manifest.write_text(manifest_text(n))
    snapshot = work / f"snapshot-{n}.json"
    if not snapshot.exists():
        write_snapshot(snapshot, drifted_state(n), None)
    lines = [f'[clusters.c{i:02d}]\nsnapshot = "{snapshot}"\nmanifests = ["{manifest.parent}"]\n'
             for i in range(clusters)]
    home = work / f"fleet-{clusters}x{n}"
    home.mkdir(exist_ok=True)
    (home / "kqplan.toml").write_text("\n".join(lines))
    return home


def write_usage(directory: Path, samples: int, clusters: int, n: int, principals: int = 100_000) -> Path:
    """Parquet usage files (1M rows each): principals spread over the clusters, generate.py's
    names (so they resolve to the fleet's entities), rates around the quotas."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    if directory.exists():
        return directory
    directory.mkdir(parents=True)
    rng = np.random.default_rng(7)
    chunk = 1_000_000
    names = np.array([f"user-{i}" for i in range(n)], dtype=object)
    clients = np.array([f"client-{i}" for i in range(n)] + [""], dtype=object)
    cluster_names = np.array([f"c{i:02d}" for i in range(clusters)], dtype=object)
    for part, start in enumerate(range(0, samples, chunk)):
        size = min(chunk, samples - start)
        principal = rng.integers(0, principals, size)
        table = pa.table({
            "cluster": cluster_names[principal % clusters],
            "user": names[principal % n],
            "client_id": clients[np.where(principal % 7 == 0, n, principal % n)],
            "producer_byte_rate": rng.gamma(2.0, 400_000.0, size),
            "consumer_byte_rate": rng.gamma(2.0, 800_000.0, size),
            "request_percentage": rng.uniform(0, 40, size),
            "ts": np.full(size, 1_763_900_000 + part, dtype=np.int64),
        })
        pq.write_table(table, directory / f"part-{part:03d}.parquet")
    return directory


def write_buckets(home: Path, usage: Path, path: Path) -> Path:
    """The bucket table ``impact_duckdb.py`` is given: per observed principal and key, the number
    of the bucket its quota is enforced in before (side 0) and after (side 1) each cluster's plan
    (null: unlimited), from the fleet's snapshot states, by kqplan's core."""
    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    from kqplan.config.find import load_config
    from kqplan.core.buckets import bucket_of
    from kqplan.core.plan import apply_ops
    from kqplan.core.resolve import QuotaIndex, effective
    from kqplan.fleet import clusters
    from kqplan.fleet.usage import USAGE_KEYS

    if path.exists():
        return path
    config = load_config(home / "kqplan.toml")
    entries = clusters.select(config, [])
    loaded = clusters.load(entries, config)  # compiled on this thread (the YAML reader's rule)
    results = clusters.each(entries, lambda entry: clusters.plan(entry, config, loaded[entry.name]))
    states = {r.cluster: (r.value[2], apply_ops(r.value[2], r.value[0].changes)) for r in results
              if r.value is not None}
    indexes = {c: (QuotaIndex.of(b), QuotaIndex.of(a)) for c, (b, a) in states.items()}
    principals = duckdb.connect().execute(
        f"SELECT DISTINCT cluster, \"user\", coalesce(client_id, '') FROM read_parquet('{usage}/*.parquet')"
    ).fetchall()
    numbers: dict[tuple[object, ...], int] = {}
    names = ("cluster", "user", "client_id", "key", "side", "bucket")
    columns: dict[str, list[object]] = {c: [] for c in names}
    for cluster, user, client_id in principals:
        for side in (0, 1):
            for key, (_, source) in zip(USAGE_KEYS, effective(indexes[cluster][side], user, client_id),
                                        strict=True):
                group = bucket_of(source, user, client_id)
                slot = (side, cluster, key, group)
                number = None if group is None else numbers.setdefault(slot, len(numbers))
                for column, value in zip(columns, (cluster, user, client_id, key, side, number), strict=True):
                    columns[column].append(value)
    pq.write_table(pa.table(columns), path)
    return path


def rightsize_runs(work: Path, size: str, shape: str, engines: tuple[str, ...]
                   ) -> tuple[str, list[tuple[str, list[str]]], Path]:
    """The rightsize workload of ``size`` (``rightsizeNm``) on ``usageNm``'s fleet and files."""
    samples = size.replace("rightsize", "usage")
    home, usage = workload(work, samples, shape)
    runs = [(f"kqplan --engine {engine}",
             [str(KQPLAN), "fleet", "rightsize", "--usage", str(usage), "--stat", "p99",
              "--out", str(home / f"rightsize-{shape}-{samples}-{engine}"), "--engine", engine])
            for engine in engines]
    return f"rightsize, {shape}, {_millions(samples):g}M samples", runs, home


def _millions(size: str) -> float:
    return float(size.removeprefix("usage").removesuffix("m"))


def workload(work: Path, size: str, shape: str) -> tuple[Path, Path]:
    """The fleet's directory and the usage files of ``size`` (``usageNm``) and ``shape``."""
    from benchmarks.shapes import write_shape

    samples = int(_millions(size) * 1_000_000)
    home = write_fleet(work, 10, 10_000)
    if shape == "spread":  # issue 28's files, where earlier tables were measured
        return home, write_usage(work / f"usage-{size}", samples, 10, 10_000)
    return home, write_shape(work / f"usage-{shape}-{size}", shape, samples)


def impact_runs(work: Path, size: str, shape: str = "spread", engines: tuple[str, ...] = ("local", "spark")
                ) -> tuple[str, list[tuple[str, list[str]]], Path]:
    """The impact workload of ``size`` (``usageNm``) and ``shape`` (benchmarks/shapes.py): its
    label, its runs (``engines`` and their floors), its fleet's directory."""
    home, usage = workload(work, size, shape)
    buckets = write_buckets(home, usage, work / f"buckets-{shape}-{size}.parquet")
    label = f"{shape}, {_millions(size):g}M samples"
    runs = [(f"kqplan --engine {engine}",
             [str(KQPLAN), "fleet", "impact", "--usage", str(usage), "--stat", "p99",
              "--out", str(home / f"impact-{shape}-{size}-{engine}"), "--engine", engine])
            for engine in engines]
    here = Path(__file__).resolve().parent
    if "local" in engines:
        runs += [(f"DuckDB alone, {variant}",
                  [sys.executable, str(here / "impact_duckdb.py"), str(usage), str(buckets),
                   str(home / f"duckdb-{shape}-{size}-{variant}.parquet"), "--variant", variant])
                 for variant in ("per-key", "one-query")]
    if "spark" in engines:
        runs.append(("Spark alone, plain percentile",
                     [sys.executable, str(here / "impact_spark_plain.py"), str(usage),
                      str(home / f"spark-plain-{shape}-{size}")]))
        runs.append(("Spark alone, plain percentile, wide",
                     [sys.executable, str(here / "impact_spark_plain.py"), str(usage),
                      str(home / f"spark-plain-wide-{shape}-{size}"), "--wide"]))
    return label, runs, home


RATIOS = (("kqplan --engine local", ("DuckDB alone, per-key", "DuckDB alone, one-query")),
          ("kqplan --engine spark", ("Spark alone, plain percentile", "Spark alone, plain percentile, wide")))
"""Each engine over the fastest of its floors."""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="plan1,plan10,usage1m,usage10m")
    parser.add_argument("--budget-gib", type=float, default=4.0)
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--shapes", default="spread", help="benchmarks/shapes.py's, comma-separated")
    parser.add_argument("--engines", default="local,spark")
    args = parser.parse_args()
    budget = int(args.budget_gib * 2**30)
    work = args.work or Path(tempfile.mkdtemp(prefix="kqplan-fleet-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    print("| workload | engine | wall s | peak RSS of the process tree MiB | result |")
    print("|---|---|---|---|---|")
    engines = tuple(args.engines.split(","))
    work_list = [(shape, size) for size in args.sizes.split(",")
                 for shape in (args.shapes.split(",") if size.startswith(("usage", "rightsize")) else ["-"])]
    for shape, size in work_list:
        if size.startswith("plan"):
            clusters = int(size.removeprefix("plan"))
            home = write_fleet(work, clusters, 100_000)
            label = f"fleet plan, {clusters} x 100k entities"
            base = [str(KQPLAN), "fleet", "plan", "--out"]
            runs = [(engine, [*base, str(home / f"out-{engine}"), "--engine", engine]) for engine in
                    ("local", "spark")]
        elif size.startswith("rightsize"):
            label, runs, home = rightsize_runs(work, size, shape, engines)
        else:
            label, runs, home = impact_runs(work, size, shape, engines)
        walls: dict[str, float] = {}
        for engine, command in runs:
            if command[1:3] == ["fleet", "rightsize"]:  # a fresh --out: rightsize writes beside nothing
                shutil.rmtree(command[command.index("--out") + 1], ignore_errors=True)
            wall, peak, verdict = measure(command, budget, home)
            walls[engine] = wall if verdict == "ok" else math.nan
            print(f"| {label} | {engine} | {wall:.1f} | {peak / 2**20:.0f} | {verdict} |", flush=True)
        for mine, floors in RATIOS:
            if mine in walls and all(f in walls for f in floors):
                floor = min(floors, key=lambda f: walls[f] if not math.isnan(walls[f]) else math.inf)
                ratio = walls[mine] / walls[floor]
                shown = f"{ratio:.2f}x" if not math.isnan(ratio) else \
                    "none: " + ("the floor failed" if math.isnan(walls[floor]) else "kqplan failed")
                print(f"|   | {mine} / {floor} | {shown} | | |", flush=True)


if __name__ == "__main__":
    main()
