"""The metric-name table, its overrides, selectors; where the metrics are and the credentials."""

from __future__ import annotations

import base64

import pytest

from kqplan.core.errors import KqplanError
from kqplan.core.quotas import CLIENT_KEYS
from kqplan.metrics.names import DEFAULT_KEYS, MetricNames, parse_selector, selector
from kqplan.metrics.source import ENV_TOKEN, ENV_URL, PrometheusSource, endpoint, parse_url
from kqplan.metrics.throttled import Window, duration


def test_one_row_per_client_quota_key():
    assert tuple(k.key for k in DEFAULT_KEYS) == CLIENT_KEYS
    assert MetricNames().of("consumer_byte_rate").throttle == \
        'kafka_server_quota_throttle_time{resource="Fetch"}'


def test_overrides_apply_in_order():
    names = MetricNames().with_overrides([
        "label.client_id=clientId", "label.broker=pod",
        "throttle.producer_byte_rate=kafka_server_quota_throttle_time{resource=\"Produce\",env=\"x\"}",
        "usage.producer_byte_rate=my_rate", "usage.producer_byte_rate=my_other_rate"])
    assert (names.user_label, names.client_id_label, names.broker_label) == ("user", "clientId", "pod")
    assert names.of("producer_byte_rate").usage == "my_other_rate"
    assert names.of("consumer_byte_rate") == DEFAULT_KEYS[1]


@pytest.mark.parametrize("item", ["throttle.producer_byte_rate", "usage.producer_byte_rate=",
                                  "usage.connection_creation_rate=x", "label.instance=x",
                                  "throttle.producer_byte_rate={a=\"b\"}"])
def test_bad_overrides(item):
    with pytest.raises(KqplanError):
        MetricNames().with_overrides([item])


def test_selectors_are_checked_and_merged():
    assert parse_selector('{ kafka_cluster = "prod" , instance=~"b-.*", }') == \
        ("", 'kafka_cluster="prod",instance=~"b-.*"')
    assert parse_selector("{}") == ("", "")
    assert parse_selector("{a='x}y'}") == ("", "a='x}y'")
    assert selector('m{resource="Produce"}', 'kafka_cluster="prod"') == \
        'm{resource="Produce",kafka_cluster="prod"}'
    assert selector("m", "") == "m"
    for bad in ('{a="b"', '{a="b"} or vector(1)', '{a="b" b="c"}', '{a}', 'x y'):
        with pytest.raises(KqplanError):
            parse_selector(bad)


def test_windows_and_durations():
    window = Window(end=1000.0, seconds=900, step=60)
    assert (window.steps, window.first, window.start, window.chunks) == (15, 160.0, 100.0, 1)
    assert Window(1000.0, 30 * 86400, 60).chunks == 4  # 43,200 points: four requests
    assert (duration(60), duration(0.5), duration(1.25)) == ("60s", "500ms", "1250ms")


@pytest.mark.parametrize(("url", "base"), [
    ("http://prometheus:9090", "http://prometheus:9090"),
    ("https://mimir.example/prometheus/", "https://mimir.example/prometheus"),
    ("http://[::1]:9090", "http://[::1]:9090"),
    ("http://ops:secret@prometheus:9090", "http://prometheus:9090"),
])
def test_base_urls(url, base):
    assert parse_url(url)[0] == base


def test_credentials_go_in_headers_never_in_what_is_shown():
    point = endpoint(PrometheusSource("http://ops:s%40cret@prometheus:9090"), env={})
    assert point.shown == "http://prometheus:9090"
    assert "cret" not in repr(point)
    assert dict(point.headers)["Authorization"] == "Basic " + base64.b64encode(b"ops:s@cret").decode()
    token = endpoint(PrometheusSource(), env={ENV_URL: "http://p:9090", ENV_TOKEN: " t0k\n"})
    assert dict(token.headers) == {"Authorization": "Bearer t0k"}
    with pytest.raises(KqplanError, match="two Authorization headers"):
        endpoint(PrometheusSource("http://u:p@p:9090"), env={ENV_TOKEN: "t"})


def test_flags_win_over_settings():
    flags = PrometheusSource(url="http://flag:9090", names=("label.user=u2",))
    settings = PrometheusSource(url="http://config:9090", selector='{kafka_cluster="prod"}',
                                names=("label.user=u1",))
    merged = flags.or_settings(settings)
    assert merged.url == "http://flag:9090"
    assert merged.selector == '{kafka_cluster="prod"}'
    assert MetricNames().with_overrides(merged.names).user_label == "u2"
