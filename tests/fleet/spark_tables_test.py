"""Tables Spark writes itself (``--out`` a URI): the same rows as the local engine's files, display
forms spelled by the core (odd names included), the same summaries and chart bins — computed by
aggregations, never by collecting the rows."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kqplan.core.entity import Entity
from kqplan.fleet.impact import UnusedRow, impact_rows, summarize
from kqplan.fleet.spark_tables import _bins, write_impact
from kqplan.fleet.spark_usage import samples_frame
from kqplan.fleet.tables import BINS, CAP, histogram
from kqplan.fleet.usage import USAGE_KEYS, Sample, Usage, parse_stat
from tests.helpers import fleet_cli

users = st.sampled_from(["alice", "bob", "日本", "<default>", "\\x", "tab\there", "a\u202eb"])
clients = st.sampled_from(["app", "shared", "", "<default>", "\\y"])
entities = st.one_of(st.builds(Entity.user, st.one_of(st.none(), users)),
                     st.builds(Entity.client, st.one_of(st.none(), clients.filter(bool))),
                     st.builds(Entity.user_client, st.one_of(st.none(), users),
                               st.one_of(st.none(), clients.filter(bool))))
quotas = st.dictionaries(st.sampled_from(USAGE_KEYS), st.sampled_from([10.0, 100.0, 1e3]),
                         min_size=1, max_size=2)
states = st.dictionaries(entities, quotas, max_size=5)
samples = st.lists(st.builds(Sample, st.sampled_from(["c", "d"]), users, clients, st.sampled_from(USAGE_KEYS),
                             st.sampled_from([1.0, 50.0, 500.0, 5000.0]), st.sampled_from([0.0, 30.0, 61.0])),
                   min_size=1, max_size=20)


def close(a: object, b: object) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isclose(a, b, rel_tol=1e-9))


def rows_of(path: Path) -> list[tuple[Any, ...]]:
    table = pq.read_table(path).to_pylist()
    return sorted(tuple(r.values()) for r in table)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(["c", "d"]), st.tuples(states, states), min_size=1), samples,
       st.sampled_from(["max", "p99"]))
def test_spark_writes_the_local_engines_tables_and_summaries(spark, tmp_path_factory, fleet, usage, stat):
    q = parse_stat(stat)
    out = tmp_path_factory.mktemp("out")
    observed = Usage.of(usage)
    local = impact_rows(fleet, observed, q)
    summary, histograms = write_impact(spark, fleet, samples_frame(spark, observed), q, out=out.as_uri())
    written = rows_of(out / "impact.parquet")
    expected = sorted(tuple(r) for r in local.rows)
    assert len(written) == len(expected)
    for a, b in zip(written, expected, strict=True):
        assert all(close(x, y) for x, y in zip(a, b, strict=True)), (a, b)
    assert sorted(UnusedRow(*r) for r in rows_of(out / "unused.parquet")) == local.unused
    buckets = rows_of(out / "buckets.parquet")
    assert len(buckets) == len(local.buckets)
    for c, d in zip(buckets, sorted(tuple(b) for b in local.buckets),
                    strict=True):
        assert all(close(x, y) for x, y in zip(c, d, strict=True)), (c, d)
    assert summary == summarize(local, fleet)
    for cluster in fleet:
        data = histogram([r for r in local.rows if r.cluster == cluster])
        assert histograms.get(cluster) == data


def test_chart_bins_are_numpys(spark):
    edges = np.histogram_bin_edges([], bins=BINS, range=(0.0, CAP))
    values = [-1.0, 0.0, 0.5, 1.0, 2.0, 7.0, math.nextafter(1.0, 0)]
    values += [float(e) for e in edges] + [math.nextafter(e, -1) for e in edges]
    values += [math.nextafter(e, 9) for e in edges]
    frame = spark.createDataFrame([(v,) for v in values], "v double")
    got = [r[0] for r in frame.select(_bins(frame["v"])).collect()]
    for value, bin_ in zip(values, got, strict=True):
        counts, _ = np.histogram(np.clip([value], 0.0, CAP), bins=BINS, range=(0.0, CAP))
        assert counts[bin_] == 1, (value, bin_)


@pytest.fixture
def offline(tmp_path: Path) -> Path:
    from kqplan.snapshot.file import write_snapshot
    from tests.helpers import write_manifest

    write_snapshot(tmp_path / "c.json", {Entity.user("alice"): {"producer_byte_rate": 20e6},
                                         Entity.user("gone"): {"producer_byte_rate": 1e6}}, "c-id")
    write_manifest(tmp_path / "m" / "q.yaml", "ownership: {prune: true, scope: [{user: 'g*'}]}\n"
                   "entities:\n  - user: alice\n    quotas: {producer_byte_rate: 12MB}\n")
    (tmp_path / "kqplan.toml").write_text(
        '[clusters.c]\nid = "c-id"\nsnapshot = "c.json"\nmanifests = ["m"]\n')
    rows = "".join(f"c,alice,a{i},5000000,{t}\n" for i in (1, 2, 3) for t in (0, 30))
    (tmp_path / "u.csv").write_text("cluster,user,client_id,producer_byte_rate,ts\n" + rows)
    return tmp_path


def test_impact_and_plan_write_to_a_uri(spark, offline):
    target = (offline / "remote").as_uri()
    local = fleet_cli(offline, "impact", "--usage", offline / "u.csv", "--out", offline / "local", "--format",
                      "json")
    remote = fleet_cli(offline, "impact", "--usage", offline / "u.csv", "--out", target, "--engine", "spark",
                       "--format", "json")
    assert (local.exit_code, remote.exit_code) == (0, 0), remote.stderr
    assert remote.json["clusters"] == local.json["clusters"]
    assert remote.json["clusters"]["c"]["newly_throttled"] == [
        {"bucket": "{user=alice}", "key": "producer_byte_rate", "members": 3, "usage": 15e6, "quota": 12e6}]
    assert remote.json["charts"] == []
    assert "charts are drawn only into a local --out directory" in remote.stderr
    for table in ("impact.parquet", "unused.parquet"):
        assert (offline / "remote" / table).is_dir()  # Spark's: a directory of parts
        assert rows_of(offline / "remote" / table) == rows_of(offline / "local" / table)
    plan_local = fleet_cli(offline, "plan", "--out", offline / "local")
    plan_remote = fleet_cli(offline, "plan", "--out", target, "--engine", "spark")
    assert (plan_local.exit_code, plan_remote.exit_code) == (0, 0), plan_remote.stderr
    assert plan_remote.stdout == plan_local.stdout
    assert "2 changed keys" in plan_local.stdout
    assert rows_of(offline / "remote" / "changes.parquet") == rows_of(offline / "local" / "changes.parquet")
    refused = fleet_cli(offline, "impact", "--usage", offline / "u.csv", "--out", "s3a://b/x")
    assert refused.exit_code == 1
    assert refused.stderr.startswith("Error: --out s3a://b/x: the local engine writes local files")
    rightsize = fleet_cli(offline, "rightsize", "--usage", offline / "u.csv", "--out", "s3a://b/x")
    assert rightsize.exit_code == 1
    assert "rightsize writes manifests to review, into a local directory" in rightsize.stderr
