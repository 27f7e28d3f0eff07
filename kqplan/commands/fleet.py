"""``kqplan fleet snapshot|plan``: every cluster of the inventory, local or on Spark."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kqplan.config.model import ClusterEntry, ProjectConfig
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
    from kqplan.fleet.resources import Resources
    from kqplan.fleet.rightsize import ProposalRow, Rules
    from kqplan.fleet.tables import Histogram

MIN_WINDOW = 0.001
"""The shortest ``--window``: every window index of a ``ts`` in range stays exact (below 2^53)."""
LOG_EVERY = 10.0
"""Seconds between "still running" lines of a long fleet job in a CI log (terraform's rate)."""
CHART_SUFFIX = "-utilization.png"
"""``fleet impact``'s chart of a cluster: ``OUT/<cluster>-utilization.png``."""


class Engine(StrEnum):
    LOCAL = "local"
    SPARK = "spark"


class FleetFormat(StrEnum):
    TEXT = "text"
    MARKDOWN = "markdown"
    JSON = "json"


@contextmanager
def _spark(streams: Streams, progress: Progress, master: str | None, remote: str | None,
           label: str, *, memory_mib: int | None, out_is_uri: bool = False) -> Iterator[Any]:
    """A Spark session where ``--spark-master``/``--spark-remote`` or ``SPARK_REMOTE`` say, its
    progress reported as ``label``; a Connect server taken from the environment is named on stderr.
    A driver it starts gets ``memory_mib`` (``[limits] engine-memory-mib``; None: sized from the
    machine), and running out of it is an error naming the ways out (``out_is_uri``: the tables
    already go to a URI)."""
    from kqplan.fleet.spark import session, ticking, watch, where
    from kqplan.fleet.spark_memory import driver_memory, memory_errors

    target = where(master, remote)
    if target.from_environment:
        streams.warn(f"kqplan: the Spark engine runs on {target.shown}; --spark-master local[*] runs it "
                     "in this process")
    starting = f"Starting {target.shown}"
    progress(starting)
    with ExitStack() as stack:
        with ticking(progress, lambda: starting):  # a CI log hears a session that is slow to start
            spark = stack.enter_context(session(master=target.master, remote=target.remote,
                                                driver_memory=driver_memory(memory_mib)))
        stack.enter_context(watch(spark, progress, label))
        stack.enter_context(memory_errors(spark, out_is_uri=out_is_uri))
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
    local_out, out = _out_for(engine, out) if out is not None else (None, None)
    entries = clusters.select(config, names)

    loaded = clusters.load(entries, config)

    def work(entry: Any) -> tuple[Plan, Any]:
        plan, desired, actual = clusters.plan(entry, config, loaded[entry.name])
        if engine is Engine.LOCAL:
            return plan, rows_of_plan(entry.name, plan)
        return plan, diff_input(entry.name, plan, desired, actual)

    with streams.progress(log_every=LOG_EVERY) as progress:
        results = clusters.each(entries, work, progress=progress, label="Planning")
        rows: list[ChangeRow] = []
        if engine is Engine.SPARK:
            from kqplan.fleet.spark import change_frame, check_filesystems, collect_rows
            from kqplan.fleet.spark_tables import CHANGES, write_table

            with _spark(streams, progress, spark_master, spark_remote, "Joining on Spark",
                        memory_mib=config.engine_memory_mib,
                        out_is_uri=out is not None and local_out is None) as spark:
                if out is not None and local_out is None:
                    check_filesystems(spark, [("--out", out)])
                frame = change_frame(spark, [r.value[1] for r in results if r.value is not None])
                if out is not None and local_out is None:  # a URI: Spark writes the table there
                    frame = frame.persist()
                    write_table(frame, out, CHANGES)
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
        for n in names:  # a failed cluster has no counts: empty cells, its error in the last one
            cells = {k: "" if v is None else str(v) for k, v in _counts(plans.get(n)).items()}
            lines.append(f"| {markdown_code(n, cell=True)} | {cells['add']} | {cells['change']} | "
                         f"{cells['delete']} | {cells['unmanaged']} | {markdown_text(errors.get(n) or '')} |")
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
                   spark_remote: str | None = None, tables: Sequence[str] = (),
                   allow_unknown_clusters: bool = False) -> int:
    """Observed usage against each cluster's quotas before and after its plan, per bucket (the
    connections Kafka makes share a quota): ``impact.parquet``, ``unused.parquet``, a chart per
    cluster and a summary. ``out`` a URI (Spark engine): Spark writes the tables there and only the
    summaries come back. Exit 1 when any cluster failed (the others' tables are written), or with
    ``fail_on_throttle`` when a bucket goes over its quota. Usage of a cluster the inventory does
    not list is an error (``allow_unknown_clusters``: a warning, its rows left out)."""
    from kqplan.fleet.impact import ImpactRow, summarize
    from kqplan.fleet.tables import charts as draw_charts
    from kqplan.fleet.tables import histogram, write_buckets, write_impact, write_unused
    from kqplan.fleet.usage import parse_stat
    from kqplan.render.impact import render_fleet_impact

    q = parse_stat(stat)
    _check_window(window)
    usage = _usage_for(engine, usage, tables)
    local_out, out = _out_for(engine, out)
    entries = clusters.select(config, names)
    charted = clusters.output_paths(local_out or Path("."), [e.name for e in entries], CHART_SUFFIX)
    seen = clusters.inventory_check(config, allow_unknown=allow_unknown_clusters, warn=streams.warn)
    summary: dict[str, ClusterImpact]
    histograms: dict[str, Histogram | None]
    with streams.progress(log_every=LOG_EVERY) as progress:
        states, errors = _planned(config, entries, progress)
        if engine is Engine.SPARK:
            from kqplan.fleet.spark import check_filesystems
            from kqplan.fleet.spark_assembled import impact_rows as spark_impact_rows
            from kqplan.fleet.spark_tables import write_impact as spark_write_impact
            from kqplan.fleet.spark_usage import usage_frame

            with _spark(streams, progress, spark_master, spark_remote, "Resolving the usage on Spark",
                        memory_mib=config.engine_memory_mib, out_is_uri=local_out is None) as spark:
                if local_out is None:  # Spark has the filesystem it writes to, before any work
                    check_filesystems(spark, [("--out", out)])
                # Spark reads the usage itself: 10^7 samples never pass through this process
                frame = usage_frame(spark, usage, tables, checked=False)  # checked as it is aggregated
                if local_out is None:  # and writes the tables where the URI says
                    summary, written = spark_write_impact(spark, states, frame, q, out=out,
                                                          window=window, seen=seen)
                    histograms = {c: written.get(c) for c in states}
                else:
                    impact = spark_impact_rows(spark, states, frame, q, window=window, seen=seen)
        else:
            from kqplan.fleet.columnar import impact_of_files
            from kqplan.fleet.resources import Resources

            _import_charts_meanwhile(local_out)
            # DuckDB reads the usage files and aggregates the samples; the core resolves each principal
            impact = impact_of_files(states, [Path(u) for u in usage], q, window=window, progress=progress,
                                     seen=seen, resources=Resources.of_project(config))
    charts: list[str] = []
    if local_out is not None:
        local_out.mkdir(parents=True, exist_ok=True)
        write_impact(impact.rows, inside(local_out, "impact.parquet"))
        write_unused(impact.unused, inside(local_out, "unused.parquet"))
        write_buckets(impact.buckets, inside(local_out, "buckets.parquet"))
        summary = summarize(impact, states)
        by_cluster: dict[str, list[ImpactRow]] = {c: [] for c in states}
        for row in impact.rows:
            by_cluster[row.cluster].append(row)
        histograms = {c: histogram(by_cluster[c]) for c in states}
        charts = [str(path) for path in draw_charts([(c, histograms[c], charted[c]) for c in sorted(states)])
                  if path is not None]
    else:
        streams.warn(f"kqplan: the tables are in {out}; charts are drawn only into a local --out directory")
    throttled = impact_summary(summary, errors, histograms)
    streams.print(render_fleet_impact(throttled, fmt.value, charts), end="")
    if errors:
        return ExitCode.ERROR
    hit = any(s.get("newly_throttled") for s in throttled.values())
    return ExitCode.ERROR if fail_on_throttle and hit else ExitCode.OK


def _planned(config: ProjectConfig, entries: Sequence[ClusterEntry], progress: Progress
             ) -> tuple[dict[str, tuple[QuotaState, QuotaState]], dict[str, str]]:
    """Each cluster's state before and after its plan, and the clusters that could not be planned
    with their errors; the manifests and plans themselves are let go (at 10 clusters × 10k
    entities the engine's peak fell by ~60 MiB: benchmarks/README.md, the local engine's memory)."""
    from kqplan.core.plan import apply_ops

    loaded = clusters.load(entries, config)
    results = clusters.each(entries, lambda entry: clusters.plan(entry, config, loaded[entry.name]),
                            progress=progress, label="Planning")
    errors = {r.cluster: r.error for r in results if r.error is not None}
    return {r.cluster: (r.value[2], apply_ops(r.value[2], r.value[0].changes))
            for r in results if r.value is not None}, errors


def _import_charts_meanwhile(out: Path | None) -> None:
    """When charts will be drawn into ``out`` (a local directory), import matplotlib (~0.8 s) in a
    thread of its own while the local engine reads the usage: DuckDB lets go of the GIL as it
    scans, so the import runs on the other core. numpy, the big module both need, is imported here
    first; modules both threads import meanwhile wait on CPython's per-module import locks. An
    import that fails is left for the charts to make again, and to name the extra it needs."""
    import threading

    if out is None:
        return
    try:
        import numpy  # noqa: F401
    except ImportError:
        return

    def load() -> None:
        try:
            import matplotlib

            matplotlib.use("Agg")  # files only, no display (as fleet.tables.charts says too)
            import matplotlib.pyplot
        except Exception:  # said again, with the extra it needs, when the charts import it
            return

    threading.Thread(target=load, name="kqplan-import-charts", daemon=True).start()


def _out_for(engine: Engine, out: str | Path) -> tuple[Path | None, str]:
    """``--out`` as a local directory, or None for a URI the Spark engine writes to itself (a
    ``file://`` URI is a local directory for the local engine, Spark's to write for Spark); and
    ``out`` as passed on (a URI checked, its scheme in lower case). A value that is no well-formed
    URI (:func:`~kqplan.fleet.locations.checked_uri`: ``file:rel``, ``s3a:``) is refused before any work."""
    from kqplan.fleet.locations import checked_uri, is_uri, local_location

    if is_uri(out):
        out = checked_uri("--out", str(out))
        if engine is Engine.SPARK:
            return None, out
    path = local_location("--out", out)
    if path is None:
        raise KqplanError(f"--out {out}: the local engine writes local files",
                          hint="add --engine spark: Spark writes to any filesystem its Hadoop layer has")
    if path.exists() and not path.is_dir():
        raise KqplanError(f"--out {path} is a file", hint="give a directory for the tables")
    return path, str(out)


def local_dir(out: str | Path, what: str) -> Path:
    """The ``--out`` of a command that writes ``what`` into a local directory itself (snapshot,
    usage, rightsize): a path, or a ``file://`` URI's path; another URI, or a value that is no
    well-formed URI, is refused before any work."""
    from kqplan.fleet.locations import local_location

    path = local_location("--out", out)
    if path is None:
        raise KqplanError(f"--out {out}: {what}, into a local directory",
                          hint="give a local directory (a path, or file:///ABSOLUTE/PATH)")
    return path


def _usage_for(engine: Engine, usage: Sequence[str | Path], tables: Sequence[str]) -> list[str | Path]:
    """``--usage`` and ``--usage-table`` checked for the engine: the local engine takes local paths
    (``file://`` URIs as paths); the Spark engine paths, URIs (checked, their scheme in lower case)
    and tables. A local path that does not exist, or a value that is no well-formed URI, is an
    error before any cluster is described."""
    from kqplan.fleet.locations import checked_uri, is_uri
    from kqplan.fleet.usage import local_paths, usage_files

    if not usage and not tables:
        raise KqplanError("no usage given", hint="give --usage PATH|URI (repeatable) or --usage-table NAME")
    if engine is Engine.LOCAL:
        paths = local_paths(usage, tables)
        list(usage_files(paths))
        return list(paths)
    given = [checked_uri("--usage", str(u)) if is_uri(u) else u for u in usage]
    list(usage_files([Path(u) for u in given if not is_uri(u)]))
    return given


def _check_window(window: float) -> None:
    if not (math.isfinite(window) and window >= MIN_WINDOW):
        raise KqplanError(f"--window {window:g} must be a number of seconds, at least {MIN_WINDOW:g}",
                          hint="60 groups the samples by the minute")


def impact_summary(summary: Mapping[str, ClusterImpact], errors: Mapping[str, str],
                   histograms: Mapping[str, Histogram | None]) -> dict[str, dict[str, Any]]:
    """The summary as printed in JSON (and read by the text and Markdown forms). ``buckets`` counts
    what the chart counts: the buckets (one per key) with both usage and a quota after the plan,
    and those over it."""
    out: dict[str, dict[str, Any]] = {}
    for cluster, s in sorted(summary.items()):
        drawn = histograms.get(cluster)
        out[cluster] = {
            "principals": s.principals,
            "buckets": {"with_quota": drawn.total if drawn else 0, "over_quota": drawn.over if drawn else 0},
            "newly_throttled": [{"bucket": t.bucket, "key": t.key, "members": t.members, "usage": t.usage,
                                 "quota": t.quota} for t in s.newly_throttled],
            "relieved": [{"bucket": t.bucket, "key": t.key, "members": t.members, "usage": t.usage,
                          "quota": t.quota} for t in s.relieved],
            "split_unknown": [{"bucket": t.bucket, "key": t.key, "members": t.members, "usage": t.usage,
                               "usage_max": t.usage_max, "quota": t.quota} for t in s.unknown],
            "unlimited": s.unlimited, "unused_entries": s.unused_entries,
            "bucket_usage": "windowed" if s.windowed else "summed", "error": None}
    return out | {c: {"error": e} for c, e in sorted(errors.items())}


def rightsize_command(config: ProjectConfig, names: Sequence[str], *, usage: Sequence[str | Path], stat: str,
                      headroom: float, tolerance: float, mins: Sequence[str], labels: Sequence[str],
                      engine: Engine, out: str | Path, fmt: FleetFormat, streams: Streams,
                      window: float = 60.0, spark_master: str | None = None, spark_remote: str | None = None,
                      tables: Sequence[str] = (), min_samples: int | None = None,
                      allow_unknown_clusters: bool = False) -> int:
    """Proposed quotas from observed usage: ``out/<cluster>/rightsize.yaml`` (valid input for
    ``kqplan plan``), ``out/proposals.parquet``, ``out/proposals.md`` and a summary. A lowering
    needs ``min_samples`` windows of its bucket's usage (None: one day's, ``86400 // window``).
    Exit 1 when a cluster failed or a written manifest does not validate under the project's
    config; usage of a cluster the inventory does not list is an error (``allow_unknown_clusters``:
    a warning, its rows left out)."""
    from kqplan.commands import fleet_manifests as manifests
    from kqplan.files import write_all
    from kqplan.fleet.locations import checked_uri, is_uri
    from kqplan.fleet.proposals import markdown_view, proposals_parquet, render_json
    from kqplan.fleet.proposals import render_text as render_summary
    from kqplan.fleet.resources import Resources
    from kqplan.fleet.rightsize import Rules, default_min_samples
    from kqplan.render.proposals import render_markdown

    _check_window(window)
    rules = Rules.of(stat=stat, headroom=headroom, tolerance=tolerance, mins=mins, policy=config.policy,
                     min_samples=default_min_samples(window) if min_samples is None else min_samples)
    label_map = manifests.labels(labels)
    entries = clusters.select(config, names)
    if is_uri(out):  # a value that is no well-formed URI: refused as everywhere
        checked_uri("--out", str(out))
    out = manifests.manifest_dir(out)
    folders = manifests.folders(out, entries)
    usage = _usage_for(engine, usage, tables)  # a missing path: an error before any describe
    seen = clusters.inventory_check(config, allow_unknown=allow_unknown_clusters, warn=streams.warn)
    with streams.progress(log_every=LOG_EVERY) as progress:
        results = clusters.each(entries, lambda entry: manifests.describe(entry, config.max_input_bytes),
                                progress=progress, label="Describing")
        states = {r.cluster: r.value[0] for r in results if r.value is not None}
        rows = _proposals(streams, progress, states, usage=usage, tables=tables, rules=rules, engine=engine,
                          window=window, seen=seen, spark_master=spark_master, spark_remote=spark_remote,
                          memory_mib=config.engine_memory_mib, resources=Resources.of_project(config))
    table = inside(out, manifests.PROPOSALS_TABLE)
    guards = {e.name: e.id for e in entries}
    outcomes, texts = manifests.manifests(results, rows, folders=folders, guards=guards, config=config,
                                          rules=rules, labels=label_map, streams=streams)
    files: dict[Path, str | bytes] = {table: proposals_parquet(rows), **texts}
    files[inside(out, manifests.PROPOSALS_MD)] = render_markdown(markdown_view(outcomes, rules, limit=None))
    write_all(files)  # the whole set and its missing directories, or (a write failing) none of it
    invalid = manifests.invalid(outcomes, config, streams)
    if fmt is FleetFormat.JSON:
        streams.print(render_json(outcomes, table), end="")
    elif fmt is FleetFormat.MARKDOWN:
        streams.print(render_markdown(markdown_view(outcomes, rules)), end="")
    else:
        streams.print(render_summary(outcomes, table, min_samples=rules.min_samples), end="")
    return ExitCode.ERROR if invalid or any(o.error is not None for o in outcomes) else ExitCode.OK


def _proposals(streams: Streams, progress: Progress, states: Mapping[str, QuotaState], *,
               usage: Sequence[str | Path], tables: Sequence[str], rules: Rules, engine: Engine,
               window: float, seen: Callable[[Collection[str]], None], spark_master: str | None,
               spark_remote: str | None, memory_mib: int | None, resources: Resources
               ) -> list[ProposalRow]:
    """The proposal rows of the described clusters, from the usage read by the engine; ``seen``
    hears every cluster the usage names before anything is proposed."""
    if engine is Engine.SPARK:
        from kqplan.fleet.spark_rightsize import spark_proposal_rows
        from kqplan.fleet.spark_usage import usage_frame

        with _spark(streams, progress, spark_master, spark_remote, "Proposing on Spark",
                    memory_mib=memory_mib) as spark:
            frame = usage_frame(spark, usage, tables, checked=False)  # checked as it is aggregated
            return spark_proposal_rows(spark, states, frame, rules, window=window, seen=seen)
    from kqplan.fleet.columnar_rightsize import proposals_of_files

    # DuckDB reads the usage files and aggregates the samples; the core groups and decides
    return proposals_of_files(states, [Path(u) for u in usage], rules, window=window, progress=progress,
                              seen=seen, resources=resources)
