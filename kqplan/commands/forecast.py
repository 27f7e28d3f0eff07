"""``plan --usage`` / ``--usage-from-metrics``: which quota buckets the plan would throttle, from
observed usage against the quotas before and after it: ``fleet impact``'s code
(:func:`kqplan.fleet.impact.impact_rows` and its columnar engine) on one cluster, not a copy.

The usage is either usage files (``schemas/usage-v1.json``: principals' rows and quota buckets'
rows, as ``kqplan fleet usage`` writes them) or the brokers' metrics, pulled from Prometheus for
the window (:func:`kqplan.metrics.usage.pull_usage`, the rows ``fleet usage`` would write). A
bucket's verdict is True (its usage passes its quota after the plan), False, or unknown when the
plan splits a measured bucket whose members' shares no metric shows ("split unknown",
:mod:`kqplan.fleet.impact`): such a bucket is listed as unknown, never as throttled or not.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from kqplan.config.model import ClusterEntry, ProjectConfig
from kqplan.core.errors import KqplanError
from kqplan.core.state import QuotaState
from kqplan.fleet.impact import (
    DEFAULT_WINDOW,
    BucketRow,
    Impact,
    ImpactRow,
    Throttled,
    impact_rows,
    summarize,
)
from kqplan.fleet.samples import Sample
from kqplan.fleet.usage_schema import CLIENT_BUCKET, USER_BUCKET
from kqplan.metrics.names import MetricNames
from kqplan.metrics.prometheus import Prometheus
from kqplan.metrics.source import PrometheusSource
from kqplan.metrics.throttled import Window
from kqplan.render.forecast import ForecastBucket, ForecastView
from kqplan.render.throttled import span


@dataclass(frozen=True, slots=True)
class UsageOptions:
    """Where the observed usage comes from (``--usage`` files or ``--usage-from-metrics``)."""

    paths: tuple[Path, ...] = ()
    metrics: PrometheusSource | None = None
    """``--usage-from-metrics``: the flags' source (the inventory's settings fill it in)."""
    window: Window | None = None
    """The metrics' window (``--since``, ``--step``)."""
    q: float | None = None
    """``--stat``: None the maximum, else the quantile."""
    bucket_window: float = DEFAULT_WINDOW

    @property
    def given(self) -> bool:
        return bool(self.paths) or self.metrics is not None


def verdicts(impact: Impact, cluster: str, censored: Collection[tuple[str, str]] = ()
             ) -> dict[tuple[str, str], tuple[BucketRow, bool | None]]:
    """Each bucket after the plan, by (bucket, key), with whether it would be throttled: fleet
    impact's verdict, except that a bucket Kafka throttled in the window (``censored``: (bucket,
    key)) whose quota the plan keeps or lowers stays throttled: its measured usage is what the
    quota let through, not what it asks for."""
    before = {(b.bucket, b.key): b for b in impact.buckets if b.cluster == cluster and b.side == "before"}
    found: dict[tuple[str, str], tuple[BucketRow, bool | None]] = {}
    for b in impact.buckets:
        if b.cluster != cluster or b.side != "after":
            continue
        was = before.get((b.bucket, b.key))
        held = (b.bucket, b.key) in censored and was is not None and b.value <= was.value
        found[b.bucket, b.key] = (b, True if held else b.throttled)
    return found


def forecast_of(impact: Impact, cluster: str, source: str,
                censored: Collection[tuple[str, str]] = ()) -> ForecastView:
    """The view of fleet impact's result for ``cluster``: every bucket over its quota after the plan
    (worst first, the newly throttled marked), the split unknown, the relieved."""
    summary = summarize(impact, [cluster])[cluster]
    newly = {(t.bucket, t.key) for t in summary.newly_throttled}
    judged = verdicts(impact, cluster, censored)
    over = [ForecastBucket(b.bucket, b.key, b.members + b.shares, b.usage, b.usage_max, b.value,
                           (b.bucket, b.key) in newly and (b.bucket, b.key) not in censored,
                           b.throttled is not True and (b.bucket, b.key) in censored)
            for b, throttled in judged.values() if throttled is True]
    over.sort(key=lambda t: (-(t.usage or 0.0) / (t.quota or 1.0), t.bucket, t.key))
    unknown = [t for t in summary.unknown if judged.get((t.bucket, t.key), (None, None))[1] is None]
    relieved = relieved_of(impact, cluster, summary.relieved, censored)
    return ForecastView(cluster, source, summary.principals, tuple(over), tuple(map(_bucket, unknown)),
                        relieved, summary.windowed)


def relieved_of(impact: Impact, cluster: str, relieved: Sequence[Throttled],
                censored: Collection[tuple[str, str]] = ()) -> tuple[ForecastBucket, ...]:
    """The buckets the plan relieves: fleet impact's (their usage passed their quota before the
    plan, not after), and each bucket Kafka throttled in the window (``censored``) whose quota the
    plan raises or removes, for its members that are not over their quota after it. Kafka holds a
    throttled bucket at its quota, so its measured usage lies on either side of it: the throttle
    sensor, not the usage, says it was throttled (the mirror of :func:`verdicts`)."""
    found = {(t.bucket, t.key): _bucket(t) for t in relieved}
    held: dict[tuple[str, str], list[ImpactRow]] = {}
    for r in impact.rows:
        if (r.cluster == cluster and r.before_group is not None and (r.before_group, r.key) in censored
                and (r.before_group, r.key) not in found and r.would_throttle is False
                and r.before_value is not None and (r.after_value is None or r.after_value > r.before_value)):
            held.setdefault((r.before_group, r.key), []).append(r)
    for (group, key), rows in held.items():
        found[group, key] = ForecastBucket(group, key, len({(r.user, r.client_id, r.bucket) for r in rows}),
                                           rows[0].before_group_usage, None, rows[0].before_value, held=True)
    return tuple(found[k] for k in sorted(found))


def _bucket(t: Throttled) -> ForecastBucket:
    return ForecastBucket(t.bucket, t.key, t.members, t.usage, t.usage_max, t.quota)


def forecast(options: UsageOptions, before: QuotaState, after: QuotaState, *,
             cluster: ClusterEntry | None, progress: Callable[[str], None],
             config: ProjectConfig | None = None) -> ForecastView:
    """The forecast of the plan ``before`` → ``after`` from the usage ``options`` name (usage files
    on the local engine within ``config``'s ``[limits]``)."""
    if options.metrics is not None:
        assert options.window is not None
        name = cluster.name if cluster is not None else "cluster"
        metrics = metrics_of(options.metrics, cluster)
        samples = pulled_samples(metrics, options.window, name, progress)
        censored = throttled_in(metrics, options.window)
        impact = impact_rows({name: (before, after)}, samples, options.q, window=options.bucket_window)
        shown = f"Prometheus at {metrics.server.shown}, the last {span(options.window.seconds)}"
        return forecast_of(impact, name, shown, censored)
    return _from_files(options, before, after, cluster, progress, config=config or ProjectConfig())


def _from_files(options: UsageOptions, before: QuotaState, after: QuotaState, cluster: ClusterEntry | None,
                progress: Callable[[str], None], *, config: ProjectConfig) -> ForecastView:
    """Usage files through fleet impact's local engine. Without ``--cluster`` the files must name
    one cluster, which is this one."""
    from kqplan.fleet.columnar import impact_of_files
    from kqplan.fleet.resources import Resources
    from kqplan.render.escape import terminal

    shown = ", ".join(terminal(str(p)) for p in options.paths)
    named: list[str] = []

    name = cluster.name if cluster is not None else _ANY

    def seen(clusters: Collection[str]) -> None:
        named[:] = sorted(clusters)
        if name == _ANY and len(named) == 1:
            raise _Named(named[0])

    for _ in range(2):
        try:
            impact = impact_of_files({name: (before, after)}, list(options.paths), options.q,
                                     window=options.bucket_window, progress=progress, seen=seen,
                                     resources=Resources.of_project(config))
        except _Named as found:
            name = found.name
            continue
        if name not in named:
            raise _no_rows(name, named, cluster, shown)
        return forecast_of(impact, name, shown)
    raise AssertionError("unreachable: the second pass names its cluster")


_ANY = "\x00any"


class _Named(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _no_rows(name: str, named: Sequence[str], cluster: ClusterEntry | None, shown: str) -> KqplanError:
    from kqplan.render.escape import terminal

    listed = ", ".join(terminal(n) for n in named[:5]) or "none"
    if cluster is None:
        return KqplanError(f"the usage ({shown}) names {len(named)} clusters "
                           f"({listed}): kqplan cannot tell which one this plan is for",
                           hint="name it with --cluster NAME (its inventory name is the usage's cluster)")
    return KqplanError(f"the usage ({shown}) has no row of cluster {terminal(name)} (it names: {listed})",
                       hint="write the usage with the inventory's cluster names (kqplan fleet usage does)")


@dataclass(frozen=True, slots=True)
class Metrics:
    """One cluster's metrics: the server, the names, the selector's matchers."""

    server: Prometheus
    names: MetricNames
    extra: str


def metrics_of(flags: PrometheusSource, cluster: ClusterEntry | None) -> Metrics:
    """The flags over ``cluster``'s ``[clusters.NAME.metrics]`` and ``[metrics]``
    (:func:`~kqplan.commands.throttled.metrics_source`)."""
    from kqplan.commands.throttled import metrics_source
    from kqplan.metrics.names import parse_selector
    from kqplan.metrics.source import endpoint

    source = metrics_source(flags, cluster)
    extra = parse_selector(source.selector)[1] if source.selector is not None else ""
    return Metrics(Prometheus(endpoint(source)), MetricNames().with_overrides(source.names), extra)


def pulled_samples(metrics: Metrics, window: Window, cluster: str,
                   progress: Callable[[str], None] | None = None) -> list[Sample]:
    """The window's usage rows from Prometheus (what ``fleet usage`` writes), as samples of
    ``cluster``; no usage series at all is an error, not "no usage"."""
    from kqplan.commands.fleet_usage import check_found
    from kqplan.core.entity import CLIENT_ID, USER
    from kqplan.metrics.usage import pull_usage

    pulled = pull_usage(metrics.server, metrics.names, metrics.extra, window, progress=progress)
    check_found(pulled, metrics.server, metrics.names, metrics.extra, window)
    samples: list[Sample] = []
    for row in pulled.rows:
        user, client_id = row.bucket.get(USER) or "", row.bucket.get(CLIENT_ID) or ""
        kind = "" if USER in row.bucket and CLIENT_ID in row.bucket else (
            USER_BUCKET if USER in row.bucket else CLIENT_BUCKET)
        samples.extend(Sample(cluster, user, client_id, m.key, rate, row.ts, kind)
                       for m, rate in zip(metrics.names.keys, row.rates, strict=True) if rate is not None)
    return samples


def throttled_in(metrics: Metrics, window: Window) -> frozenset[tuple[str, str]]:
    """(bucket, key) of every bucket Kafka throttled in ``window``."""
    from kqplan.core.buckets import shown
    from kqplan.metrics.throttled import observe_throttled

    seen = observe_throttled(metrics.server, metrics.names, metrics.extra, window)
    return frozenset((shown(t.bucket), t.key) for t in seen.throttled if t.bucket is not None)
