"""The usage schema's ``bucket`` column (``kqplan fleet usage`` writes a row per quota bucket Kafka
measured): a principal's row (bucket empty) reads as before on every engine; a row of a
``{user=U}`` or ``{client-id=C}`` bucket — all its members' usage together — is refused by every
reader not asked to read it (``fleet rightsize``'s: the Python reader ``read_usage(paths)``, the
DuckDB reader ``register_usage(con, paths)``, Spark) with the same words, never read as one
principal's usage. ``fleet impact``'s local engine reads it as ``read_usage(paths,
buckets=True)`` does (tests/fleet/bucket_rows_local_test.py says what it makes of it), and
refuses in the same words a bucket value that is none, or a bucket's row whose names contradict
its kind."""

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
from kqplan.fleet.columnar_read import VIEW, refuse, register_usage
from kqplan.fleet.impact import impact_rows
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


def _parquet(path: Path, rows: list[dict[str, Any]], types: dict[str, Any] | None = None) -> Path:
    names = list(PAIR_ROW)
    types = {"ts": pa.float64(), "producer_byte_rate": pa.float64(), **(types or {})}
    pq.write_table(pa.table({n: pa.array([r[n] for r in rows], types.get(n, pa.string())) for n in names}),
                   path)
    return path


def _csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    names = list(PAIR_ROW)
    path.write_text(",".join(names) + "\n" + "".join(
        ",".join("" if r[n] is None else str(r[n]) for n in names) + "\n" for r in rows), encoding="utf-8")
    return path


def _refusal(run: Any) -> tuple[str, str | None]:
    with pytest.raises(KqplanError) as err:
        run()
    return err.value.message, err.value.hint


def _duckdb_reader(paths: list[Path], *, buckets: bool) -> None:
    """The DuckDB reader's verdict on ``paths``: the view, each file's first refused row, then
    :func:`refuse` (raises the Python reader's refusal, if any)."""
    import duckdb

    con = duckdb.connect()
    try:
        sources = register_usage(con, paths, buckets=buckets)
        first = con.execute(f"SELECT kq_file, min(kq_row) FILTER (WHERE kq_refused) FROM {VIEW} "
                            "WHERE kq_file IS NOT NULL GROUP BY kq_file").fetchall()
        refuse(sources, {name: row for name, row in first if row is not None})
    finally:
        con.close()


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
def test_every_local_reader_refuses_a_bucket_row_alike_unless_asked(tmp_path, name, make, expected):
    path = tmp_path / name
    make(path)
    python = _refusal(lambda: read_usage([path]))
    assert f"{path}: {expected}" in python[0]
    assert python[1] is not None
    if "quota bucket" in expected:
        assert "{user=<default>, client-id=<default>}" in python[1]
    assert _refusal(lambda: _duckdb_reader([path], buckets=False)) == python
    if "quota bucket" not in expected:  # no bucket: refused when bucket rows are read too
        assert _refusal(lambda: read_usage([path], buckets=True)) == python
        assert _refusal(lambda: impact_of_files(FLEET, [path], None)) == python
        return
    _duckdb_reader([path], buckets=True)
    impact = impact_of_files(FLEET, [path], None)
    assert impact == impact_rows(FLEET, read_usage([path], buckets=True), None)
    assert {r.bucket for r in impact.rows} >= {"user" if "user=" in expected else "client-id"}


def test_a_user_bucket_row_is_its_bucket_whole(tmp_path):
    """{user=<default>} 10: alice's bucket measured at 15 passes it, whatever her clients' shares."""
    path = _parquet(tmp_path / "u.parquet", [USER_ROW])
    [row] = [r for r in impact_of_files(FLEET, [path], None).rows if r.key == "producer_byte_rate"]
    assert (row.user, row.client_id, row.bucket, row.usage, row.after_source, row.after_group,
            row.after_group_usage, row.after_split, row.would_throttle) == (
        "alice", "", "user", 15.0, "{user=<default>}", "{user=alice}", 15.0, False, True)


BAD_BUCKET_ROWS = [
    ({**CLIENT_ROW, "user": "bob"},
     "row 1: a {client-id=C} bucket's row (bucket client-id) names no user: user is 'bob'"),
    ({**USER_ROW, "client_id": "a1"}, "row 1: a {user=U} bucket's row (bucket user) names no client_id: "
     "client_id is 'a1'"),
    ({**CLIENT_ROW, "client_id": ""}, "row 1: a {client-id=C} bucket's row (bucket client-id) names its "
     "client-id: client_id is empty"),
    ({**CLIENT_ROW, "client_id": None}, "row 1: a {client-id=C} bucket's row (bucket client-id) names its "
     "client-id: client_id is empty"),
    ({**USER_ROW, "user": None}, "row 1: cluster and user are required: user is"),
    ({**PAIR_ROW, "user": ""}, "row 1: cluster and user are required: user is empty"),
    ({**CLIENT_ROW, "user": "bob\ufffd"}, "row 1: a {client-id=C} bucket's row (bucket client-id) names no "
     "user"),
    ({**CLIENT_ROW, "client_id": "app\ufffd"}, "row 1: client_id holds U+FFFD"),
    ({**USER_ROW, "user": "al\ufffdce"}, "row 1: user holds U+FFFD"),
]


@pytest.mark.parametrize("suffix", ["parquet", "csv"])
@pytest.mark.parametrize(("row", "expected"), BAD_BUCKET_ROWS)
def test_a_bucket_row_whose_names_contradict_its_kind_is_refused_alike(tmp_path, suffix, row, expected):
    """By the Python reader and by DuckDB's own Parquet reading, after a good row of each kind."""
    path = tmp_path / f"u.{suffix}"
    good = [USER_ROW, CLIENT_ROW, PAIR_ROW]
    (_parquet if suffix == "parquet" else _csv)(path, [row, *good])
    python = _refusal(lambda: read_usage([path], buckets=True))
    assert python[0].startswith(f"{path}: {expected}"), python
    assert _refusal(lambda: impact_of_files(FLEET, [path], None)) == python
    (_parquet if suffix == "parquet" else _csv)(path, [*good, row])  # not the first row: DuckDB finds it
    python = _refusal(lambda: read_usage([path], buckets=True))
    assert python[0].startswith(f"{path}: {expected.replace('row 1', 'row 4')}"), python
    assert _refusal(lambda: impact_of_files(FLEET, [path], None)) == python


def test_a_file_of_client_id_buckets_has_no_user_at_all(tmp_path):
    """A Parquet user column all null (a null type): DuckDB reads it itself, as the Python reader."""
    path = _parquet(tmp_path / "u.parquet", [CLIENT_ROW, {**CLIENT_ROW, "client_id": "other"}],
                    {"user": pa.null()})
    assert pq.read_schema(path).field("user").type == pa.null()
    impact = impact_of_files(FLEET, [path], None)
    assert impact == impact_rows(FLEET, read_usage([path], buckets=True), None)
    assert {(r.user, r.client_id, r.bucket) for r in impact.rows} == {
        ("", "shared app", "client-id"), ("", "other", "client-id")}


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
