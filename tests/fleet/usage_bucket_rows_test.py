"""The usage schema's ``bucket`` column (``kqplan fleet usage`` writes a row per quota bucket Kafka
measured): a principal's row (bucket empty) reads as before on every engine; a row of a
``{user=U}`` or ``{client-id=C}`` bucket — all its members' usage together — is refused by every
engine with the same words (the Python reader, DuckDB, Spark), never read as one principal's
usage nor spread over members whose shares no metric shows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kqplan.core.entity import Entity
from kqplan.core.errors import KqplanError
from kqplan.fleet.columnar import impact_of_files
from kqplan.fleet.spark_usage import check, usage_frame
from kqplan.fleet.usage import read_usage
from kqplan.fleet.usage_schema import json_schema

FLEET = {"prod": ({}, {Entity.user(None): {"producer_byte_rate": 10.0}})}
USER_ROW = {"cluster": "prod", "user": "alice", "client_id": None, "bucket": "user", "ts": 60.0,
            "producer_byte_rate": 15.0}
CLIENT_ROW = {"cluster": "prod", "user": None, "client_id": "shared app", "bucket": "client-id",
              "ts": 60.0, "producer_byte_rate": 5.0}
PAIR_ROW = {"cluster": "prod", "user": "alice", "client_id": "a1", "bucket": None, "ts": 60.0,
            "producer_byte_rate": 5.0}


def _parquet(path: Path, rows: list[dict[str, Any]]) -> Path:
    names = list(PAIR_ROW)
    types = {"ts": pa.float64(), "producer_byte_rate": pa.float64()}
    pq.write_table(pa.table({n: pa.array([r[n] for r in rows], types.get(n, pa.string())) for n in names}),
                   path)
    return path


CASES = [
    ("user.parquet", lambda p: _parquet(p, [PAIR_ROW, USER_ROW]),
     "row 2: a row of the quota bucket {user=alice} (bucket user)"),
    ("client.parquet", lambda p: _parquet(p, [CLIENT_ROW]),
     "row 1: a row of the quota bucket {client-id=shared app} (bucket client-id)"),
    ("user.csv", lambda p: p.write_text("cluster,user,client_id,bucket,producer_byte_rate\n"
                                        "prod,alice,a1,,5\nprod,alice,,user,15\n"),
     "row 2: a row of the quota bucket {user=alice} (bucket user)"),
    ("client.jsonl", lambda p: p.write_text(json.dumps(CLIENT_ROW) + "\n"),
     "line 1: a row of the quota bucket {client-id=shared app} (bucket client-id)"),
    ("other.jsonl", lambda p: p.write_text(json.dumps({**PAIR_ROW, "bucket": "users"}) + "\n"),
     "line 1: bucket is not one of user, client-id (or empty): 'users'"),
]


def test_the_schema_ties_bucket_to_the_names():
    validator = jsonschema.Draft202012Validator(json_schema())
    for row in (USER_ROW, CLIENT_ROW, PAIR_ROW, {"cluster": "prod", "user": "alice"},
                {"cluster": "prod", "user": "alice", "client_id": "", "bucket": ""}):
        validator.validate(row)  # the rows of usage-v1 before the column stay valid
    for bad in ({**CLIENT_ROW, "user": "bob"}, {**CLIENT_ROW, "client_id": None},
                {**USER_ROW, "client_id": "a1"}, {**PAIR_ROW, "user": None}, {**PAIR_ROW, "bucket": "users"}):
        assert not validator.is_valid(bad), bad


def test_principal_rows_with_an_empty_bucket_read_as_before(tmp_path):
    path = _parquet(tmp_path / "u.parquet", [PAIR_ROW, {**PAIR_ROW, "client_id": "a2", "bucket": ""}])
    assert read_usage([path]).principals == {("prod", "alice", "a1"), ("prod", "alice", "a2")}
    impact = impact_of_files(FLEET, [path], None)
    assert {(r.client_id, r.after_group, r.after_group_usage) for r in impact.rows
            if r.key == "producer_byte_rate"} == {("a1", "{user=alice}", 10.0), ("a2", "{user=alice}", 10.0)}


@pytest.mark.parametrize(("name", "make", "expected"), CASES, ids=[c[0] for c in CASES])
def test_every_local_reader_refuses_a_bucket_row_alike(tmp_path, name, make, expected):
    path = tmp_path / name
    make(path)
    with pytest.raises(KqplanError) as python:
        read_usage([path])
    assert f"{path}: {expected}" in python.value.message
    assert python.value.hint is not None
    if "quota bucket" in expected:
        assert "{user=<default>, client-id=<default>}" in python.value.hint
    with pytest.raises(KqplanError) as duckdb:
        impact_of_files(FLEET, [path], None)
    assert (duckdb.value.message, duckdb.value.hint) == (python.value.message, python.value.hint)


@pytest.mark.parametrize(("name", "make", "expected"), CASES, ids=[c[0] for c in CASES])
def test_spark_refuses_a_bucket_row_as_the_python_reader_does(spark: Any, tmp_path: Path, name, make,
                                                             expected):
    path = tmp_path / name
    make(path)
    with pytest.raises(KqplanError) as python:
        read_usage([path])
    for frame in (lambda: usage_frame(spark, [path]),
                  lambda: check(usage_frame(spark, [path], checked=False))):
        with pytest.raises(KqplanError) as on_spark:
            frame()
        assert (on_spark.value.message, on_spark.value.hint) == (python.value.message, python.value.hint)


def test_spark_refuses_a_bucket_row_of_a_table(spark: Any):
    schema = ("cluster string, user string, client_id string, bucket string, ts double, "
              "producer_byte_rate double")
    rows = [(r["cluster"], r["user"], r["client_id"], r["bucket"], r["ts"], r["producer_byte_rate"])
            for r in (PAIR_ROW, USER_ROW)]
    spark.createDataFrame(rows, schema).createOrReplaceTempView("kq_bucket_rows")
    with pytest.raises(KqplanError) as refused:
        usage_frame(spark, [], ["kq_bucket_rows"])
    assert "table kq_bucket_rows: a row: a row of a quota bucket (bucket not empty)" in refused.value.message
    assert "{user=<default>, client-id=<default>}" in (refused.value.hint or "")
    spark.createDataFrame(rows[:1], schema).createOrReplaceTempView("kq_pair_rows")
    assert usage_frame(spark, [], ["kq_pair_rows"]).count() == 1
