"""Where the metrics are, in kqplan.toml (issue 30 item 1): ``[metrics]`` for every cluster and
``[clusters.NAME.metrics]`` over it (``{cluster}`` in a selector is the inventory name); the flags
win over both."""

from __future__ import annotations

from pathlib import Path

from kqplan.config.find import load_config
from kqplan.core.diagnostics import DiagnosticsError
from tests.helpers import fleet_cli
from tests.metrics.server import serve
from tests.metrics.usage_test import _script

TOML = '''[metrics]
prometheus = "{url}"
selector = '{{kafka_cluster="{{cluster}}"}}'
headers-file = "prometheus.headers"

[clusters.east]
snapshot = "east.json"

[clusters.west]
snapshot = "west.json"

[clusters.west.metrics]
selector = '{{env="w"}}'
'''


def test_cluster_metrics_over_the_shared_table(tmp_path):
    (tmp_path / "kqplan.toml").write_text(TOML.format(url="http://prometheus:9090"))
    config = load_config(tmp_path / "kqplan.toml")
    east, west = config.clusters["east"].metrics, config.clusters["west"].metrics
    assert (east.prometheus, east.selector) == ("http://prometheus:9090", '{kafka_cluster="{cluster}"}')
    assert (west.prometheus, west.selector) == ("http://prometheus:9090", '{env="w"}')
    assert east.headers_file == (tmp_path / "prometheus.headers").resolve()


def test_a_wrong_metrics_value_is_located(tmp_path):
    (tmp_path / "kqplan.toml").write_text(
        '[metrics]\nprometheus = 9090\n[clusters.a.metrics]\nselectr = "x"\n')
    try:
        load_config(tmp_path / "kqplan.toml")
    except DiagnosticsError as exc:
        text = "\n".join(d.message for d in exc.diagnostics)
    else:
        raise AssertionError("accepted")
    assert "metrics.prometheus: must be the Prometheus base URL in quotes" in text
    assert "unknown key 'selectr'" in text


def test_fleet_usage_reads_where_the_metrics_are_from_the_inventory(tmp_path: Path):
    with serve(_script) as served:
        (tmp_path / "kqplan.toml").write_text(TOML.format(url=served.url).replace(
            'headers-file = "prometheus.headers"\n', ""))
        result = fleet_cli(tmp_path, "usage", "--since", "1m", "--out", tmp_path / "out")
    assert result.exit_code == 0, result.stdout + result.stderr
    asked = {r.params["query"].split("Produce\",")[1].split("}")[0] for r in served.requests
             if 'resource="Produce"' in r.params.get("query", "")}
    assert asked == {'kafka_cluster="east"', 'env="w"'}
