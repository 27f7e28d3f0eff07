"""Usage of several shapes for the fleet benchmarks (issue 42): the engines must hold on each.

Every shape names principals of ``benchmarks/generate.py``'s fleet (``user-I``, ``client-J``; 10
clusters ``c00``… of N entities), so they resolve to its quotas, with rates around those quotas,
written as Parquet files of at most 1M rows in the order an exporter writes them (by time):

- ``spread``: issue 28's shape — 100k principal draws over 10 clusters (about 20k distinct
  principals, a seventh with an empty client-id), one ``ts`` per file.
- ``windows``: many principals × many windows (issue 42's) — 60,000 distinct principals (a
  seventh with an empty client-id), one row per principal per 60 s window, every row with a
  ``ts``: 1M samples are ~17 windows, 10M ~167.
- ``few``: few principals × many samples — 100 principals, each sample's ``ts`` spread over
  1,000 windows (so thousands of samples per principal and window at 10M).
- ``skew``: one principal with half of all samples; the other half drawn over 20,000 principals;
  ``ts`` over 1,000 windows.
- ``untimed``: ``spread``'s principals with no ``ts`` column (Kafka's per-window sums cannot be
  formed: a bucket's usage is its members' statistics summed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SHAPES = ("spread", "windows", "few", "skew", "untimed")
CHUNK = 1_000_000
BASE_TS = 1_763_900_000
WINDOW = 60


def _names(n: int) -> tuple[Any, Any]:
    import numpy as np

    users = np.array([f"user-{i}" for i in range(n)], dtype=object)
    clients = np.array([f"client-{i}" for i in range(n)] + [""], dtype=object)
    return users, clients


def _principal_columns(ids: Any, clusters: int, n: int) -> dict[str, Any]:
    """cluster, user, client_id of principal ids: distinct ids below ``clusters * n`` are distinct
    principals (a seventh of them with an empty client-id)."""
    import numpy as np

    users, clients = _names(n)
    cluster_names = np.array([f"c{i:02d}" for i in range(clusters)], dtype=object)
    person = (ids // clusters) % n
    return {"cluster": cluster_names[ids % clusters], "user": users[person],
            "client_id": clients[np.where(ids % 7 == 0, n, person)]}


def _rates(rng: Any, size: int) -> dict[str, Any]:
    return {"producer_byte_rate": rng.gamma(2.0, 400_000.0, size),
            "consumer_byte_rate": rng.gamma(2.0, 800_000.0, size),
            "request_percentage": rng.uniform(0, 40, size)}


def write_shape(directory: Path, shape: str, samples: int, *, clusters: int = 10, n: int = 10_000) -> Path:
    """``samples`` usage rows of ``shape`` as Parquet files in ``directory`` (kept if it exists)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    if shape not in SHAPES:
        raise SystemExit(f"unknown shape {shape!r}: one of {', '.join(SHAPES)}")
    if directory.exists():
        return directory
    partial = directory.with_name(directory.name + ".partial")
    partial.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    for part, start in enumerate(range(0, samples, CHUNK)):
        size = min(CHUNK, samples - start)
        rows = np.arange(start, start + size, dtype=np.int64)
        if shape == "windows":  # row r: principal r % 60k in window r // 60k
            principals = 60_000
            ids = rows % principals
            ts = BASE_TS + (rows // principals) * WINDOW + rng.integers(0, WINDOW, size)
        elif shape == "few":
            ids = rng.integers(0, 100, size)
            ts = BASE_TS + rows * (1_000 * WINDOW) // samples
        elif shape == "skew":
            ids = np.where(rng.random(size) < 0.5, 0, rng.integers(1, 20_000, size))
            ts = BASE_TS + rows * (1_000 * WINDOW) // samples
        else:  # spread, untimed
            ids = rng.integers(0, 100_000, size)
            ts = np.full(size, BASE_TS + part, dtype=np.int64)
        if shape in ("spread", "untimed"):  # fleet.py's mapping of issue 28, kept as it was
            users, clients = _names(n)
            cluster_names = np.array([f"c{i:02d}" for i in range(clusters)], dtype=object)
            who = {"cluster": cluster_names[ids % clusters], "user": users[ids % n],
                   "client_id": clients[np.where(ids % 7 == 0, n, ids % n)]}
        else:
            who = _principal_columns(ids, clusters, n)
        columns = {**who, **_rates(rng, size)}
        if shape != "untimed":
            columns["ts"] = ts.astype(np.int64)
        pq.write_table(pa.table(columns), partial / f"part-{part:03d}.parquet")
    partial.rename(directory)
    return directory
