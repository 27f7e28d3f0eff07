"""The impact job's outputs: Parquet tables (pyarrow) and a utilization chart per cluster
(matplotlib), because people look at a distribution rather than read it.

A table's columns are its row class's fields, in their order, each typed by its annotation
(:data:`ARROW`): text, a double, a 64-bit integer or a boolean, every column nullable (a
``bool | None`` column is null where the row says "split unknown")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kqplan.core.entity import visible
from kqplan.fleet.impact import BucketRow, ImpactRow, UnusedRow
from kqplan.fleet.locations import arrow_path

ARROW = {"str": "string", "str | None": "string", "float": "float64", "float | None": "float64",
         "int": "int64", "bool": "bool_", "bool | None": "bool_"}
"""A row field's annotation -> the pyarrow type (a function of ``pyarrow``) of its column."""


def schema_of(row: type[tuple[Any, ...]]) -> Any:
    """The Parquet schema of a table of ``row`` named tuples: a column per field, in their order."""
    import pyarrow as pa

    columns = []
    for name in row._fields:  # type: ignore[attr-defined]
        kind = row.__annotations__[name]  # a NamedTuple keeps a postponed annotation as a ForwardRef
        kind = getattr(kind, "__forward_arg__", kind)
        found = ARROW.get(str(kind))
        if found is None:
            raise TypeError(f"{row.__name__}.{name}: no column type for {kind}")
        columns.append((name, getattr(pa, found)()))
    return pa.schema(columns)


def _write(rows: Sequence[tuple[Any, ...]], row: type[tuple[Any, ...]], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = schema_of(row)
    # the rows read as one struct array, transposed by Arrow in C++ (240,000 impact rows: 0.3 s,
    # against 1.1 s for zip(*rows) and a list per column)
    table = pa.Table.from_struct_array(pa.array(rows, type=pa.struct(list(schema))))
    pq.write_table(table.cast(schema), arrow_path(path))


def write_impact(rows: Sequence[ImpactRow], path: Path) -> None:
    """``impact.parquet``: a row per observed principal (or measured bucket) and key."""
    _write(rows, ImpactRow, path)


def write_unused(rows: Sequence[UnusedRow], path: Path) -> None:
    """``unused.parquet``: the quota entries after the plan nobody resolves to."""
    _write(rows, UnusedRow, path)


def write_buckets(rows: Sequence[BucketRow], path: Path) -> None:
    """``buckets.parquet``: a row per bucket, key and side of the plan that observed rows fall in
    (:attr:`kqplan.fleet.impact.Impact.buckets`): its quota and source, its known usage and the
    most it may be, whether it passes its quota (null: split unknown), its members and shares."""
    _write(rows, BucketRow, path)


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
    return charts([(cluster, data, path)])[0]


def charts(wanted: Sequence[tuple[str, Histogram | None, Path]]) -> list[Path | None]:
    """:func:`chart` of each (cluster, data, path), drawn on one figure: the axes, labels and legend
    are laid out once, each cluster's bars and title drawn and saved in turn (a figure of its own
    per cluster took 1.6 times as long for 10 clusters; the PNG's text layout is most of the rest)."""
    drawn: list[Path | None] = []
    if all(data is None for _, data, _ in wanted):
        return [None] * len(wanted)
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    try:
        axes.axvline(1.0, color="#cc3311", linestyle="--", label="quota (above: throttled)")
        axes.set_xlabel(f"utilization after the plan (bucket usage / quota, capped at {CAP:g})")
        axes.set_ylabel("buckets (one per key)")
        bins = edges()
        laid_out = False
        for cluster, data, path in wanted:
            if data is None:
                drawn.append(None)
                continue
            bars = axes.stairs(data.counts, bins, fill=True, color="#4477aa")
            axes.relim()
            axes.autoscale_view()
            # the name as text: escaped for a terminal, and "$" not read as matplotlib's math markup
            shown = visible(cluster).replace("$", r"\$")
            axes.set_title(f"{shown}: {data.over} of {data.total} buckets over their quota")
            if not laid_out:
                axes.legend()
            figure.tight_layout()
            # no layout engine left to run at each save: savefig would draw the figure once more
            # first (tight_layout leaves a placeholder engine; the output is the same without it)
            figure.set_layout_engine(None)
            laid_out = True
            figure.savefig(path, dpi=100)
            bars.remove()
            drawn.append(path)
    finally:
        plt.close(figure)
    return drawn
