"""The Spark engine reads usage files itself (never through the driver's memory) with the local
reader's rules: the same samples from CSV, JSON lines and Parquet, the same refusals."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kqplan.core.errors import KqplanError
from kqplan.fleet.spark_usage import samples_of, usage_frame
from kqplan.fleet.usage import Sample, Usage, read_usage


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


def spark_usage(spark: Any, paths: list[Path]) -> Usage:
    rows = samples_of(usage_frame(spark, paths)).collect()
    return Usage([Sample(*r) for r in rows if r["value"] is not None],
                 frozenset((r["cluster"], r["user"], r["client_id"]) for r in rows))


def test_same_samples_as_the_local_reader(spark: Any, tmp_path: Path) -> None:
    paths = write_usage(tmp_path / "usage")
    local = read_usage(paths)
    assert len(local.samples) == 7
    assert Sample("prod", "alice", "", "producer_byte_rate", 250.5, 2.0) in local.samples
    assert Sample("prod", "carol", "", "request_percentage", 12.5) in local.samples
    assert ("prod", "bob", "batch") in local.principals  # a row without any rate: observed all the same
    on_spark = spark_usage(spark, paths)
    assert sorted(on_spark.samples, key=Sample.sort_key) == sorted(local.samples, key=Sample.sort_key)
    assert on_spark.principals == local.principals


TIMES = ["1764000000", "1764000000.25", "1.764e9", "2026-11-22T10:00:00Z", "2026-11-22 10:00:00",
         "2026-11-22T10:00:00.123456+02:00", "2026-11-22T10:00:00-05:30", "2026-11-22", ""]


def test_ts_forms_read_alike_by_both_engines(spark: Any, tmp_path: Path) -> None:
    directory = tmp_path / "usage"
    directory.mkdir()
    (directory / "a.csv").write_text("cluster,user,client_id,ts,producer_byte_rate\n" + "".join(
        f"c,u{i},x,{ts},1\n" for i, ts in enumerate(TIMES)))
    (directory / "b.jsonl").write_text("\n".join(json.dumps(r) for r in [
        {"cluster": "c", "user": "j1", "ts": 1764000000, "producer_byte_rate": 1},
        {"cluster": "c", "user": "j2", "ts": "2026-11-22T10:00:00Z", "producer_byte_rate": 1}]) + "\n")
    naive = dt.datetime(2026, 11, 22, 10)
    pq.write_table(pa.table({"cluster": ["c", "c"], "user": ["p1", "p2"], "ts": [naive, naive],
                             "producer_byte_rate": [1.0, 1.0]}), directory / "naive.parquet")
    pq.write_table(pa.table({"cluster": ["c"], "user": ["p3"], "producer_byte_rate": [1.0],
                             "ts": pa.array([naive.replace(tzinfo=dt.UTC)], pa.timestamp("us", tz="UTC"))}),
                   directory / "aware.parquet")
    pq.write_table(pa.table({"cluster": ["c"], "user": ["p4"], "ts": [1764000000.5],
                             "producer_byte_rate": [1.0]}), directory / "number.parquet")
    local = {s.user: s.ts for s in read_usage([directory]).samples}
    ten = dt.datetime(2026, 11, 22, 10, tzinfo=dt.UTC).timestamp()
    assert local == {"u0": 1764000000.0, "u1": 1764000000.25, "u2": 1.764e9, "u3": ten, "u4": ten,
                     "u5": ten - 7200 + 0.123456, "u6": ten + 5.5 * 3600, "u7": ten - 10 * 3600, "u8": None,
                     "j1": 1764000000.0, "j2": ten, "p1": ten, "p2": ten, "p3": ten, "p4": 1764000000.5}
    assert {s.user: s.ts for s in spark_usage(spark, [directory]).samples} == local


@pytest.mark.parametrize("ts", ["yesterday", "2026-11-22T10:00", "22/11/2026", "2026-11-22T10:00:00 UTC"])
def test_a_ts_that_is_no_time_is_refused_by_both(spark: Any, tmp_path: Path, ts: str) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(f"cluster,user,client_id,ts,producer_byte_rate\nc,u,x,{ts},1\n")
    with pytest.raises(KqplanError, match="ts is not a time") as err:
        usage_frame(spark, [bad])
    assert str(bad) in err.value.message
    with pytest.raises(KqplanError, match="ts is not a time"):
        read_usage([bad])


@pytest.mark.parametrize(("line", "message"), [
    ("prod,,app,100\n", "row 2: cluster and user are required: user is empty"),
    (",alice,app,100\n", "row 2: cluster and user are required: cluster is empty"),
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


def test_a_path_spark_cannot_see_is_named_with_the_fix(spark: Any, tmp_path: Path, monkeypatch) -> None:
    """What a Spark Connect server on another machine answers for a path only the driver sees."""
    import kqplan.fleet.spark_usage as engine

    gone = tmp_path / "gone.jsonl"
    monkeypatch.setattr(engine, "usage_files", lambda paths: iter([gone]))
    with pytest.raises(KqplanError, match=r"Spark found no file at file:.*gone\.jsonl: the Spark engine "
                                          r"reads --usage itself") as err:
        usage_frame(spark, [gone])
    assert "shared filesystem" in (err.value.hint or "")


def test_csv_files_with_different_headers_are_read_by_name(spark: Any, tmp_path: Path) -> None:
    """Spark reads CSV files together by column position: files with other headers (older exports
    without ts) are read apart, so both engines see the same samples."""
    directory = tmp_path / "usage"
    directory.mkdir()
    (directory / "a.csv").write_text("cluster,user,client_id,producer_byte_rate\nc,x,app,5\n")
    (directory / "b.csv").write_text("cluster,user,client_id,ts,producer_byte_rate\nc,y,app,60,7\n")
    (directory / "c.csv").write_text("user,cluster,producer_byte_rate,client_id\nz,c,9,app\n")
    local = read_usage([directory])
    assert sorted((s.user, s.value, s.ts) for s in local.samples) == [("x", 5.0, None), ("y", 7.0, 60.0),
                                                                      ("z", 9.0, None)]
    on_spark = spark_usage(spark, [directory])
    assert sorted(on_spark.samples, key=Sample.sort_key) == sorted(local.samples, key=Sample.sort_key)


@pytest.mark.parametrize(("column", "cell", "message"), [
    ("ts", "1e400", "ts is not a time"), ("ts", "1e20", "ts is not a time"),
    ("ts", "1764000000000", "ts is not a time"),  # milliseconds, not seconds
    ("producer_byte_rate", "1_000", "is not a number"), ("producer_byte_rate", "5d", "is not a number"),
    ("producer_byte_rate", "nan", "is not a number"), ("producer_byte_rate", "-inf", "is not a number"),
    ("producer_byte_rate", " 12", "is not a number"),
])
def test_cells_are_judged_alike_by_both_engines(spark: Any, tmp_path: Path, column: str, cell: str,
                                                message: str) -> None:
    bad = tmp_path / "bad.csv"
    values = {"ts": "1", "producer_byte_rate": "1", column: cell}
    bad.write_text(f"cluster,user,client_id,ts,producer_byte_rate\nc,u,x,{values['ts']},"
                   f"{values['producer_byte_rate']}\n")
    with pytest.raises(KqplanError, match=message):
        usage_frame(spark, [bad])
    with pytest.raises(KqplanError, match=message):
        read_usage([bad])


@pytest.mark.parametrize(("name", "table"), [
    ("nan-ts", {"ts": [float("nan")]}), ("inf-ts", {"ts": [float("inf")]}),
    ("bool-rate", {"ts": [1.0], "producer_byte_rate": [True]}),
])
def test_parquet_cells_that_are_no_number_or_time_are_refused_by_both(spark: Any, tmp_path: Path, name: str,
                                                                      table: dict[str, Any]) -> None:
    bad = tmp_path / f"{name}.parquet"
    pq.write_table(pa.table({"cluster": ["c"], "user": ["u"], "producer_byte_rate": [1.0], **table}), bad)
    with pytest.raises(KqplanError, match=r"is not a (time|number)"):
        usage_frame(spark, [bad])
    with pytest.raises(KqplanError, match=r"is not a (time|number)"):
        read_usage([bad])


def test_json_numbers_beyond_a_double_and_lines_that_are_no_object(spark: Any, tmp_path: Path) -> None:
    huge = tmp_path / "huge.jsonl"
    huge.write_text('{"cluster": "c", "user": "u", "ts": 1' + "0" * 400 + ', "producer_byte_rate": 1}\n')
    with pytest.raises(KqplanError, match="ts is not a time"):
        usage_frame(spark, [huge])
    with pytest.raises(KqplanError, match="ts is not a time"):
        read_usage([huge])
    listed = tmp_path / "list.jsonl"
    listed.write_text("[1, 2]\n")
    with pytest.raises(KqplanError, match=r"list\.jsonl: line 1: not a JSON object"):
        read_usage([listed])


def test_nanosecond_parquet_timestamps_read_alike(spark: Any, tmp_path: Path) -> None:
    """pandas writes nanoseconds by default; Spark reads them only as a count."""
    directory = tmp_path / "usage"
    directory.mkdir()
    when = pa.array([1_764_000_000_123_456_789], pa.timestamp("ns"))
    pq.write_table(pa.table({"cluster": ["c"], "user": ["naive"], "producer_byte_rate": [1.0], "ts": when}),
                   directory / "naive.parquet")
    pq.write_table(pa.table({"cluster": ["c"], "user": ["aware"], "producer_byte_rate": [1.0],
                             "ts": when.cast(pa.timestamp("ns", tz="UTC"))}), directory / "aware.parquet")
    local = {s.user: s.ts for s in read_usage([directory]).samples}
    assert local == pytest.approx({"naive": 1_764_000_000.123457, "aware": 1_764_000_000.123457})
    assert {s.user: s.ts for s in spark_usage(spark, [directory]).samples} == pytest.approx(local)
