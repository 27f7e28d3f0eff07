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
from kqplan.files import inside
from kqplan.fleet import clusters
from kqplan.fleet.changes import ChangeRow, diff_input, rows_of_plan, write_parquet
from kqplan.render.escape import markdown_code, markdown_text, terminal

if TYPE_CHECKING:
    from kqplan.core.state import QuotaState
    from kqplan.fleet.impact import ClusterImpact
    from kqplan.fleet.proposals import ClusterResult
    from kqplan.fleet.rightsize import ProposalRow, Rules

MIN_WINDOW = 0.001
"""The shortest ``--window``: every window index of a ``ts`` in range stays exact (below 2^53)."""
LOG_EVERY = 10.0
CHART_SUFFIX = "-utilization.png"
"""``fleet impact``'s chart of a cluster: ``OUT/<cluster>-utilization.png``."""
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
    paths = clusters.output_paths(out, [e.name for e in entries], ".json")  # before any describe
    out.mkdir(parents=True, exist_ok=True)
    with streams.progress(log_every=LOG_EVERY) as progress:
        results = clusters.each(entries, lambda entry: clusters.snapshot(entry, out, config),
                                progress=progress, label="Describing")
    for r in results:
        streams.print(terminal(f"{r.cluster}: {r.value} entities -> {paths[r.cluster]}" if r.error is None
                               else f"{r.cluster}: failed: {r.error}"))
    failed = sum(r.error is not None for r in results)
    streams.print(f"Fleet snapshot: {len(results) - failed} of {len(results)} clusters written.")
    return ExitCode.ERROR if failed else ExitCode.OK


def plan_command(config: ProjectConfig, names: Sequence[str], *, engine: Engine, out: str | Path | None,
                 fmt: FleetFormat, detailed_exitcode: bool, streams: Streams,
                 spark_master: str | None = None, spark_remote: str | None = None) -> int:
    """Every cluster's plan (``kqplan plan --cluster``'s semantics), the change rows, a summary."""
    local_out = _out_for(engine, out) if out is not None else None
    entries = clusters.select(config, names)

    def work(entry: Any) -> tuple[Plan, Any]:
        plan, desired, actual = clusters.plan(entry, config)
        if engine is Engine.LOCAL:
            return plan, rows_of_plan(entry.name, plan)
        return plan, diff_input(entry.name, plan, desired, actual)

    with streams.progress(log_every=LOG_EVERY) as progress:
        results = clusters.each(entries, work, progress=progress, label="Planning")
        rows: list[ChangeRow] = []
        if engine is Engine.SPARK:
            from kqplan.fleet.spark import change_frame, collect_rows
            from kqplan.fleet.spark_tables import CHANGES, join_uri

            with _spark(streams, progress, spark_master, spark_remote, "Joining on Spark") as spark:
                frame = change_frame(spark, [r.value[1] for r in results if r.value is not None])
                if out is not None and local_out is None:  # a URI: Spark writes the table there
                    frame = frame.persist()
                    frame.write.mode("overwrite").parquet(join_uri(str(out), CHANGES))
                    changed_keys = frame.count()
                    frame.unpersist()
                else:
                    rows = sorted(ChangeRow(*r) for r in collect_rows(frame))
                    changed_keys = len(rows)
        else:
            rows = sorted(row for r in results if r.value is not None for row in r.value[1])
            changed_keys = len(rows)
    if local_out is not None:
        local_out.mkdir(parents=True, exist_ok=True)
        write_parquet(rows, inside(local_out, "changes.parquet"))
    plans = {r.cluster: r.value[0] for r in results if r.value is not None}
    errors = {r.cluster: r.error for r in results if r.error is not None}
    streams.print(render(plans, errors, changed_keys, fmt), end="")
    if errors:
        return ExitCode.ERROR
    changed = any(p.has_changes for p in plans.values())
    return ExitCode.CHANGES if detailed_exitcode and changed else ExitCode.OK


def render(plans: dict[str, Plan], errors: dict[str, str], changed_keys: int, fmt: FleetFormat) -> str:
    names = sorted(plans.keys() | errors.keys())
    if fmt is FleetFormat.JSON:
        doc = {"clusters": [
            {"cluster": n, "error": errors.get(n), **_counts(plans.get(n))} for n in names],
            "changed_keys": changed_keys}
        return json.dumps(doc, indent=2) + "\n"
    lines = []
    if fmt is FleetFormat.MARKDOWN:
        lines += ["### kqplan fleet plan", "", "| cluster | add | change | delete | unmanaged | error |",
                  "|---|---:|---:|---:|---:|---|"]
        for n in names:
            c = _counts(plans.get(n))
            lines.append(f"| {markdown_code(n, cell=True)} | {c['add']} | {c['change']} | {c['delete']} | "
                         f"{c['unmanaged']} | {markdown_text(errors.get(n) or '')} |")
        return "\n".join(lines) + "\n"
    shown = {n: terminal(n) for n in names}
    width = max(map(len, shown.values()), default=0)
    for n in names:
        if n in errors:
            lines.append(f"{shown[n]:<{width}}  error: {terminal(errors[n])}")
            continue
        c = _counts(plans[n])
        extra = f", {c['unmanaged']} unmanaged" if c["unmanaged"] else ""
        lines.append(f"{shown[n]:<{width}}  {c['add']} to add, {c['change']} to change, {c['delete']} to "
                     f"delete{extra}")
    changed = sum(p.has_changes for p in plans.values())
    lines.append(f"Fleet: {len(names)} clusters, {changed} with changes, {len(errors)} failed; "
                 f"{changed_keys} changed keys.")
    return "\n".join(lines) + "\n"


def _counts(plan: Plan | None) -> dict[str, int | None]:
    if plan is None:
        return {"add": None, "change": None, "delete": None, "unmanaged": None}
    s = plan.summary
    return {"add": s.add, "change": s.change, "delete": s.delete, "unmanaged": len(plan.unmanaged)}


def impact_command(config: ProjectConfig, names: Sequence[str], *, usage: Sequence[str | Path], stat: str,
                   engine: Engine, out: str | Path, fmt: FleetFormat, fail_on_throttle: bool,
                   streams: Streams, window: float = 60.0, spark_master: str | None = None,
                   spark_remote: str | None = None, tables: Sequence[str] = ()) -> int:
    """Observed usage against each cluster's quotas before and after its plan, per bucket (the
    connections Kafka makes share a quota): ``impact.parquet``, ``unused.parquet``, a chart per
    cluster and a summary. ``out`` a URI (Spark engine): Spark writes the tables there and only the
    summaries come back. Exit 1 when any cluster failed (the others' tables are written), or with
    ``fail_on_throttle`` when a bucket goes over its quota."""
    from kqplan.core.plan import apply_ops
    from kqplan.fleet.impact import summarize
    from kqplan.fleet.tables import Histogram, chart, histogram, write_impact, write_unused
    from kqplan.fleet.usage import parse_stat

    q = parse_stat(stat)
    _check_window(window)
    usage = _usage_for(engine, usage, tables)
    local_out = _out_for(engine, out)
    entries = clusters.select(config, names)
    charted = clusters.output_paths(local_out or Path("."), [e.name for e in entries], CHART_SUFFIX)
    summary: dict[str, ClusterImpact]
    histograms: dict[str, Histogram | None]
    with streams.progress(log_every=LOG_EVERY) as progress:
        results = clusters.each(entries, lambda entry: clusters.plan(entry, config),
                                progress=progress, label="Planning")
        errors = {r.cluster: r.error for r in results if r.error is not None}
        states = {r.cluster: (r.value[2], apply_ops(r.value[2], r.value[0].changes))
                  for r in results if r.value is not None}
        if engine is Engine.SPARK:
            from kqplan.fleet.spark_impact import impact_rows as spark_impact_rows
            from kqplan.fleet.spark_tables import write_impact as spark_write_impact
            from kqplan.fleet.spark_usage import usage_frame

            with _spark(streams, progress, spark_master, spark_remote,
                        "Resolving the usage on Spark") as spark:
                # Spark reads the usage itself: 10^7 samples never pass through this process
                frame = usage_frame(spark, usage, tables, checked=False)  # checked as it is aggregated
                if local_out is None:  # and writes the tables where the URI says
                    summary, written = spark_write_impact(spark, states, frame, q, out=str(out),
                                                          window=window)
                    histograms = dict(written)
                else:
                    impact = spark_impact_rows(spark, states, frame, q, window=window)
        else:
            from kqplan.fleet.columnar import impact_of_files

            # DuckDB reads the usage files and aggregates the samples; the core resolves each principal
            impact = impact_of_files(states, [Path(u) for u in usage], q, window=window, progress=progress)
    charts: list[str] = []
    if local_out is not None:
        local_out.mkdir(parents=True, exist_ok=True)
        write_impact(impact.rows, inside(local_out, "impact.parquet"))
        write_unused(impact.unused, inside(local_out, "unused.parquet"))
        summary = summarize(impact, states)
        histograms = {c: histogram([r for r in impact.rows if r.cluster == c]) for c in states}
        charts = [str(path) for c in sorted(states)
                  if (path := chart(c, histograms[c], charted[c])) is not None]
    else:
        streams.warn(f"kqplan: the tables are in {out}; charts are drawn only into a local --out directory")
    throttled = impact_summary(summary, errors)
    streams.print(_impact_text(throttled, fmt, charts), end="")
    if errors:
        return ExitCode.ERROR
    hit = any(s.get("newly_throttled") for s in throttled.values())
    return ExitCode.ERROR if fail_on_throttle and hit else ExitCode.OK


def _out_for(engine: Engine, out: str | Path) -> Path | None:
    """``--out`` as a local directory, or None for a URI the Spark engine writes to itself (a
    ``file://`` URI is a local directory for the local engine, Spark's to write for Spark)."""
    from kqplan.fleet.usage import is_uri, local_paths

    if not is_uri(out):
        path = Path(out)
        if path.exists() and not path.is_dir():
            raise KqplanError(f"--out {path} is a file", hint="give a directory for the tables")
        return path
    if engine is Engine.SPARK:
        return None
    try:
        return local_paths([out])[0]
    except KqplanError:
        raise KqplanError(f"--out {out}: the local engine writes local files",
                          hint="add --engine spark: Spark writes to any filesystem its Hadoop layer has"
                          ) from None


def _usage_for(engine: Engine, usage: Sequence[str | Path], tables: Sequence[str]) -> list[str | Path]:
    """``--usage`` and ``--usage-table`` checked for the engine: the local engine takes local paths
    (``file://`` URIs as paths); the Spark engine paths, URIs and tables. A local path that does not
    exist is an error before any cluster is described."""
    from kqplan.fleet.usage import is_uri, local_paths, usage_files

    if not usage and not tables:
        raise KqplanError("no usage given", hint="give --usage PATH|URI (repeatable) or --usage-table NAME")
    if engine is Engine.LOCAL:
        paths = local_paths(usage, tables)
        list(usage_files(paths))
        return list(paths)
    list(usage_files([Path(u) for u in usage if not is_uri(u)]))
    return list(usage)


def _check_window(window: float) -> None:
    if not (math.isfinite(window) and window >= MIN_WINDOW):
        raise KqplanError(f"--window {window:g} must be a number of seconds, at least {MIN_WINDOW:g}",
                          hint="60 groups the samples by the minute")


def impact_summary(summary: Mapping[str, ClusterImpact], errors: Mapping[str, str]
                   ) -> dict[str, dict[str, Any]]:
    """The summary as printed in JSON (and read by the text and Markdown forms)."""
    out: dict[str, dict[str, Any]] = {}
    for cluster, s in sorted(summary.items()):
        out[cluster] = {
            "principals": s.principals,
            "newly_throttled": [{"bucket": t.bucket, "key": t.key, "members": t.members, "usage": t.usage,
                                 "quota": t.quota} for t in s.newly_throttled],
            "unlimited": s.unlimited, "unused_entries": s.unused_entries,
            "bucket_usage": "windowed" if s.windowed else "summed", "error": None}
    return out | {c: {"error": e} for c, e in sorted(errors.items())}


def _impact_text(summary: dict[str, dict[str, Any]], fmt: FleetFormat, charts: Sequence[str]) -> str:
    """The summary in JSON, or a line per cluster: a Markdown table row (each name, bucket and
    error escaped for a table cell) or a line of text (each escaped for a terminal)."""
    if fmt is FleetFormat.JSON:
        return json.dumps({"clusters": summary, "charts": list(charts)}, indent=2) + "\n"
    markdown = fmt is FleetFormat.MARKDOWN
    lines = ["### kqplan fleet impact", "",
             "| cluster | principals | newly throttled | unlimited | unused entries |",
             "|---|---:|---|---:|---:|"] if markdown else []
    for cluster, s in summary.items():
        if s.get("error"):
            lines.append(f"| {markdown_code(cluster, cell=True)} | error: {markdown_text(s['error'])} | | | |"
                         if markdown else terminal(f"{cluster}: error: {s['error']}"))
            continue
        items = [f"{markdown_code(t['bucket'], cell=True) if markdown else t['bucket']} "
                 f"{markdown_text(t['key']) if markdown else t['key']} "
                 f"({t['members']} principal{'s' if t['members'] != 1 else ''})"
                 for t in s["newly_throttled"]]
        shown = ", ".join(items[:10]) + (f" … and {len(items) - 10} more" if len(items) > 10 else "")
        bound = (" (samples without ts: each bucket's usage is its members' statistics summed, "
                 "an upper bound for max)") if s["bucket_usage"] == "summed" else ""
        if markdown:
            lines.append(f"| {markdown_code(cluster, cell=True)} | {s['principals']} | {shown or 'none'}"
                         f"{markdown_text(bound)} | {s['unlimited']} | {s['unused_entries']} |")
        else:
            lines.append(terminal(f"{cluster}: {s['principals']} principals observed; newly throttled "
                                  f"buckets: {shown or 'none'}{bound}; {s['unlimited']} unlimited; "
                                  f"{s['unused_entries']} unused quota entries"))
    return "\n".join(lines) + "\n"


def rightsize_command(config: ProjectConfig, names: Sequence[str], *, usage: Sequence[str | Path], stat: str,
                      headroom: float, tolerance: float, mins: Sequence[str], labels: Sequence[str],
                      engine: Engine, out: str | Path, fmt: FleetFormat, streams: Streams,
                      window: float = 60.0, spark_master: str | None = None, spark_remote: str | None = None,
                      tables: Sequence[str] = ()) -> int:
    """Proposed quotas from observed usage: ``out/<cluster>/rightsize.yaml`` (valid input for
    ``kqplan plan``), ``out/proposals.parquet``, ``out/proposals.md`` and a summary. Exit 1 when a
    cluster failed or a written manifest does not validate under the project's config."""
    from kqplan.files import write_all
    from kqplan.fleet.proposals import markdown_view, proposals_parquet, render_json
    from kqplan.fleet.proposals import render_text as render_summary
    from kqplan.fleet.rightsize import Rules, proposal_rows
    from kqplan.fleet.usage import read_usage
    from kqplan.render.proposals import render_markdown

    rules = Rules.of(stat=stat, headroom=headroom, tolerance=tolerance, mins=mins, policy=config.policy)
    _check_window(window)
    label_map = _labels(labels)
    entries = clusters.select(config, names)
    out = _manifest_dir(out)
    folders = _rightsize_folders(out, entries)
    usage = _usage_for(engine, usage, tables)  # a missing path: an error before any describe
    with streams.progress(log_every=LOG_EVERY) as progress:
        results = clusters.each(entries, lambda entry: _describe(entry, config.max_input_bytes),
                                progress=progress, label="Describing")
        states = {r.cluster: r.value[0] for r in results if r.value is not None}
        if engine is Engine.SPARK:
            from kqplan.fleet.spark_rightsize import spark_proposal_rows
            from kqplan.fleet.spark_usage import usage_frame

            with _spark(streams, progress, spark_master, spark_remote, "Proposing on Spark") as spark:
                frame = usage_frame(spark, usage, tables, checked=False)  # checked as it is aggregated
                rows = spark_proposal_rows(spark, states, frame, rules, window=window)
        else:
            samples = read_usage([Path(u) for u in usage]).samples
            progress(f"Proposing from {len(samples)} samples")
            rows = proposal_rows(states, samples, rules, window=window)
    table = inside(out, PROPOSALS_TABLE)
    guards = {e.name: e.id for e in entries}
    outcomes, texts = _manifests(results, rows, folders=folders, guards=guards, config=config,
                                 rules=rules, labels=label_map, streams=streams)
    files: dict[Path, str | bytes] = {table: proposals_parquet(rows), **texts}
    files[inside(out, PROPOSALS_MD)] = render_markdown(markdown_view(outcomes, rules, limit=None))
    for folder in {path.parent for path in files}:
        folder.mkdir(parents=True, exist_ok=True)
    write_all(files)  # the whole set, or (a write failing) none of it
    invalid = _invalid(outcomes, config, streams)
    if fmt is FleetFormat.JSON:
        streams.print(render_json(outcomes, table), end="")
    elif fmt is FleetFormat.MARKDOWN:
        streams.print(render_markdown(markdown_view(outcomes, rules)), end="")
    else:
        streams.print(render_summary(outcomes, table), end="")
    return ExitCode.ERROR if invalid or any(o.error is not None for o in outcomes) else ExitCode.OK


PROPOSALS_TABLE = "proposals.parquet"
PROPOSALS_MD = "proposals.md"
"""What rightsize writes beside the clusters' folders: a cluster may not be named so."""


def _rightsize_folders(out: Path, entries: Sequence[Any]) -> dict[str, Path]:
    """``out/<cluster>/`` of each cluster, checked before any describe: one plain name, neither
    rightsize's own ``proposals.parquet`` / ``proposals.md`` nor a file already there."""
    folders = clusters.output_paths(out, [e.name for e in entries], reserved=(PROPOSALS_TABLE, PROPOSALS_MD))
    for path in folders.values():
        if path.exists() and not path.is_dir():
            raise KqplanError(f"{terminal(str(path))} is a file, where a cluster's manifest folder goes",
                              hint="remove it, or give another --out directory")
    from kqplan.fleet.proposals import MANIFEST_NAME

    for name in (PROPOSALS_TABLE, PROPOSALS_MD):
        if inside(out, name).is_dir():
            raise KqplanError(f"{terminal(str(out / name))} is a directory, where rightsize writes its "
                              f"{name}", hint="remove it, or give another --out directory")
    for path in folders.values():
        if inside(path, MANIFEST_NAME).is_dir():
            raise KqplanError(f"{terminal(str(path / MANIFEST_NAME))} is a directory, where rightsize "
                              "writes a cluster's manifest",
                              hint="remove it, or give another --out directory")
    return folders


def _manifests(results: Sequence[clusters.Outcome[tuple[QuotaState, str | None]]],
               rows: Sequence[ProposalRow], *, folders: Mapping[str, Path],
               guards: Mapping[str, str | None], config: ProjectConfig, rules: Rules,
               labels: Mapping[str, str], streams: Streams) -> tuple[list[ClusterResult], dict[Path, str]]:
    """Each described cluster's ``rightsize.yaml``: (each cluster's result, the text of each file).

    The ``cluster:`` guard is written only when the inventory gives the cluster an ``id``: the
    guard must name an id (or a name mapped to one) of the inventory, and a cluster without one
    cannot be guarded by its name (a name guards the cluster whose id it is)."""
    from kqplan.fleet.proposals import MANIFEST_NAME, ClusterResult, manifest_text

    outcomes: list[ClusterResult] = []
    texts: dict[Path, str] = {}
    for r in results:
        if r.value is None:
            outcomes.append(ClusterResult(r.cluster, error=r.error))
            continue
        state, cluster_id = r.value
        guard = cluster_id if guards.get(r.cluster) is not None else None
        if guard is None and cluster_id is not None:
            streams.warn(terminal(f"kqplan: {r.cluster} has no id in {config.source or 'kqplan.toml'}: its "
                                  f"manifest is written without a cluster: guard (add id = \"{cluster_id}\" "
                                  f"to [clusters.{r.cluster}] to guard it)"))
        mine = [row for row in rows if row.cluster == r.cluster]
        path = inside(folders[r.cluster], MANIFEST_NAME)
        texts[path] = manifest_text(r.cluster, guard, mine, state, rules=rules, labels=labels)
        outcomes.append(ClusterResult(r.cluster, mine, path))
    return outcomes, texts


def _invalid(outcomes: Sequence[ClusterResult], config: ProjectConfig, streams: Streams) -> bool:
    """Whether a written manifest does not validate as ``kqplan validate`` would check it under
    this config (policy included; a required <default> entity concerns the whole manifest set,
    not these entries); each problem told."""
    from kqplan.core.diagnostics import render_text
    from kqplan.core.policy import MISSING_DEFAULT
    from kqplan.manifest.compile import load_desired

    invalid = False
    for outcome in outcomes:
        if outcome.manifest is None:
            continue
        problems = [d for d in load_desired([outcome.manifest.parent], config).diagnostics
                    if d.is_error and d.code != MISSING_DEFAULT]
        if problems:
            invalid = True
            streams.warn(render_text(problems))
            streams.warn(terminal(f"{outcome.manifest}: the proposals do not validate under "
                                  f"{config.source or 'the config'}"))
    return invalid


def _manifest_dir(out: str | Path) -> Path:
    """rightsize's ``--out``: a local directory, as the manifests it writes are for review."""
    from kqplan.fleet.usage import is_uri, local_paths

    try:
        path = local_paths([out])[0] if is_uri(out) else Path(out)
    except KqplanError:
        raise KqplanError(f"--out {out}: rightsize writes manifests to review, into a local directory",
                          hint="give a directory of your repository's checkout") from None
    if path.exists() and not path.is_dir():
        raise KqplanError(f"--out {path} is a file", hint="give a directory for the manifests and tables")
    return path


def _describe(entry: Any, limit: int) -> tuple[Any, str | None]:
    """One describe of an inventory cluster (its ``id`` checked first): (state, cluster id)."""
    from kqplan.pipeline.guarded import check_inventory_id
    from kqplan.pipeline.target import Target, open_cluster

    with open_cluster(Target.of_cluster(entry).within(limit)) as cluster:
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
