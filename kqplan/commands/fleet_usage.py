"""``kqplan fleet usage``: every inventory cluster's quota-bucket usage over a window, pulled from
Prometheus (:mod:`kqplan.metrics.usage`) into usage Parquet (``schemas/usage-v1.json``), one file
per cluster, ``OUT/<cluster>.parquet``: what ``fleet impact`` and ``fleet rightsize`` read.

Where a cluster's metrics are is a :class:`~kqplan.metrics.source.PrometheusSource` per cluster:
the flags over its ``[clusters.NAME.metrics]`` and ``[metrics]``, each selector's ``{cluster}``
replaced by the inventory name (:func:`kqplan.commands.throttled.metrics_source`, as ``kqplan
throttled`` takes it).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from kqplan.commands.throttled import metrics_source
from kqplan.config.model import ClusterEntry, ProjectConfig
from kqplan.console import Streams
from kqplan.core.entity import CLIENT_ID, USER, visible
from kqplan.core.errors import ExitCode, KqplanError
from kqplan.files import write_atomically
from kqplan.fleet import clusters
from kqplan.fleet.usage_schema import CLIENT_BUCKET, NAMES, USER_BUCKET
from kqplan.metrics.names import MetricNames, parse_selector, selector
from kqplan.metrics.prometheus import Prometheus, describe_series
from kqplan.metrics.source import PLACEHOLDER, PrometheusSource, endpoint
from kqplan.metrics.throttled import Window
from kqplan.metrics.usage import BucketUsage, Pulled, pull_usage, usage_expr
from kqplan.render.escape import terminal

DOCS = "docs/fleet.md"
LOG_EVERY = 10.0


def check_sources(source: PrometheusSource, entries: Sequence[ClusterEntry],
                  sources: Mapping[str, PrometheusSource]) -> None:
    """Several clusters from one Prometheus need a selector that tells them apart."""
    apart = len({(s.url, s.selector) for s in sources.values()}) == len(sources)
    if len(entries) > 1 and not apart:
        raise KqplanError(
            f"{len(entries)} clusters, one Prometheus, and a --selector without {PLACEHOLDER}: every "
            "cluster would get the same series",
            hint=f"write --selector with {PLACEHOLDER}, replaced by each inventory name, e.g. "
                 "--selector '{kafka_cluster=\"{cluster}\"}'; or name one --cluster")


def usage_command(config: ProjectConfig, names: Sequence[str], *, source: PrometheusSource,
                  window: Window, out: Path, streams: Streams) -> int:
    """``OUT/<cluster>.parquet`` per cluster; exit 1 when any cluster failed (the others written)."""
    entries = clusters.select(config, names)
    # the flags over each cluster's [clusters.NAME.metrics] and [metrics] (its {cluster} replaced)
    sources = {e.name: metrics_source(source, e) for e in entries}
    check_sources(source, entries, sources)
    metric_names = MetricNames().with_overrides(source.names)
    extras = {name: parse_selector(s.selector)[1] if s.selector is not None else ""
              for name, s in sources.items()}  # every selector checked before any query
    paths = clusters.output_paths(out, [e.name for e in entries], ".parquet")
    out.mkdir(parents=True, exist_ok=True)
    failed = 0
    with streams.progress(log_every=LOG_EVERY) as progress:
        for n, entry in enumerate(entries, start=1):
            def told(text: str, n: int = n, name: str = entry.name) -> None:
                progress(f"{name} ({n}/{len(entries)}): {text}")
            try:
                server = Prometheus(endpoint(sources[entry.name]))
                pulled = pull_usage(server, metric_names, extras[entry.name], window, progress=told)
                check_found(pulled, server, metric_names, extras[entry.name], window)
                write_atomically(paths[entry.name], usage_parquet(entry.name, pulled.rows, metric_names))
            except KqplanError as exc:
                failed += 1
                streams.print(terminal(f"{entry.name}: failed: {exc.message}"))
                if exc.hint:
                    streams.print(terminal(f"  = help: {exc.hint}"))
                continue
            for warning in dict.fromkeys(server.warnings):
                streams.warn(terminal(f"{entry.name}: warning: Prometheus: {warning}"))
            if pulled.unlabelled:
                streams.warn(terminal(
                    f"{entry.name}: warning: {pulled.unlabelled} series carry neither label "
                    f"'{metric_names.user_label}' nor '{metric_names.client_id_label}' and were left "
                    "out (name the labels with --metric label.user=NAME, label.client_id=NAME)"))
            streams.print(terminal(_line(entry.name, pulled, paths[entry.name])))
    streams.print(f"Fleet usage: {len(entries) - failed} of {len(entries)} clusters written "
                  f"({_span(window)}).")
    return ExitCode.ERROR if failed else ExitCode.OK


def _line(cluster: str, pulled: Pulled, path: Path) -> str:
    buckets = {r.bucket for r in pulled.rows}
    shared = sum(not (USER in b and CLIENT_ID in b) for b in buckets)
    told = f"{cluster}: {len(pulled.rows)} rows of {len(buckets)} buckets -> {path}"
    if shared:
        told += (f" ({shared} of them user-level or client-id-level buckets: a row covers all their "
                 "members, written with bucket user or client-id)")
    return told


def _span(window: Window) -> str:
    end = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(window.end))
    return f"{window.steps} steps of {window.step:g} s to {end}"


def check_found(pulled: Pulled, server: Prometheus, names: MetricNames, extra: str,
                 window: Window) -> None:
    """Usage that cannot be read is no usage found, not "no usage" (a file of no rows would tell
    ``fleet impact``, and a forecast, that nobody sends anything): no usage series at all, a series
    none of whose points is a rate (NaN, ±Inf or negative: Kafka's rates are never), or series of
    which none carries the labels that name a bucket. Each is an error naming the series and the
    label mapping."""
    mapping = (f"user label '{names.user_label}', client-id label '{names.client_id_label}'")
    if not pulled.series:
        example = usage_expr(names.keys[0].usage, extra, names, window.step)
        raise KqplanError(
            f"Prometheus at {server.shown} has no usage series in the window (e.g. "
            f"{visible(selector(names.keys[0].usage, extra))}; asked {visible(example)})",
            hint="check --selector (with several clusters, its {cluster} placeholder) and that Prometheus "
                 f"scrapes the brokers' JMX exporter ({DOCS}, docs/observability.md); other names: "
                 "--metric; no client in the window: widen --since")
    if pulled.unusable:
        shown = "; ".join(f"{key} {describe_series(labels)}" for key, labels in pulled.unusable[:3])
        more = f" and {len(pulled.unusable) - 3} more" if len(pulled.unusable) > 3 else ""
        raise KqplanError(
            f"Prometheus at {server.shown} answered {len(pulled.unusable)} usage series none of whose "
            f"points is a rate (every one NaN, ±Inf or negative): {shown}{more}",
            hint="the usage names may point at another metric (a throttle-time?): check --metric "
                 f"usage.KEY=SELECTOR and the exporter's rules ({DOCS})")
    if not pulled.rows and pulled.unlabelled:
        raise KqplanError(
            f"Prometheus at {server.shown} answered {pulled.unlabelled} usage series and none carries "
            f"a label that names a quota bucket ({mapping})",
            hint="name the labels your exporter writes: --metric label.user=NAME, "
                 "label.client_id=NAME (Strimzi's exporter: label.client_id=clientId)")


def usage_parquet(cluster: str, rows: Sequence[BucketUsage], names: MetricNames) -> bytes:
    """Usage rows (``schemas/usage-v1.json``) as Parquet: ``user``, ``client_id`` and ``bucket``
    from each row's bucket (a principal's pair, or a user-level or client-id-level bucket), ``ts``
    in seconds since the epoch, the rates of the keys of the metric table."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    keys = [m.key for m in names.keys]
    columns: dict[str, list[object]] = {name: [] for name in NAMES}
    for row in rows:
        user = row.bucket.get(USER) if USER in row.bucket else None
        client_id = row.bucket.get(CLIENT_ID) if CLIENT_ID in row.bucket else None
        bucket = None if user is not None and client_id is not None else (
            USER_BUCKET if user is not None else CLIENT_BUCKET)
        for name, value in (("cluster", cluster), ("user", user), ("client_id", client_id),
                            ("bucket", bucket), ("ts", row.ts)):
            columns[name].append(value)
        for key in NAMES[5:]:
            columns[key].append(row.rates[keys.index(key)] if key in keys else None)
    types = {"ts": pa.float64(), **{key: pa.float64() for key in NAMES[5:]}}
    table = pa.table({name: pa.array(values, types.get(name, pa.string()))
                      for name, values in columns.items()})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return bytes(sink.getvalue().to_pybytes())
