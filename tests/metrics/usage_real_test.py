"""``kqplan fleet usage`` on the real stack (tests/metrics/conftest.py: Kafka 4.3.1 with the JMX
exporter, Prometheus scraping it, real clients): each bucket Kafka measured becomes rows of the
bucket it is — alice's three clients one ``{user=alice}`` row per step, bob and carol one
``{client-id=shared app:v2}`` row, erin$ro's pair a principal's row — and ``fleet impact``
refuses the bucket rows rather than guessing how a bucket splits."""

from __future__ import annotations

import math
import time

import jsonschema
import pyarrow.parquet as pq

import kqplan.cli.fleet  # noqa: F401  (registers the command, whatever kqplan.cli.main lists)
from kqplan.fleet.usage_schema import json_schema
from tests.helpers import fleet_cli
from tests.metrics.scenario import CLUSTER, SHARED, Scenario


def test_fleet_usage_writes_each_bucket_as_kafka_measured_it(scenario: Scenario, tmp_path):
    root = tmp_path
    (root / "kqplan.toml").write_text(f'[clusters.{CLUSTER}]\nsnapshot = "none.json"\n')
    since = f"{math.ceil(time.time() - scenario.start) + 5}s"
    result = fleet_cli(root, "usage", "--prometheus", scenario.stack.prometheus.url,
                       "--selector", '{kafka_cluster="{cluster}"}', "--since", since, "--step", "1s",
                       "--out", tmp_path / "usage")
    assert result.exit_code == 0, result.stdout + result.stderr
    rows = pq.read_table(tmp_path / "usage" / f"{CLUSTER}.parquet").to_pylist()
    validator = jsonschema.Draft202012Validator(json_schema())
    for row in rows:
        validator.validate(row)
    by = {(r["user"], r["client_id"], r["bucket"]) for r in rows}
    assert ("alice", None, "user") in by  # three clients, one sensor
    assert (None, SHARED, "client-id") in by  # two users, one sensor; JMX's quotes undone
    assert ("erin$ro", "reader-1", None) in by  # a pair: a principal's own usage; %24 decoded
    assert not any(r["user"] == "alice" and r["client_id"] for r in rows)  # never spread over members
    alice = [r["producer_byte_rate"] for r in rows if r["user"] == "alice" and r["producer_byte_rate"]]
    assert max(alice) > 30_000  # 60 KB/s offered, held near the 40 KiB/s quota
    assert all(r["cluster"] == CLUSTER for r in rows)

    impact = fleet_cli(root, "impact", "--usage", tmp_path / "usage", "--out", tmp_path / "impact")
    assert impact.exit_code == 1
    assert "a row of the quota bucket" in impact.stderr
    assert "{user=<default>, client-id=<default>}" in impact.stderr
    assert "Traceback" not in impact.stderr
