"""Hostile usage files on the Spark engine (issue 29), a representative subset (each case costs a
Spark job): Spark refuses what the Python reader refuses, in the same words — the file, the row
(or line) and the column — where it used to accept negative rates, bytes as rates, names that are
no text and JSON lines that are lists, and read a non-UTF-8 CSV file with replacement characters."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kqplan.core.errors import KqplanError
from kqplan.fleet.spark_usage import check, usage_frame
from kqplan.fleet.usage import Sample, read_usage
from tests.fleet.usage_frame_test import spark_usage

CASES: list[tuple[str, Any, str]] = [
    ("neg.csv", "cluster,user,producer_byte_rate\nc,u,1\nc,v,-5\n",
     "row 2: producer_byte_rate is negative: '-5'"),
    ("nan.csv", "cluster,user,producer_byte_rate\nc,u,NaN\n",
     "row 1: producer_byte_rate is not a number: 'NaN'"),
    ("latin.csv", "cluster,user\nc,ok\nc,caf\xe9\n".encode("latin-1"), "line 3: not UTF-8"),
    ("neg.jsonl", '{"cluster": "c", "user": "u"}\n\n'
     '{"cluster": "c", "user": "u", "consumer_byte_rate": -1}\n',
     "line 3: consumer_byte_rate is negative: -1"),
    ("list.jsonl", '{"cluster": "c", "user": "u"}\n[{"cluster": "c", "user": "u"}]\n',
     "line 2: not a JSON object (a list)"),
    ("number.jsonl", "5\n", "line 1: not a JSON object (a number)"),
    ("nan.jsonl", '{"cluster": "c", "user": "u", "producer_byte_rate": NaN}\n',
     "line 1: producer_byte_rate is not a number: nan"),
    ("true.jsonl", '{"cluster": "c", "user": "u", "producer_byte_rate": true}\n',
     "line 1: producer_byte_rate is not a number: True"),
    ("object.jsonl", '{"cluster": "c", "user": "u", "request_percentage": {"a": 1}}\n',
     "line 1: request_percentage is not a number: {'a': 1}"),
    ("cluster.jsonl", '{"cluster": 5, "user": "u"}\n', "line 1: cluster is not text: 5"),
    ("client.jsonl", '{"cluster": "c", "user": "u", "client_id": true}\n',
     "line 1: client_id is not text: True"),
    ("bytes.parquet", {"producer_byte_rate": pa.array([None, b"1"], pa.binary())},
     "row 2: producer_byte_rate is not a number: b'1'"),
    ("neg.parquet", {"producer_byte_rate": pa.array([1, -7], pa.int64())},
     "row 2: producer_byte_rate is negative: -7"),
    ("nan.parquet", {"producer_byte_rate": [1.0, float("nan")]},
     "row 2: producer_byte_rate is not a number: nan"),
    ("int-user.parquet", {"user": [1, 2]}, "row 1: user is not text: 1"),
    ("nohead.csv", "c,u,5\n", "line 1: the header has no cluster column: c,u,5"),
    ("empty.parquet", b"", "not a Parquet file"),
]


def write(path: Path, content: Any) -> None:
    if isinstance(content, dict):
        pq.write_table(pa.table({"cluster": ["c", "c"], "user": ["u", "v"], **content}), path)
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)


@pytest.mark.parametrize(("name", "content", "expected"), CASES, ids=[c[0] for c in CASES])
def test_spark_refuses_as_the_python_reader_does(spark: Any, tmp_path: Path, name: str, content: Any,
                                                 expected: str) -> None:
    usage = tmp_path / "usage"
    usage.mkdir()
    (usage / "a-good.csv").write_text("cluster,user,producer_byte_rate\nc,ok,1\n")
    write(usage / name, content)
    with pytest.raises(KqplanError) as local:
        read_usage([usage])
    assert f"{usage / name}: {expected}" in local.value.message
    with pytest.raises(KqplanError) as on_spark:
        usage_frame(spark, [usage])
    assert (on_spark.value.message, on_spark.value.hint) == (local.value.message, local.value.hint)
    with pytest.raises(KqplanError) as on_spark:  # as the impact job checks it, while it aggregates
        check(usage_frame(spark, [usage], checked=False))
    assert (on_spark.value.message, on_spark.value.hint) == (local.value.message, local.value.hint)


def test_a_bom_and_typed_json_values_read_alike(spark: Any, tmp_path: Path) -> None:
    usage = tmp_path / "usage"
    usage.mkdir()
    (usage / "bom.csv").write_bytes(b"\xef\xbb\xbfcluster,user,client_id,producer_byte_rate\nc,u,app,5\n")
    (usage / "b.jsonl").write_text("\n".join(json.dumps(r) for r in [
        {"cluster": "c", "user": "j", "client_id": 42, "consumer_byte_rate": "7", "ts": 1764000000},
        {"cluster": "c", "user": "k", "client_id": None, "request_percentage": 0, "ts": "2026-11-22"},
        {"cluster": "c", "user": "k", "producer_byte_rate": 10**30, "ts": None}]) + "\n")
    local = read_usage([usage])
    assert Sample("c", "u", "app", "producer_byte_rate", 5.0) in local.samples
    assert Sample("c", "j", "42", "consumer_byte_rate", 7.0, 1764000000.0) in local.samples
    on_spark = spark_usage(spark, [usage])
    assert sorted(on_spark.samples, key=Sample.sort_key) == sorted(local.samples, key=Sample.sort_key)
    assert on_spark.principals == local.principals
