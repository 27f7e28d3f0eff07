"""``kqplan fleet snapshot|plan``: every cluster of the inventory, local or on Spark."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kqplan.config.model import ProjectConfig
from kqplan.console import Progress, Streams
from kqplan.core.errors import ExitCode, KqplanError
from kqplan.core.plan import Plan
from kqplan.fleet import clusters
from kqplan.fleet.changes import ChangeRow, diff_input, rows_of_plan, write_parquet

if TYPE_CHECKING:
    from kqplan.fleet.impact import Impact

MIN_WINDOW = 0.001
"""The shortest ``--window``: every window index of a ``ts`` in range stays exact (below 2^53)."""
LOG_EVERY = 10.0
"""Seconds between "still running" lines of a long fleet job in a CI log (terraform's rate)."""


class Engine(StrEnum):
    LOCAL = "local"
    SPARK = "spark"


class FleetFormat(StrEnum):
    TEXT = "text"
    MARKDOWN = "markdown"
    JSON = "json"


@contextmanager
def _spark(streams: Streams, progress: Progress, master: str | None, remote: str | None,
           label: str) -> Iterator[Any]:
    """A Spark session where ``--spark-master``/``--spark-remote`` or ``SPARK_REMOTE`` say, its
    progress reported as ``label``; a Connect server taken from the environment is named on stderr."""
    from kqplan.fleet.spark import session, watch, where

    target = where(master, remote)
    if target.from_environment:
        streams.warn(f"kqplan: the Spark engine runs on {target.shown}; --spark-master local[*] runs it "
                     "in this process")
    progress(f"Starting {target.shown}")
    with session(master=target.master, remote=target.remote) as spark, watch(spark, progress, label):
        yield spark


def snapshot_command(config: ProjectConfig, names: Sequence[str], *, out: Path, streams: Streams) -> int:
    """One describe per cluster, ``out/<cluster>.json``; exit 1 if any cluster failed."""
    entries = clusters.select(config, names)
    out.mkdir(parents=True, exist_ok=True)
    with streams.progress(log_every=LOG_EVERY) as progress:
        results = clusters.each(entries, lambda entry: clusters.snapshot(entry, out),
                                progress=progress, label="Describing")
    for r in results:
        streams.print(f"{r.cluster}: {r.value} entities -> {out / (r.cluster + '.json')}" if r.error is None
                      else f"{r.cluster}: failed: {r.error}")
    failed = sum(r.error is not None for r in results)
    streams.print(f"Fleet snapshot: {len(results) - failed} of {len(results)} clusters written.")
    return ExitCode.ERROR if failed else ExitCode.OK


def plan_command(config: ProjectConfig, names: Sequence[str], *, engine: Engine, out: Path | None,
                 fmt: FleetFormat, detailed_exitcode: bool, streams: Streams,
                 spark_master: str | None = None, spark_remote: str | None = None) -> int:
    """Every cluster's plan (``kqplan plan --cluster``'s semantics), the change rows, a summary."""
    entries = clusters.select(config, names)
    if out is not None and out.exists() and not out.is_dir():
        raise KqplanError(f"--out {out} is a file", hint="give a directory for changes.parquet")

    def work(entry: Any) -> tuple[Plan, Any]:
        plan, desired, actual = clusters.plan(entry, config)
        if engine is Engine.LOCAL:
            return plan, rows_of_plan(entry.name, plan)
        return plan, diff_input(entry.name, plan, desired, actual)

    with streams.progress(log_every=LOG_EVERY) as progress:
        results = clusters.each(entries, work, progress=progress, label="Planning")
        rows: list[ChangeRow] = []
        if engine is Engine.SPARK:
            from kqplan.fleet.spark import change_rows

            with _spark(streams, progress, spark_master, spark_remote, "Joining on Spark") as spark:
                rows = change_rows(spark, [r.value[1] for r in results if r.value is not None])
        else:
            rows = sorted(row for r in results if r.value is not None for row in r.value[1])
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        write_parquet(rows, out / "changes.parquet")
    plans = {r.cluster: r.value[0] for r in results if r.value is not None}
    errors = {r.cluster: r.error for r in results if r.error is not None}
    streams.print(render(plans, errors, rows, fmt), end="")
    if errors:
        return ExitCode.ERROR
    changed = any(p.has_changes for p in plans.values())
    return ExitCode.CHANGES if detailed_exitcode and changed else ExitCode.OK


def render(plans: dict[str, Plan], errors: dict[str, str], rows: Sequence[ChangeRow],
           fmt: FleetFormat) -> str:
    names = sorted(plans.keys() | errors.keys())
    if fmt is FleetFormat.JSON:
        doc = {"clusters": [
            {"cluster": n, "error": errors.get(n), **_counts(plans.get(n))} for n in names],
            "changed_keys": len(rows)}
        return json.dumps(doc, indent=2) + "\n"
    lines = []
    if fmt is FleetFormat.MARKDOWN:
        lines += ["### kqplan fleet plan", "", "| cluster | add | change | delete | unmanaged | error |",
                  "|---|---:|---:|---:|---:|---|"]
        for n in names:
            c = _counts(plans.get(n))
            lines.append(f"| `{n}` | {c['add']} | {c['change']} | {c['delete']} | {c['unmanaged']} | "
                         f"{errors.get(n) or ''} |")
        return "\n".join(lines) + "\n"
    width = max(map(len, names), default=0)
    for n in names:
        if n in errors:
            lines.append(f"{n:<{width}}  error: {errors[n]}")
            continue
        c = _counts(plans[n])
        extra = f", {c['unmanaged']} unmanaged" if c["unmanaged"] else ""
        lines.append(f"{n:<{width}}  {c['add']} to add, {c['change']} to change, {c['delete']} to delete"
                     f"{extra}")
    changed = sum(p.has_changes for p in plans.values())
    lines.append(f"Fleet: {len(names)} clusters, {changed} with changes, {len(errors)} failed; "
                 f"{len(rows)} changed keys.")
    return "\n".join(lines) + "\n"


def _counts(plan: Plan | None) -> dict[str, int | None]:
    if plan is None:
        return {"add": None, "change": None, "delete": None, "unmanaged": None}
    s = plan.summary
    return {"add": s.add, "change": s.change, "delete": s.delete, "unmanaged": len(plan.unmanaged)}


def impact_command(config: ProjectConfig, names: Sequence[str], *, usage: Sequence[Path], stat: str,
                   engine: Engine, out: Path, fmt: FleetFormat, fail_on_throttle: bool, streams: Streams,
                   window: float = 60.0, spark_master: str | None = None,
                   spark_remote: str | None = None) -> int:
    """Observed usage against each cluster's quotas before and after its plan, per bucket (the
    connections Kafka makes share a quota): ``impact.parquet``, ``unused.parquet``, a chart per
    cluster and a summary. Exit 1 when any cluster failed (the others' tables are written), or
    with ``fail_on_throttle`` when a bucket goes over its quota."""
    from kqplan.core.plan import apply_ops
    from kqplan.fleet.impact import impact_rows
    from kqplan.fleet.usage import parse_stat, read_usage

    q = parse_stat(stat)
    if not (math.isfinite(window) and window >= MIN_WINDOW):
        raise KqplanError(f"--window {window:g} must be a number of seconds, at least {MIN_WINDOW:g}",
                          hint="60 groups the samples by the minute")
    entries = clusters.select(config, names)
    with streams.progress(log_every=LOG_EVERY) as progress:
        results = clusters.each(entries, lambda entry: clusters.plan(entry, config),
                                progress=progress, label="Planning")
        errors = {r.cluster: r.error for r in results if r.error is not None}
        states = {r.cluster: (r.value[2], apply_ops(r.value[2], r.value[0].changes))
                  for r in results if r.value is not None}
        if engine is Engine.SPARK:
            from kqplan.fleet.spark_impact import impact_rows as spark_impact_rows
            from kqplan.fleet.spark_impact import usage_frame

            with _spark(streams, progress, spark_master, spark_remote,
                        "Resolving the usage on Spark") as spark:
                # Spark reads the usage files itself: 10^7 samples never pass through this process
                impact = spark_impact_rows(spark, states, usage_frame(spark, usage), q, window=window)
        else:
            observed = read_usage(usage)
            progress(f"Resolving {len(observed.samples)} samples")
            impact = impact_rows(states, observed, q, window=window)
    out.mkdir(parents=True, exist_ok=True)
    from kqplan.fleet.tables import chart, write_impact, write_unused

    rows, unused = impact.rows, impact.unused
    write_impact(rows, out / "impact.parquet")
    write_unused(unused, out / "unused.parquet")
    charts = [chart(cluster, [r for r in rows if r.cluster == cluster], out / f"{cluster}-utilization.png")
              for cluster in sorted(states)]
    throttled = impact_summary(impact, states, errors)
    streams.print(_impact_text(throttled, fmt, [str(c) for c in charts if c is not None]), end="")
    if errors:
        return ExitCode.ERROR
    hit = any(s.get("newly_throttled") for s in throttled.values())
    return ExitCode.ERROR if fail_on_throttle and hit else ExitCode.OK


def impact_summary(impact: Impact, states: Mapping[str, Any], errors: Mapping[str, str]
                   ) -> dict[str, dict[str, Any]]:
    """Per cluster: principals observed, buckets newly over their quota (each once, with its
    members' count), unlimited principals, unused entries, and whether bucket usage is windowed."""
    from kqplan.fleet.impact import newly_throttled

    summary: dict[str, dict[str, Any]] = {}
    for cluster in sorted(states):
        mine = [r for r in impact.rows if r.cluster == cluster]
        members: dict[tuple[str, str], set[tuple[str, str]]] = {}
        for r in mine:
            if r.after_group is not None:
                members.setdefault((r.after_group, r.key), set()).add((r.user, r.client_id))
        hit = {(r.after_group, r.key): r for r in newly_throttled(mine) if r.after_group is not None}
        summary[cluster] = {
            "principals": len({(r.user, r.client_id) for r in mine}),
            "newly_throttled": [
                {"bucket": group, "key": key, "members": len(members[group, key]),
                 "usage": r.after_group_usage, "quota": r.after_value}
                for (group, key), r in sorted(hit.items())],
            "unlimited": len({(r.user, r.client_id) for r in mine
                              if r.usage is not None and r.after_value is None}),
            "unused_entries": sum(u.cluster == cluster for u in impact.unused),
            "bucket_usage": "summed" if cluster in impact.untimed else "windowed",
            "error": None}
    return summary | {c: {"error": e} for c, e in sorted(errors.items())}


def _impact_text(summary: dict[str, dict[str, Any]], fmt: FleetFormat, charts: Sequence[str]) -> str:
    from kqplan.render.escape import markdown_code, markdown_text

    if fmt is FleetFormat.JSON:
        return json.dumps({"clusters": summary, "charts": list(charts)}, indent=2) + "\n"
    markdown = fmt is FleetFormat.MARKDOWN
    lines = ["### kqplan fleet impact", "",
             "| cluster | principals | newly throttled | unlimited | unused entries |",
             "|---|---:|---|---:|---:|"] if markdown else []
    for cluster, s in summary.items():
        if s.get("error"):
            lines.append(f"| {markdown_code(cluster, cell=True)} | error: {markdown_text(s['error'])} | | | |"
                         if markdown else f"{cluster}: error: {s['error']}")
            continue
        items = [f"{markdown_code(t['bucket'], cell=True) if markdown else t['bucket']} {t['key']} "
                 f"({t['members']} principal{'s' if t['members'] != 1 else ''})"
                 for t in s["newly_throttled"]]
        shown = ", ".join(items[:10]) + (f" … and {len(items) - 10} more" if len(items) > 10 else "")
        bound = (" (samples without ts: each bucket's usage is its members' statistics summed, "
                 "an upper bound for max)") if s["bucket_usage"] == "summed" else ""
        if markdown:
            lines.append(f"| {markdown_code(cluster, cell=True)} | {s['principals']} | {shown or 'none'}"
                         f"{markdown_text(bound)} | {s['unlimited']} | {s['unused_entries']} |")
        else:
            lines.append(f"{cluster}: {s['principals']} principals observed; newly throttled buckets: "
                         f"{shown or 'none'}{bound}; {s['unlimited']} unlimited; {s['unused_entries']} "
                         "unused quota entries")
    return "\n".join(lines) + "\n"
def rightsize_command(config: ProjectConfig, names: Sequence[str], *, usage: Sequence[Path], stat: str,
                      headroom: float, tolerance: float, mins: Sequence[str], labels: Sequence[str],
                      engine: Engine, out: Path, fmt: FleetFormat, streams: Streams,
                      spark_master: str | None = None, spark_remote: str | None = None) -> int:
    """Proposed quotas from observed usage: ``out/<cluster>/rightsize.yaml`` (valid input for
    ``kqplan plan``), ``out/proposals.parquet``, ``out/proposals.md`` and a summary. Exit 1 when a
    cluster failed or a written manifest does not validate under the project's config."""
    from kqplan.core.diagnostics import render_text
    from kqplan.core.policy import MISSING_DEFAULT
    from kqplan.files import write_atomically
    from kqplan.fleet.proposals import (
        MANIFEST_NAME,
        ClusterResult,
        manifest_text,
        render_json,
        render_markdown,
        write_proposals,
    )
    from kqplan.fleet.proposals import render_text as render_summary
    from kqplan.fleet.rightsize import Rules, proposal_rows, spark_proposal_rows
    from kqplan.fleet.usage import read_usage, usage_files
    from kqplan.manifest.compile import load_desired

    rules = Rules.of(stat=stat, headroom=headroom, tolerance=tolerance, mins=mins, policy=config.policy)
    label_map = _labels(labels)
    entries = clusters.select(config, names)
    _check_folder_names(entries)
    if out.exists() and not out.is_dir():
        raise KqplanError(f"--out {out} is a file", hint="give a directory for the manifests and tables")
    list(usage_files(usage))  # a missing --usage path is an error before any cluster is described
    with streams.progress(log_every=LOG_EVERY) as progress:
        results = clusters.each(entries, _describe, progress=progress, label="Describing")
        states = {r.cluster: r.value[0] for r in results if r.value is not None}
        if engine is Engine.SPARK:
            from kqplan.fleet.spark_impact import usage_frame

            with _spark(streams, progress, spark_master, spark_remote, "Proposing on Spark") as spark:
                rows = spark_proposal_rows(spark, states, usage_frame(spark, usage), rules)
        else:
            samples = read_usage(usage).samples
            progress(f"Proposing from {len(samples)} samples")
            rows = proposal_rows(states, samples, rules)
    out.mkdir(parents=True, exist_ok=True)
    write_proposals(rows, out / "proposals.parquet")
    outcomes: list[ClusterResult] = []
    invalid = False
    for r in results:
        if r.value is None:
            outcomes.append(ClusterResult(r.cluster, error=r.error))
            continue
        state, cluster_id = r.value
        mine = [row for row in rows if row.cluster == r.cluster]
        folder = out / r.cluster
        folder.mkdir(exist_ok=True)
        path = folder / MANIFEST_NAME
        write_atomically(path, manifest_text(r.cluster, cluster_id, mine, state, rules=rules,
                                                   labels=label_map))
        # what `kqplan validate` would say of it under this project's config (policy included); a
        # required <default> entity concerns the whole manifest set, not these entries
        problems = [d for d in load_desired([folder], config).diagnostics
                    if d.is_error and d.code != MISSING_DEFAULT]
        if problems:
            invalid = True
            streams.warn(render_text(problems))
            streams.warn(f"{path}: the proposals do not validate under {config.source or 'the config'}")
        outcomes.append(ClusterResult(r.cluster, mine, path))
    table = out / "proposals.parquet"
    write_atomically(out / "proposals.md", render_markdown(outcomes, rules, limit=None))
    if fmt is FleetFormat.JSON:
        streams.print(render_json(outcomes, table), end="")
    elif fmt is FleetFormat.MARKDOWN:
        streams.print(render_markdown(outcomes, rules), end="")
    else:
        streams.print(render_summary(outcomes, table), end="")
    return ExitCode.ERROR if invalid or any(o.error is not None for o in outcomes) else ExitCode.OK


def _check_folder_names(entries: Sequence[Any]) -> None:
    """Each cluster's manifest goes to out/<name>/: the name must be one folder."""
    for entry in entries:
        if entry.name in (".", "..") or any(c in entry.name for c in "/\\\0"):
            raise KqplanError(f"cluster name '{entry.name}' cannot be a directory name",
                              hint="rename the [clusters.…] table in kqplan.toml")


def _describe(entry: Any) -> tuple[Any, str | None]:
    """One describe of an inventory cluster (its ``id`` checked first): (state, cluster id)."""
    from kqplan.pipeline.guarded import check_inventory_id
    from kqplan.pipeline.target import Target, open_cluster

    with open_cluster(Target.of_cluster(entry)) as cluster:
        ident = cluster.identity()
        check_inventory_id(entry, ident.cluster_id, ident.address)
        return cluster.describe(), ident.cluster_id


def _labels(items: Sequence[str]) -> dict[str, str]:
    """``--label KEY=VALUE`` values: the manifest's labels (a policy may require some)."""
    labels: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise KqplanError(f"--label {item!r} is not KEY=VALUE", hint="e.g. --label team=platform")
        labels[key.strip()] = value.strip()
    return labels
