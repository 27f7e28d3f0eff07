"""The impact job's outputs: Parquet tables (pyarrow) and a utilization chart per cluster
(matplotlib), because people look at a distribution rather than read it."""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from pathlib import Path

from kqplan.fleet.impact import IMPACT_COLUMNS, ImpactRow, UnusedRow


def _write(rows: Sequence[object], columns: Sequence[str], types: Sequence[object], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(list(zip(columns, types, strict=True)))
    # column by column with attrgetter (dataclasses.astuple deep-copies: 20x slower at 10^5 rows)
    pq.write_table(pa.table({c: list(map(attrgetter(c), rows)) for c in columns}, schema=schema), path)


def write_impact(rows: Sequence[ImpactRow], path: Path) -> None:
    import pyarrow as pa

    name, number = pa.string(), pa.float64()
    types = [name, name, name, name, number, number, name, name, number, number, name, name, number, number,
             pa.bool_()]
    _write(rows, IMPACT_COLUMNS, types, path)


def write_unused(rows: Sequence[UnusedRow], path: Path) -> None:
    import pyarrow as pa

    _write(rows, ("cluster", "entity", "key"), [pa.string()] * 3, path)


def chart(cluster: str, rows: Sequence[ImpactRow], path: Path) -> Path | None:
    """A histogram of utilization after the plan (bucket usage / quota), one value per bucket and
    key: the members of a bucket share one quota, and are throttled together."""
    values = list({(r.after_group, r.key): r.utilization for r in rows if r.utilization is not None}.values())
    if not values:
        return None
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    axes.hist([min(v, 2.0) for v in values], bins=40, color="#4477aa")
    axes.axvline(1.0, color="#cc3311", linestyle="--", label="quota (above: throttled)")
    axes.set_xlabel("utilization after the plan (bucket usage / quota, capped at 2)")
    axes.set_ylabel("buckets (one per key)")
    axes.set_title(f"{cluster}: {sum(v > 1 for v in values)} of {len(values)} buckets over their quota")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
