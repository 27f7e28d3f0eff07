"""Kafka's sensor windows from a broker's settings (kqplan.core.sensors), and the callback and
unreadable-settings diagnostics of the brokers (KQP175, KQP176 in kqplan.core.policy)."""

from __future__ import annotations

from kqplan.core.diagnostics import Severity
from kqplan.core.policy import Policy, callback_diagnostics
from kqplan.core.sensors import BrokerRead, BrokerSettings, ClusterSettings

P, M = "producer_byte_rate", "controller_mutation_rate"


def test_kafkas_defaults_when_the_broker_reports_nothing():
    settings = BrokerSettings.of({})
    assert (settings.usage(P).samples, settings.usage(P).window) == (11, 1.0)
    assert (settings.usage(P).clean, settings.usage(P).memory) == (12.0, 11.0)
    assert (settings.throttle.samples, settings.throttle.window, settings.throttle.memory) == (2, 30.0, 60.0)
    assert settings.callback is None
    assert set(settings.defaulted) == {"quota.window.num", "quota.window.size.seconds",
                                       "controller.quota.window.num", "controller.quota.window.size.seconds",
                                       "metrics.num.samples", "metrics.sample.window.ms"}


def test_what_the_broker_reports_wins_and_nonsense_falls_back_to_the_default():
    settings = BrokerSettings.of({"quota.window.num": "5", "quota.window.size.seconds": "2",
                                  "metrics.num.samples": "3", "metrics.sample.window.ms": "10000",
                                  "client.quota.callback.class": " com.example.Quotas ",
                                  "controller.quota.window.num": "-1", "unrelated": "x"})
    assert (settings.usage(P).clean, settings.usage(P).memory) == (12.0, 10.0)
    assert settings.throttle.memory == 30.0
    assert settings.usage(M) == settings.throttle  # mutation-rate: a Rate on the default metric config
    assert settings.callback == "com.example.Quotas"
    assert "controller.quota.window.num" in settings.defaulted
    assert "unrelated" not in settings.raw


def test_the_cluster_waits_for_the_broker_that_remembers_longest():
    fast = BrokerSettings.of({"metrics.sample.window.ms": "5000"})
    slow = BrokerSettings.of({"metrics.sample.window.ms": "45000"})
    cluster = ClusterSettings((BrokerRead(1, "a:1", fast), BrokerRead(2, "b:1", slow),
                               BrokerRead(3, "c:1", None, "x")))
    assert cluster.throttle.memory == 90.0
    assert [b.node for b in cluster.unread] == [3]
    assert ClusterSettings().throttle.memory == 60.0  # nothing read: Kafka's defaults


def _cluster(*callbacks: str | None) -> ClusterSettings:
    return ClusterSettings(tuple(BrokerRead(n, f"h{n}:9092", BrokerSettings.of(
        {"client.quota.callback.class": c} if c else {})) for n, c in enumerate(callbacks, start=1)))


def test_a_callback_is_said_once_per_cluster_naming_its_brokers():
    found = callback_diagnostics(_cluster("com.x.Q", None, "com.x.Q"), "prod", Policy())
    (one,) = found
    assert (one.code, one.severity, str(one.span)) == ("KQP175", Severity.WARNING, "prod")
    assert one.message == ("brokers 1, 3 enforce client quotas through client.quota.callback.class=com.x.Q: "
                           "the quotas kqplan stores may not be what clients get")
    assert callback_diagnostics(_cluster(None, None), "prod", Policy()) == []


def test_the_policy_makes_it_an_error_or_allows_a_known_callback():
    (error,) = callback_diagnostics(_cluster("com.x.Q"), "prod", Policy(quota_callback="error"))
    assert error.severity is Severity.ERROR
    assert "quota-callback" in (error.hint or "")
    assert callback_diagnostics(_cluster("com.x.Q"), "prod",
                                Policy(quota_callback="error", allowed_quota_callbacks=("com.x.Q",))) == []


def test_a_broker_whose_settings_could_not_be_read_is_a_warning():
    settings = ClusterSettings((BrokerRead(2, "h2:9092", None, "not authorized to describe its configs"),))
    (one,) = callback_diagnostics(settings, "prod", Policy(quota_callback="error"))
    assert (one.code, one.severity) == ("KQP176", Severity.WARNING)
    assert "broker 2 at h2:9092 (not authorized to describe its configs)" in one.message
