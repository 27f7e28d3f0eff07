"""fleet rightsize's outputs: a manifest per cluster, ``proposals.parquet`` and the summaries.

The manifest lists only the entities to write (actions raise, lower, limit and pin), each with the
keys it already has on the cluster — a listed entity is owned whole, so leaving one out would
delete it — and no ``ownership`` block, so planning it touches nothing else. Above each entity a
comment says why, for the reviewer of the pull request. Values are spelled by export's
:func:`~kqplan.manifest.export.yaml_value`, which is what ``kqplan fmt`` writes: the file is canonical.

The summaries: text here (each line :func:`~kqplan.core.entity.visible`); the Markdown one's values
here (:func:`markdown_view`), laid out and escaped by :mod:`kqplan.render.proposals`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kqplan.core.entity import Entity, name_problem, visible
from kqplan.core.quotas import QUOTA_KEYS
from kqplan.core.state import QuotaState
from kqplan.core.units import format_bytes, format_number
from kqplan.fleet.locations import arrow_path
from kqplan.fleet.rightsize import (
    PROPOSAL_COLUMNS,
    Action,
    ProposalRow,
    Rules,
    round_up,
    target,
    written_entity,
)
from kqplan.manifest.export import MODELINE, Skipped, _expressible, entity_lines, yaml_string, yaml_value

MANIFEST_NAME = "rightsize.yaml"
SHOWN_CHANGES = 20
"""Changes per cluster in the printed summary (all of them in ``proposals.md``)."""


def _show(key: str, value: float) -> str:
    """A rate for a comment: ``≈13.2 MiB/s``, ``640 B/s``, ``37.5``."""
    if QUOTA_KEYS[key].bytes_per_second:
        return f"{format_bytes(value) or format_number(round(value, 1)) + ' B'}/s"
    return f"{value:.4g}"


def _now(row: ProposalRow) -> str:
    if row.current_value is None:
        return "unlimited"
    return f"{yaml_value(row.key, row.current_value)} from {row.current_source}"


def reason(row: ProposalRow, rules: Rules, members: int = 1) -> str:
    """One line on why a key is written: the arithmetic, the bound that applied, what it replaces;
    for a bucket of several observed principals, that its usage is theirs together."""
    if row.action == Action.PIN:
        return (f"{row.key}: pinned at {yaml_value(row.key, row.after_value)}, its bucket's value (now "
                f"{_now(row)}): {Entity.user(row.user).display} is now set and would take it out of "
                f"{row.bucket or 'its bucket'}")
    rounded = round_up(row.key, row.need)
    bound = (" (raised to the minimum)" if rounded is not None and row.proposal > rounded else
             " (capped at the [policy] maximum)" if rounded is not None and row.proposal < rounded else "")
    shared = f" ({members} principals together)" if members > 1 else ""
    return (f"{row.key}: {row.action} to {yaml_value(row.key, row.proposal)}{bound}: {rules.stat} "
            f"{_show(row.key, row.bucket_usage)}{shared} × {rules.headroom:g} = {_show(row.key, row.need)}; "
            f"now {_now(row)}")


def held(row: ProposalRow, min_samples: int | None = None) -> str:
    """Why a lowering is held: ``1 of the 1440 windows --min-samples asks for`` (without ts: samples)."""
    unit = "windows" if row.windows is not None else "samples"
    count = row.windows if row.windows is not None else row.samples
    asked = f"the {min_samples} " if min_samples is not None else ""
    return f"{count} of {asked}{unit} --min-samples asks for"


def bucket_entity(row: ProposalRow) -> Entity:
    """The entity a row's bucket is named by (a held row's: where a lowering would be written)."""
    for entity in (target(row.user, row.client_id), Entity.user(row.user), Entity.client(row.client_id)):
        if entity.display == row.bucket:
            return entity
    return target(row.user, row.client_id)


Writes = dict[tuple[Entity, str], list[ProposalRow]]
"""(entity, key) -> the rows written there, in table order: a bucket's members share one."""


def writes_of(rows: Sequence[ProposalRow]) -> Writes:
    """What ``rows`` write (:data:`Writes`): a pass over the rows, each row's entity found from its
    display (:func:`~kqplan.fleet.rightsize.written_entity`), so a cluster's is found once."""
    writes: Writes = {}
    for row in rows:
        entity = written_entity(row)
        if entity is not None:
            writes.setdefault((entity, row.key), []).append(row)
    return writes


def manifest_text(cluster: str, cluster_id: str | None, rows: Sequence[ProposalRow], state: QuotaState,
                  *, rules: Rules, labels: Mapping[str, str] | None = None,
                  written: Writes | None = None) -> str:
    """The manifest of one cluster's proposals (``rows`` of that cluster, ``state`` its state now;
    ``written``: ``writes(rows)``, when the caller has it)."""
    writes: dict[Entity, dict[str, float]] = {}
    why: dict[Entity, list[str]] = {}
    for (entity, key), members in (writes_of(rows) if written is None else written).items():
        writes.setdefault(entity, {})[key] = members[0].after_value
        why.setdefault(entity, []).append(reason(members[0], rules, len(members)))
    body: list[str] = []
    unwritable: list[str] = []
    for entity in sorted(writes, key=Entity.sort_key):
        problem = next((p for _, n in entity.parts if n is not None and (p := name_problem(n))), None)
        if problem is not None:  # Kafka takes such a name; a manifest refuses it (kqplan validate)
            unwritable.append(f"# not written: {entity.display}: its name {problem}")
            continue
        quotas: dict[str, float] = {}
        skipped = []
        for key, value in state.get(entity, {}).items():
            if key in writes[entity]:
                continue
            cannot = _expressible(entity, key, value)
            if cannot is None:
                quotas[key] = value  # kept as it is: the entity is owned whole once listed
            else:
                skipped.append(Skipped(entity, key, value, cannot))
        quotas.update(writes[entity])
        body += [f"  # {line}" for line in why[entity]]
        body += entity_lines(entity, quotas, skipped)
    band = f"{rules.tolerance:.0%}"
    lines = [
        MODELINE,
        f"# Proposed by `kqplan fleet rightsize` for cluster {visible(cluster)}: {rules.stat} of the "
        f"observed usage × {rules.headroom:g},",
        "# rounded up to 1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60, 80 × 10^k (byte rates in",
        f"# KiB, MiB, GiB, TiB); a current quota is kept when it covers that and is at most {band} above it.",
        "# Only entities to write are listed and no ownership block is set: planning this file changes",
        "# nothing else on the cluster. Review it, then plan/apply it or move the entries to your manifests.",
        "apiVersion: kqplan/v1",
        "kind: ClientQuotas",
    ]
    if cluster_id:
        lines.append(f"cluster: {yaml_string(cluster_id)}")
    if labels:  # a policy may require some (required-labels)
        lines += ["metadata:", "  labels: {" + ", ".join(f"{yaml_string(k)}: {yaml_string(v)}"
                                               for k, v in sorted(labels.items())) + "}"]
    lines += unwritable
    held_back = {(bucket_entity(r), r.key): r for r in rows if r.action == Action.HOLD}
    lines += [f"# held: {entity.display} {r.key} stays {yaml_value(r.key, r.after_value)}, not lowered to "
              f"{yaml_value(r.key, r.proposal)}: {held(r, rules.min_samples)}"
              for (entity, _), r in sorted(held_back.items(), key=lambda h: (h[0][0].sort_key(), h[0][1]))]
    lines.append("entities:" if body else "entities: []")
    return "\n".join(lines + body) + "\n"


# -- the table -------------------------------------------------------------------------------------

def proposals_parquet(rows: Sequence[ProposalRow]) -> bytes:
    """``proposals.parquet``'s bytes: the columns of :class:`ProposalRow`, column by column (the
    file is written with the manifests, as one set)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    s, f, n = pa.string(), pa.float64(), pa.int64()
    types = [s, s, s, s, f, s, f, f, f, f, s, s, f, s, n, n]
    schema = pa.schema(list(zip(PROPOSAL_COLUMNS, types, strict=True)))
    columns = {c: [getattr(r, c) for r in rows] for c in PROPOSAL_COLUMNS}
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table(columns, schema=schema), sink)
    return bytes(sink.getvalue().to_pybytes())


def read_proposals(path: Path) -> list[ProposalRow]:
    import pyarrow.parquet as pq

    table = pq.read_table(arrow_path(path)).to_pydict()
    return [ProposalRow(*values) for values in zip(*(table[c] for c in PROPOSAL_COLUMNS), strict=True)]


# -- summaries -------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ClusterResult:
    """One cluster's outcome: its rows and manifest, or why it has none."""

    cluster: str
    rows: Sequence[ProposalRow] = ()
    manifest: Path | None = None
    error: str | None = None
    written: Writes | None = None
    """``writes_of(rows)``, once (None: found when asked)."""

    @property
    def writes(self) -> Writes:
        return writes_of(self.rows) if self.written is None else self.written


def counts(result: ClusterResult) -> dict[str, Any]:
    rows = result.rows
    actions = Counter(r.action for r in rows)
    found: dict[str, Any] = {
        "principals": len({(r.user, r.client_id) for r in rows}), "keys": len(rows),
        **{a.value: actions[a] for a in Action},
        "entities": len({entity for entity, _ in result.writes}),
        "manifest": str(result.manifest) if result.manifest is not None else None, "error": result.error}
    return found


def _changes(result: ClusterResult) -> list[tuple[Entity, ProposalRow, int]]:
    """What is written, once per entity and key, and each lowering held: (entity, its first row,
    the rows written there or held with it)."""
    found = dict(result.writes)
    for row in result.rows:
        if row.action == Action.HOLD:
            found.setdefault((bucket_entity(row), row.key), []).append(row)
    return sorted(((entity, members[0], len(members)) for (entity, _), members in found.items()),
                  key=lambda c: (c[0].sort_key(), c[1].key))


def _change_line(entity: Entity, r: ProposalRow, members: int, min_samples: int | None) -> str:
    shared = f" ({members} principals)" if members > 1 else ""
    if r.action == Action.HOLD:
        return (f"  {r.action:<5}  {entity.display} {r.key}: {_now(r)} stays{shared}: not lowered to "
                f"{yaml_value(r.key, r.proposal)} on {held(r, min_samples)}")
    then = yaml_value(r.key, r.after_value)
    return f"  {r.action:<5}  {entity.display} {r.key}: {_now(r)} -> {then}{shared}"


def render_json(results: Sequence[ClusterResult], table: Path) -> str:
    return json.dumps({"clusters": {r.cluster: counts(r) for r in results}, "table": str(table)},
                      indent=2) + "\n"


def render_text(results: Sequence[ClusterResult], table: Path, *, limit: int = SHOWN_CHANGES,
                min_samples: int | None = None) -> str:
    """The terminal summary: a line per cluster, then its first changes (and held lowerings)."""
    lines = []
    entities = 0
    for result in results:
        if result.error is not None:
            lines.append(f"{result.cluster}: error: {result.error}")
            continue
        c = counts(result)
        entities += c["entities"]
        lines.append(f"{result.cluster}: {c['principals']} principals, {c['keys']} keys observed: "
                     f"{c['raise']} to raise, {c['lower']} to lower, {c['limit']} to limit, "
                     f"{c['pin']} pinned, {c['keep']} kept, {c['hold']} held (too few samples to lower); "
                     f"{c['entities']} entities in {c['manifest']}")
        changes = _changes(result)
        lines += [_change_line(entity, r, members, min_samples) for entity, r, members in changes[:limit]]
        if len(changes) > limit:
            lines.append(f"  … and {len(changes) - limit} more ({table.parent / 'proposals.md'})")
    failed = sum(r.error is not None for r in results)
    lines.append(f"Fleet rightsize: {len(results)} clusters, {entities} entities proposed, {failed} failed; "
                 f"table: {table}")
    return "\n".join(map(visible, lines)) + "\n"  # a cluster's name, error or path: one line each


@dataclass(frozen=True, slots=True)
class MarkdownView:
    """The Markdown summary's values as plain text and numbers; :mod:`kqplan.render.proposals`
    lays them out and escapes each (``render_markdown(markdown_view(...))``)."""

    stat: str
    rules: str
    clusters: tuple[tuple[str, tuple[int, ...] | None, str | None], ...]
    changes: tuple[tuple[str, tuple[tuple[str, int, str, str, str, str, str, str, str, str], ...], int], ...]


SUMMARY_COUNTS = ("principals", "raise", "lower", "limit", "pin", "keep", "hold", "entities")
"""A cluster's counts in the summary table, in its column order."""


def _summary_counts(found: Mapping[str, Any]) -> tuple[int, ...]:
    return tuple(found[k] for k in SUMMARY_COUNTS)


def markdown_view(results: Sequence[ClusterResult], rules: Rules, *,
                  limit: int | None = SHOWN_CHANGES) -> MarkdownView:
    """What the PR-comment summary shows; ``limit=None``: every change (``proposals.md``)."""
    clusters = tuple((r.cluster, None if r.error is not None else _summary_counts(counts(r)), r.error)
                     for r in results)  # each cluster's counts once: each is a pass over its rows
    changes = []
    for result in results:
        found = _changes(result)
        shown = found if limit is None else found[:limit]
        rows = tuple((entity.display, members, r.key, _show(r.key, r.bucket_usage), str(r.samples),
                      "" if r.windows is None else str(r.windows), _show(r.key, r.need), _now(r),
                      yaml_value(r.key, r.proposal if r.action == Action.HOLD else r.after_value),
                      f"hold: {held(r, rules.min_samples)}" if r.action == Action.HOLD else str(r.action))
                     for entity, r, members in shown)
        changes.append((result.cluster, rows, len(found) - len(shown)))
    line = (f"{rules.stat} of the observed usage × {rules.headroom:g}, rounded up; a current quota is kept "
            f"when it covers the proposal and is at most {rules.tolerance:.0%} above it"
            + (f"; a lowering needs {rules.min_samples} window{'s' if rules.min_samples != 1 else ''} of the "
               "bucket's usage (without ts: samples), or is held." if rules.min_samples else "."))
    return MarkdownView(rules.stat, line, clusters, tuple(changes))
