"""The metric names and labels kqplan asks Prometheus for: one table, overridable.

The defaults are what the JMX exporter (``io.prometheus.jmx:jmx_prometheus_javaagent`` 1.0.1)
publishes with ``examples/metrics/jmx-exporter.yml`` for Kafka's quota MBeans
``kafka.server:type=Produce|Fetch|Request|ControllerMutation,user=U,client-id=C`` — read off a
real Kafka 4.3.1 broker by ``tests/metrics/`` (the exporter's output is checked there, so this
table cannot drift from it)::

    kafka_server_quota_throttle_time{resource="Produce", user="alice"} 738.78
    kafka_server_quota_byte_rate{resource="Fetch", user="erin", client_id="reader-1"} 18911.2

One gauge per MBean attribute, the MBean's ``type`` in label ``resource``, the bucket's tags in
``user`` and ``client_id`` (a tag Kafka leaves out, as it does an empty one, is no label).
``throttle-time`` is the mean delay in ms of the throttled responses in Kafka's quota window
(NaN when none was throttled); ``byte-rate`` bytes/s, ``request-time`` percent of one thread,
``mutation-rate`` partitions/s.

Another exporter config (Strimzi's names its client-id label ``clientId``, for one) is told with
overrides, ``ROLE.NAME=VALUE``: ``throttle.KEY`` and ``usage.KEY`` take a series selector
(``name`` or ``name{label="value",...}``), ``label.user``, ``label.client_id`` and
``label.broker`` a label name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from kqplan.core.entity import visible
from kqplan.core.errors import KqplanError


@dataclass(frozen=True, slots=True)
class KeyMetrics:
    """The series of one quota key: Kafka enforces each key in its own quota manager."""

    key: str
    resource: str
    """The quota manager's MBean ``type`` (Produce, Fetch, Request, ControllerMutation)."""
    throttle: str
    """Selector of the throttle-time gauge (ms; > 0: the bucket was throttled)."""
    usage: str
    """Selector of what the quota limits (byte-rate, request-time, mutation-rate)."""
    unit: str
    """The usage's unit, as kqplan shows it: ``B/s``, ``%``, ``/s``."""


def _defaults(key: str, resource: str, usage: str, unit: str) -> KeyMetrics:
    return KeyMetrics(key, resource, f'kafka_server_quota_throttle_time{{resource="{resource}"}}',
                      f'kafka_server_quota_{usage}{{resource="{resource}"}}', unit)


DEFAULT_KEYS: tuple[KeyMetrics, ...] = (
    _defaults("producer_byte_rate", "Produce", "byte_rate", "B/s"),
    _defaults("consumer_byte_rate", "Fetch", "byte_rate", "B/s"),
    _defaults("request_percentage", "Request", "request_time", "%"),
    _defaults("controller_mutation_rate", "ControllerMutation", "mutation_rate", "/s"),
)
"""The default table, one row per client quota key (registry order)."""

LABELS = ("user", "client_id", "broker")
_METRIC = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_SELECTOR = re.compile(rf"\s*({_METRIC})?\s*(\{{.*\}})?\s*", re.DOTALL)
# one matcher: label, operator, a PromQL string literal (double, single or back quotes)
_STRING = r""""(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`[^`]*`"""
_MATCHER = re.compile(rf"\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*({_STRING})\s*(,|$)")
OVERRIDE_HINT = ("write throttle.KEY=SELECTOR, usage.KEY=SELECTOR (KEY a client quota key, SELECTOR "
                 "name or name{label=\"value\"}), or label.user|label.client_id|label.broker=LABEL")


@dataclass(frozen=True, slots=True)
class MetricNames:
    """What to ask Prometheus for: per key its series, and the labels that carry the tags."""

    keys: tuple[KeyMetrics, ...] = DEFAULT_KEYS
    user_label: str = "user"
    client_id_label: str = "client_id"
    broker_label: str = "instance"
    """The label that tells brokers apart (Kafka enforces a quota per broker): Prometheus's
    ``instance`` by default."""

    def of(self, key: str) -> KeyMetrics:
        return next(k for k in self.keys if k.key == key)

    def with_overrides(self, items: Iterable[str], *, option: str = "--metric") -> MetricNames:
        """This table with ``ROLE.NAME=VALUE`` overrides applied, in order (a later one wins)."""
        names = self
        for item in items:
            role_name, eq, value = item.partition("=")
            role, _, name = role_name.strip().partition(".")
            value = value.strip()
            shown = visible(item)
            if not eq or not value:
                raise KqplanError(f"{option} '{shown}': expected ROLE.NAME=VALUE", hint=OVERRIDE_HINT)
            if role == "label" and name in LABELS:
                if not _LABEL.fullmatch(value):
                    raise KqplanError(f"{option} '{shown}': '{visible(value)}' is not a Prometheus "
                                      "label name", hint="a label name is [a-zA-Z_][a-zA-Z0-9_]*")
                if name == "user":
                    names = replace(names, user_label=value)
                elif name == "client_id":
                    names = replace(names, client_id_label=value)
                else:
                    names = replace(names, broker_label=value)
            elif role in ("throttle", "usage") and name in {k.key for k in names.keys}:
                parse_selector(value, what=f"{option} {role}.{name}", metric=True)
                names = replace(names, keys=tuple(replace(k, **{role: value}) if k.key == name else k
                                                  for k in names.keys))
            else:
                raise KqplanError(f"{option} '{shown}': unknown name '{visible(role_name.strip())}'",
                                  hint=OVERRIDE_HINT)
        return names


def parse_selector(text: str, *, what: str = "--selector", metric: bool = False) -> tuple[str, str]:
    """``name{a="b", c=~"d"}`` → (``name``, ``a="b",c=~"d"``): the metric name (required when
    ``metric``, refused otherwise) and the matchers, checked one by one (a located error names
    the position of the first that is not ``label OP "string"``)."""
    found = _SELECTOR.fullmatch(text)
    if found is None or (found.group(1) is None and found.group(2) is None):
        expected = "name or name{label=\"value\",...}" if metric else "{label=\"value\",...}"
        raise KqplanError(f"{what}: '{visible(text)}' is not a series selector",
                          hint=f"write {expected}")
    name, braces = found.group(1) or "", found.group(2) or "{}"
    if metric and not name:
        raise KqplanError(f"{what}: '{visible(text)}' names no metric", hint="write name{label=\"value\"}")
    if name and not metric:
        raise KqplanError(f"{what}: '{visible(text)}' names a metric; give only label matchers",
                          hint="e.g. --selector '{kafka_cluster=\"prod\"}'")
    return name, _matchers(braces[1:-1], text, what)


def _matchers(inner: str, text: str, what: str) -> str:
    """The matchers of ``inner`` (between the braces), normalised and comma-joined."""
    out: list[str] = []
    position = 0
    while inner[position:].strip():
        found = _MATCHER.match(inner, position)
        if found is None:
            rest = inner[position:].strip()
            raise KqplanError(f"{what}: '{visible(text)}': expected label=\"value\" (operators =, "
                              f"!=, =~, !~) at '{visible(rest[:40])}'",
                              hint="e.g. {kafka_cluster=\"prod\", instance=~\"broker-.*\"}")
        out.append(f"{found.group(1)}{found.group(2)}{found.group(3)}")
        position = found.end()
        if not found.group(4):
            break
    return ",".join(out)


def selector(series: str, extra: str) -> str:
    """The series selector ``series`` narrowed by the matchers ``extra`` (``--selector``)."""
    name, own = parse_selector(series, metric=True)
    matchers = ",".join(m for m in (own, extra) if m)
    return f"{name}{{{matchers}}}" if matchers else name
