"""The Spark engine reads usage files itself (never through the driver's memory) with the local
reader's rules: the same samples from CSV, JSON lines and Parquet, the same refusals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kqplan.core.errors import KqplanError
from kqplan.fleet.impact import Sample, read_usage
from kqplan.fleet.spark import usage_frame


def write_usage(directory: Path) -> list[Path]:
    directory.mkdir()
    csv = directory / "a.csv"
    csv.write_text("cluster,user,client_id,producer_byte_rate,consumer_byte_rate,ts\n"
                   "prod,alice,app,100,,1\n"
                   "prod,alice,,250.5,7,2\n"            # an empty client-id: a client sending none
                   "prod,bob,batch,,,3\n")              # no sample at all
    jsonl = directory / "b.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in [
        {"cluster": "prod", "user": "carol", "client_id": None, "request_percentage": 12.5},
        {"cluster": "prod", "user": "carol", "client_id": "", "request_percentage": "13"},
        {"cluster": "dev", "user": "日本 x", "client_id": "c", "controller_mutation_rate": 2}]) + "\n")
    nested = directory / "more"
    nested.mkdir()
    pq.write_table(pa.table({"cluster": ["dev"], "user": ["dave"], "client_id": [None],
                             "producer_byte_rate": [1e9]}), nested / "c.parquet")
    return [directory]


def spark_samples(spark: Any, paths: list[Path]) -> list[Sample]:
    return sorted(Sample(*r) for r in usage_frame(spark, paths).collect())


def test_same_samples_as_the_local_reader(spark: Any, tmp_path: Path) -> None:
    paths = write_usage(tmp_path / "usage")
    local = sorted(read_usage(paths))
    assert len(local) == 7
    assert Sample("prod", "alice", "", "producer_byte_rate", 250.5) in local
    assert Sample("prod", "carol", "", "request_percentage", 12.5) in local
    assert spark_samples(spark, paths) == local


@pytest.mark.parametrize(("line", "message"), [
    ("prod,,app,100\n", "no cluster or user"),
    (",alice,app,100\n", "no cluster or user"),
    ("prod,alice,app,lots\n", "producer_byte_rate is not a number: 'lots'"),
])
def test_bad_rows_are_refused_naming_the_file(spark: Any, tmp_path: Path, line: str, message: str) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("cluster,user,client_id,producer_byte_rate\nprod,ok,app,1\n" + line)
    with pytest.raises(KqplanError, match=message) as err:
        usage_frame(spark, [bad])
    assert str(bad) in err.value.message
    with pytest.raises(KqplanError):  # the local reader refuses the same file
        read_usage([bad])
