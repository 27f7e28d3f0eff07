"""The fleet plan as a table: one row per changed key, ``changes.parquet``.

Columns: ``cluster, entity, action, key, before, after`` — entity in the display form, action
``add | update | delete`` for the key, before/after doubles (null where absent). Both engines
produce these rows; the local engine from :mod:`kqplan.core.plan`'s diff, the Spark engine from a
join (:mod:`kqplan.fleet.spark`), and tests require the two to be identical.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kqplan.core.entity import Entity
from kqplan.core.plan import Plan
from kqplan.core.state import QuotaState
from kqplan.fleet.locations import arrow_path

COLUMNS = ("cluster", "entity", "action", "key", "before", "after")


@dataclass(frozen=True, slots=True, order=True)
class ChangeRow:
    cluster: str
    entity: str
    action: str
    key: str
    before: float | None
    after: float | None


@dataclass(frozen=True, slots=True)
class ClusterDiff:
    """What a cluster's diff needs, as data: the desired and actual states and which actual
    entities the manifests delete (pruned by ownership, or overridden away by a layer)."""

    cluster: str
    desired: QuotaState
    actual: QuotaState
    deleted: frozenset[Entity]


def rows_of_plan(cluster: str, plan: Plan) -> list[ChangeRow]:
    """The plan's changes, key by key."""
    rows = []
    for change in plan.changes:
        before = change.before or {}
        for op in change.ops:
            action = "delete" if op.value is None else "update" if op.key in before else "add"
            rows.append(ChangeRow(cluster, change.display, action, op.key, before.get(op.key),
                                  op.value))
    return rows


def diff_input(cluster: str, plan: Plan, desired: QuotaState, actual: QuotaState) -> ClusterDiff:
    """The data the Spark engine joins, taken from a computed plan's decisions on deletions."""
    deleted = frozenset(c.entity for c in plan.changes if c.after is None)
    return ClusterDiff(cluster, desired, actual, deleted)


def write_parquet(rows: Iterable[ChangeRow], path: Path) -> None:
    """``changes.parquet`` with the schema above (pyarrow, from the ``spark`` extra)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    ordered = sorted(rows)
    schema = pa.schema([("cluster", pa.string()), ("entity", pa.string()), ("action", pa.string()),
                        ("key", pa.string()), ("before", pa.float64()), ("after", pa.float64())])
    table = pa.table({name: [getattr(r, name) for r in ordered] for name in COLUMNS}, schema=schema)
    pq.write_table(table, arrow_path(path))


def read_parquet(path: Path) -> list[ChangeRow]:
    import pyarrow.parquet as pq

    table = pq.read_table(arrow_path(path)).to_pydict()
    return [ChangeRow(*values) for values in zip(*(table[c] for c in COLUMNS), strict=True)]
