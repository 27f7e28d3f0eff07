"""Kafka's quota sensors: how long what a broker measured of a quota bucket stays in its readings,
from the broker's own settings (read with DescribeConfigs) or Kafka's defaults.

Read in Kafka 4.3.1's source (``ClientQuotaManager``, ``ControllerMutationQuotaManager``,
``SampledStat``, ``Rate``, ``Avg``, ``Server.buildMetricsConfig``) and checked on a real broker
(``tests/metrics``):

- Each bucket has a **quota sensor**, a ``Rate``: ``byte-rate`` (Produce, Fetch) and ``request-time``
  (Request) on the quota manager's config, ``quota.window.num`` samples of
  ``quota.window.size.seconds``; Kafka checks the quota against it on every record and throttles
  a response that takes it over. ControllerMutation's ``mutation-rate`` is a ``Rate`` added
  without a config of its own, so on the broker's default metric config (below); its quota is a
  token bucket on ``controller.quota.window.*``.
- Each bucket has a **throttle sensor**, an ``Avg`` of the delays Kafka gave its throttled
  responses (``throttle-time``), added without a config of its own: the broker's default metric
  config, ``metrics.num.samples`` samples of ``metrics.sample.window.ms`` (2 × 30 s by default,
  not the quota window).
- A sample takes records for one window from its first record, and is forgotten once its *last*
  record is ``samples × window`` old (``SampledStat.purgeObsoleteSamples``). So a reading taken
  ``(samples + 1) × window`` after a change holds only records made after it (:attr:`Sensor.clean`),
  and a throttle-time reading above 0 means Kafka throttled a response of the bucket in the
  ``samples × window`` before it (:attr:`Sensor.memory`): after a bucket's last throttled response
  its throttle-time stays up for that long (60 s by default) — a lagging echo, never a sign that
  the bucket is throttled *now*. Without any throttled response in that span it reads NaN.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

CALLBACK = "client.quota.callback.class"
QUOTA_SAMPLES = "quota.window.num"
QUOTA_WINDOW = "quota.window.size.seconds"
CONTROLLER_SAMPLES = "controller.quota.window.num"
CONTROLLER_WINDOW = "controller.quota.window.size.seconds"
METRIC_SAMPLES = "metrics.num.samples"
METRIC_WINDOW = "metrics.sample.window.ms"

DEFAULTS: Mapping[str, int] = {
    QUOTA_SAMPLES: 11, QUOTA_WINDOW: 1,  # QuotaConfig's NUM_QUOTA_SAMPLES and QUOTA_WINDOW_SIZE_SECONDS
    CONTROLLER_SAMPLES: 11, CONTROLLER_WINDOW: 1,
    METRIC_SAMPLES: 2, METRIC_WINDOW: 30_000,  # MetricConfig's defaults (CommonClientConfigs)
}
"""Kafka's defaults of the settings kqplan reads: what a broker uses when they are not set."""
SETTINGS: tuple[str, ...] = (CALLBACK, *DEFAULTS)
"""The broker settings kqplan asks each broker for."""

CONTROLLER_KEY = "controller_mutation_rate"


@dataclass(frozen=True, slots=True)
class Sensor:
    """One sampled statistic: ``samples`` samples of ``window`` seconds."""

    samples: int
    window: float
    settings: tuple[str, str]
    """The two settings it comes from (``quota.window.num``, ``quota.window.size.seconds``)."""

    @property
    def memory(self) -> float:
        """Seconds a record stays in the readings after it (the last of its sample's)."""
        return self.samples * self.window

    @property
    def clean(self) -> float:
        """Seconds after a change from which a reading holds no record made before it."""
        return (self.samples + 1) * self.window


@dataclass(frozen=True, slots=True)
class BrokerSettings:
    """One broker's settings that decide what its quota metrics mean."""

    values: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULTS))
    callback: str | None = None
    """``client.quota.callback.class``: None, Kafka's own resolution and enforcement."""
    defaulted: tuple[str, ...] = ()
    """The settings the broker did not report (Kafka's default assumed)."""
    raw: Mapping[str, str | None] = field(default_factory=dict)
    """The answer as the broker gave it (what a snapshot records)."""

    @classmethod
    def of(cls, configs: Mapping[str, str | None]) -> BrokerSettings:
        """From a DescribeConfigs answer (name -> value; a value Kafka leaves unset is None)."""
        values: dict[str, int] = {}
        defaulted = []
        for name, default in DEFAULTS.items():
            raw = configs.get(name)
            number = _positive_int(raw)
            values[name] = number if number is not None else default
            if number is None:
                defaulted.append(name)
        callback = (configs.get(CALLBACK) or "").strip() or None
        return cls(values, callback, tuple(defaulted), {k: v for k, v in configs.items() if k in SETTINGS})

    def usage(self, key: str) -> Sensor:
        """The sensor of the usage Kafka compares with ``key``'s quota."""
        if key == CONTROLLER_KEY:
            return self.throttle  # mutation-rate: a Rate on the default metric config
        return Sensor(self.values[QUOTA_SAMPLES], float(self.values[QUOTA_WINDOW]),
                      (QUOTA_SAMPLES, QUOTA_WINDOW))

    @property
    def throttle(self) -> Sensor:
        """The throttle-time sensor of every bucket (every key)."""
        return Sensor(self.values[METRIC_SAMPLES], self.values[METRIC_WINDOW] / 1000,
                      (METRIC_SAMPLES, METRIC_WINDOW))


def _positive_int(raw: str | None) -> int | None:
    if raw is None:
        return None
    try:
        number = int(raw.strip())
    except ValueError:
        return None
    return number if number > 0 else None


@dataclass(frozen=True, slots=True)
class BrokerRead:
    """What one broker answered about its settings."""

    node: int
    address: str
    settings: BrokerSettings | None
    """None: it could not be read (:attr:`problem` says why)."""
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    """Every broker's settings, as far as they could be read (DescribeConfigs per broker)."""

    brokers: tuple[BrokerRead, ...] = ()

    @property
    def read(self) -> tuple[BrokerSettings, ...]:
        return tuple(b.settings for b in self.brokers if b.settings is not None)

    @property
    def callbacks(self) -> dict[str, tuple[BrokerRead, ...]]:
        """Each ``client.quota.callback.class`` set, with the brokers that set it."""
        found: dict[str, list[BrokerRead]] = {}
        for b in self.brokers:
            if b.settings is not None and b.settings.callback is not None:
                found.setdefault(b.settings.callback, []).append(b)
        return {name: tuple(brokers) for name, brokers in sorted(found.items())}

    @property
    def unread(self) -> tuple[BrokerRead, ...]:
        return tuple(b for b in self.brokers if b.settings is None)

    def usage(self, key: str) -> Sensor:
        """``key``'s usage sensor on the broker that remembers longest (Kafka's defaults when no
        broker could be read)."""
        return _longest([s.usage(key) for s in self.read] or [BrokerSettings().usage(key)])

    @property
    def throttle(self) -> Sensor:
        return _longest([s.throttle for s in self.read] or [BrokerSettings().throttle])

    @property
    def token_bucket(self) -> float:
        """Seconds of quota a controller-mutation token bucket holds (``controller.quota.window.num``
        × ``controller.quota.window.size.seconds``), the most of any broker."""
        return max(s.values[CONTROLLER_SAMPLES] * s.values[CONTROLLER_WINDOW]
                   for s in self.read or (BrokerSettings(),))


def _longest(sensors: Sequence[Sensor]) -> Sensor:
    return max(sensors, key=lambda s: (s.clean, s.memory))


def seconds(value: float) -> str:
    """``60 s``, ``1.5 s``: a sensor span as messages give it."""
    return f"{value:.0f} s" if math.isclose(value, round(value)) else f"{value:g} s"
