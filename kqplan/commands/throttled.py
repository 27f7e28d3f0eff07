"""``kqplan throttled``: the quota buckets Kafka throttled in a window, as its brokers measured
them (Prometheus), each with the quota that bucket has now, the entity that sets it (one
describe of the cluster) and the manifest entry that declares that entity.

Where the metrics are (:class:`~kqplan.metrics.source.PrometheusSource`) comes from the command
line and the environment, over ``--cluster``'s ``[clusters.NAME.metrics]`` and ``[metrics]``:
:func:`metrics_source`, which every command that reads metrics goes through.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path

from kqplan.config.model import ClusterEntry, ProjectConfig
from kqplan.console import Streams
from kqplan.core.buckets import bucket_quota
from kqplan.core.desired import DesiredState
from kqplan.core.diagnostics import render_text as render_diagnostics
from kqplan.core.enforcement import HELD
from kqplan.core.entity import EntityKind
from kqplan.core.errors import ExitCode, KqplanError
from kqplan.core.policy import callback_diagnostics
from kqplan.core.resolve import QuotaIndex
from kqplan.core.state import QuotaState
from kqplan.metrics.names import MetricNames, parse_selector, selector
from kqplan.metrics.prometheus import Prometheus
from kqplan.metrics.source import PrometheusSource, endpoint
from kqplan.metrics.throttled import MAX_CHUNKS, Observation, Throttled, Window, observe_throttled
from kqplan.pipeline.guarded import check_inventory_id, load_checked
from kqplan.pipeline.inputs import manifest_paths
from kqplan.pipeline.target import Target, open_cluster
from kqplan.render.throttled import (
    ThrottledRow,
    ThrottledView,
    render_json,
    render_markdown,
    render_text,
    span,
)

DEFAULT_STEP = 60.0
DOCS = "docs/observability.md"


class ThrottledFormat(StrEnum):
    TEXT = "text"
    MARKDOWN = "markdown"
    JSON = "json"


_RENDERERS = {ThrottledFormat.TEXT: render_text, ThrottledFormat.MARKDOWN: render_markdown,
              ThrottledFormat.JSON: render_json}


def window_of(since: float, step: float | None, end: float | None = None) -> Window:
    """The window to look at: ``since`` seconds to ``end`` (now), in steps of ``step`` (default a
    minute, or the whole window when shorter)."""
    window = Window(time.time() if end is None else end, since,
                    min(DEFAULT_STEP, since) if step is None else step)
    if window.chunks > MAX_CHUNKS:
        raise KqplanError(f"--since {since:g} s in steps of {window.step:g} s is {window.steps} "
                          f"points per series, more than kqplan asks for ({MAX_CHUNKS} requests)",
                          hint="raise --step (at least the scrape interval is enough)")
    return window


def throttled_command(paths: Sequence[Path], target: Target, config: ProjectConfig,
                      source: PrometheusSource, *, window: Window, fmt: ThrottledFormat,
                      detailed_exitcode: bool, streams: Streams,
                      cluster: ClusterEntry | None = None) -> int:
    """``kqplan throttled``: exit 0, or 2 with ``detailed_exitcode`` when a bucket was throttled.
    ``source``: the flags, over ``--cluster``'s ``[clusters.NAME.metrics]`` and ``[metrics]``."""
    source = metrics_source(source, cluster)
    names = MetricNames().with_overrides(source.names)
    extra = parse_selector(source.selector)[1] if source.selector is not None else ""
    server = Prometheus(endpoint(source))
    target = target.within(config.max_input_bytes).or_cluster(cluster)
    desired = _desired(paths, cluster, config, streams, quiet=fmt is not ThrottledFormat.TEXT)
    with open_cluster(target) as live, streams.progress() as progress:
        progress("Describing the cluster")
        ident = live.identity()
        check_inventory_id(cluster, ident.cluster_id, ident.address)
        state = live.describe()
        settings = live.broker_settings()
        progress(f"Asking Prometheus at {server.shown}")
        observed = observe_throttled(server, names, extra, window, memory=settings.throttle.memory)
    shown = cluster.name if cluster is not None else (ident.cluster_id or ident.address)
    problems = callback_diagnostics(settings, cluster.name if cluster is not None else ident.address,
                                    config.policy)
    if problems:
        streams.warn(render_diagnostics(problems))
    for warning in (*server.warnings, *observed.warnings):
        streams.warn(f"warning: {warning}")
    _check_found(observed, state, server, names=names, extra=extra, window=window)
    index = QuotaIndex.of(state)
    rows = [_row(found, index, desired, names) for found in observed.throttled]
    view = ThrottledView(server.shown, extra, shown, window.start, window.end,
                         window.step, desired is not None, rows, settings.throttle.memory,
                         settings.throttle.settings)
    streams.print(_RENDERERS[fmt](view), end="")
    return ExitCode.CHANGES if detailed_exitcode and rows else ExitCode.OK


def _desired(paths: Sequence[Path], cluster: ClusterEntry | None, config: ProjectConfig,
             streams: Streams, *, quiet: bool) -> DesiredState | None:
    """The manifests given, else the inventory cluster's; None when there are none to read."""
    if not paths and (cluster is None or not cluster.manifests):
        return None
    return load_checked(manifest_paths(paths, cluster), config, streams, quiet=quiet)


def _row(found: Throttled, index: QuotaIndex, desired: DesiredState | None,
         names: MetricNames) -> ThrottledRow:
    quota = bucket_quota(index, found.bucket, found.key) if found.bucket is not None else None
    value, source = quota if quota is not None else (None, None)
    declared = None
    if desired is not None and source is not None and source in desired.quotas:
        origin = desired.origins.get(source)
        declared = origin.display if origin is not None else None
    below = value is not None and found.peak_usage is not None and found.peak_usage < value * HELD
    return ThrottledRow(found.key, found.bucket, found.peak_ms, found.steps, found.first, found.last,
                        found.brokers, found.peak_usage, names.of(found.key).unit, value, source,
                        declared, found.ended, below)


def _check_found(observed: Observation, state: QuotaState, server: Prometheus, *,
                 names: MetricNames, extra: str, window: Window) -> None:
    """No throttle series at all in the window, on a cluster that sets client quotas: that is
    no metrics found, not "nothing throttled" (which a CI gate would take as a pass)."""
    if observed.series != 0 or not any(entity.kind is EntityKind.CLIENT and quotas
                                       for entity, quotas in state.items()):
        return
    example = selector(names.keys[0].throttle, extra)
    raise KqplanError(
        f"Prometheus at {server.shown} has no throttle-time series in the last "
        f"{span(window.seconds)} (e.g. {example}), though the cluster sets client quotas: "
        "kqplan cannot tell whether anything was throttled",
        hint=f"check --selector and that Prometheus scrapes the brokers' JMX exporter ({DOCS}; "
             "examples/metrics/jmx-exporter.yml); other names: --metric; no client at all in "
             "the window: widen --since")


def metrics_source(flags: PrometheusSource, cluster: ClusterEntry | None) -> PrometheusSource:
    """Where the metrics are, for every command that reads them: the flags over ``cluster``'s
    ``[clusters.NAME.metrics]`` and ``[metrics]``, each selector's ``{cluster}`` replaced by the
    inventory name, escaped for where it stands (:func:`~kqplan.metrics.source.fill_cluster`).
    Without a cluster only the flags count, and a ``{cluster}`` in ``--selector`` is refused."""
    if cluster is None:
        return flags.for_cluster(None)
    name, settings = cluster.name, cluster.metrics
    where = f"kqplan.toml's [clusters.{name}.metrics] (or [metrics])"
    inventory = PrometheusSource(settings.prometheus, settings.selector, settings.headers_file,
                                 settings.names, url_from=f"{where} prometheus")
    return flags.for_cluster(name).or_settings(inventory.for_cluster(name, what=f"{where} selector"))
