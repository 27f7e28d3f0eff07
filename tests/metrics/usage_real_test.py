"""``kqplan fleet usage`` on the real stack (tests/metrics/conftest.py: Kafka 4.3.1 with the JMX
exporter, Prometheus scraping it, real clients): each bucket Kafka measured becomes rows of the
bucket it is — alice's three clients one ``{user=alice}`` row per step, bob and carol one
``{client-id=shared app:v2}`` row, erin$ro's pair a principal's row (after the apply: the
scenario's quotas hold from then on)."""

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
    since = f"{math.floor(time.time() - (scenario.applied + 20))}s"  # Kafka's 11 s quota window passed
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
    # never spread over members: alice's pairs (before the apply, every bucket was a pair) only fade
    assert all((r["producer_byte_rate"] or 0) < 1000 for r in rows if r["user"] == "alice" and r["client_id"])
    alice = [r["producer_byte_rate"] for r in rows if r["user"] == "alice" and r["producer_byte_rate"]]
    assert max(alice) > 30_000  # 60 KB/s offered, held near the 40 KiB/s quota
    assert all(r["cluster"] == CLUSTER for r in rows)
