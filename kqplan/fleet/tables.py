"""The impact job's outputs: Parquet tables (pyarrow) and a utilization chart per cluster
(matplotlib), because people look at a distribution rather than read it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path

from kqplan.core.entity import visible
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


BINS = 40
CAP = 2.0
"""The chart's bins: 40 over utilization 0 to 2 (values outside are clipped into the end bins)."""


@dataclass(frozen=True, slots=True)
class Histogram:
    """A cluster's buckets by utilization after the plan, one value per bucket and key (the
    members of a bucket share one quota, and are throttled together)."""

    counts: tuple[int, ...]
    """Buckets per bin of :func:`edges`."""
    over: int
    """Buckets over their quota (utilization above 1)."""

    @property
    def total(self) -> int:
        return sum(self.counts)


def edges() -> list[float]:
    """The bins' edges, exactly as numpy's histogram computes them for 40 bins over [0, 2]."""
    import numpy as np

    return [float(e) for e in np.histogram_bin_edges([], bins=BINS, range=(0.0, CAP))]


def histogram(rows: Sequence[ImpactRow]) -> Histogram | None:
    """The chart's data from the local engine's rows (None: no bucket has a utilization)."""
    import numpy as np

    values = list({(r.after_group, r.key): r.utilization for r in rows if r.utilization is not None}.values())
    if not values:
        return None
    counts, _ = np.histogram(np.clip(values, 0.0, CAP), bins=BINS, range=(0.0, CAP))
    return Histogram(tuple(int(c) for c in counts), sum(v > 1 for v in values))


def chart(cluster: str, data: Histogram | None, path: Path) -> Path | None:
    """A histogram of utilization after the plan (bucket usage / quota), one value per bucket and
    key; None, and no file, when no bucket has one."""
    if data is None:
        return None
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    axes.stairs(data.counts, edges(), fill=True, color="#4477aa")
    axes.axvline(1.0, color="#cc3311", linestyle="--", label="quota (above: throttled)")
    axes.set_xlabel(f"utilization after the plan (bucket usage / quota, capped at {CAP:g})")
    axes.set_ylabel("buckets (one per key)")
    # the name as text: escaped for a terminal, and "$" not read as matplotlib's math markup
    shown = visible(cluster).replace("$", r"\$")
    axes.set_title(f"{shown}: {data.over} of {data.total} buckets over their quota")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
