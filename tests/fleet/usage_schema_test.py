"""Fleet inputs as strict as manifests (issue 32): the usage sample's columns are written once
(:mod:`kqplan.fleet.usage_schema`, checked in as ``schemas/usage-v1.json``), and a usage file whose
columns are not those — ``client-id`` for ``client_id``, ``producer_bytes``, a missing ``user`` —
is a located error with the closest name, from the Python reader, the local engine (DuckDB) and
the command line alike; never "every client merged into its user, producer usage null"."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kqplan.core.entity import Entity
from kqplan.core.errors import KqplanError
from kqplan.fleet import columnar_read, spark_usage
from kqplan.fleet.columnar import impact_of_files
from kqplan.fleet.usage import USAGE_KEYS, read_usage
from kqplan.fleet.usage_schema import NAMES, REQUIRED, SCHEMA_FILE, column_problem, json_schema
from kqplan.snapshot.file import write_snapshot
from tests.helpers import REPO, fleet_cli, write_manifest

FLEET = {"prod": ({}, {Entity.user(None): {"producer_byte_rate": 10.0}})}


def test_the_checked_in_schema_is_the_one_python_definition():
    checked_in = json.loads((REPO / SCHEMA_FILE).read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(checked_in)
    assert checked_in == json_schema(), (
        f"{SCHEMA_FILE} is stale: write json.dumps(kqplan.fleet.usage_schema.json_schema(), indent=2)")
    assert list(checked_in["properties"]) == list(NAMES)
    assert checked_in["required"] == list(REQUIRED) == ["cluster", "user"]


def test_every_engine_takes_its_columns_from_the_schema():
    assert columnar_read.COLUMNS == NAMES
    assert ("cluster", "user", "client_id", "bucket", "ts", *USAGE_KEYS) == NAMES
    assert spark_usage.NAMES is NAMES


def test_rows_the_readers_take_are_rows_the_schema_takes(tmp_path):
    validator = jsonschema.Draft202012Validator(json_schema())
    rows = [{"cluster": "prod", "user": "orders", "client_id": "checkout", "ts": "2026-11-22T10:00:00Z",
             "producer_byte_rate": 2400000, "request_percentage": "12.5"},
            {"cluster": "prod", "user": "orders", "client_id": 42, "ts": 1764000000,
             "consumer_byte_rate": None},
            {"cluster": "prod", "user": "orders", "client_id": None, "ts": "", "producer_byte_rate": ""}]
    (tmp_path / "u.jsonl").write_text("\n".join(map(json.dumps, rows)) + "\n")
    assert len(read_usage([tmp_path / "u.jsonl"]).principals) == 3
    for row in rows:
        validator.validate(row)
    for bad in ({"cluster": "prod", "user": "orders", "client-id": "x"}, {"cluster": "prod"},
                {"cluster": "prod", "user": "orders", "producer_byte_rate": -1}):
        assert not validator.is_valid(bad)


@pytest.mark.parametrize(("names", "problem"), [
    (["cluster", "user", "client-id", "ts", "producer_bytes"],
     "unknown columns 'client-id' (did you mean 'client_id'?), 'producer_bytes' (did you mean "
     "'producer_byte_rate'?)"),
    (["cluster", "usr", "producer_byte_rate"], "no user column (is 'usr' meant to be user?)"),
    (["cluster", "user", "Producer_Byte_Rate"], "unknown column 'Producer_Byte_Rate' (did you mean "
     "'producer_byte_rate'?)"),
    (["cluster", "user", "filename"], "unknown column 'filename'"),
    (["cluster", "user", *USAGE_KEYS], None),
])
def test_column_problems_name_the_closest_column(names, problem):
    assert column_problem(names) == problem


def refused(paths: list[Path]) -> str:
    """The Python reader's refusal, checked equal to the local engine's."""
    found = []
    for run in (lambda: read_usage(paths), lambda: impact_of_files(FLEET, paths, None)):
        with pytest.raises(KqplanError) as err:
            run()
        found.append(f"{err.value.message} | {err.value.hint}")
    assert found[0] == found[1]
    return found[0]


BAD_FILES = [
    ("u.csv", "cluster,user,client-id,ts,producer_bytes\nprod,orders,checkout,1,2400000\n",
     "u.csv: line 1: unknown columns 'client-id' (did you mean 'client_id'?), 'producer_bytes' (did you mean "
     "'producer_byte_rate'?)"),
    ("u.jsonl", '{"cluster": "prod", "user": "orders", "client_id": "a"}\n'
     '{"cluster": "prod", "user": "orders", "client-id": "checkout"}\n',
     "u.jsonl: line 2: unknown column 'client-id' (did you mean 'client_id'?)"),
    ("case.parquet", {"cluster": ["prod"], "user": ["orders"], "Producer_Byte_Rate": [5.0]},
     "case.parquet: unknown column 'Producer_Byte_Rate' (did you mean 'producer_byte_rate'?)"),
    ("virtual.parquet", {"cluster": ["prod"], "user": ["orders"], "filename": ["x"]},
     "virtual.parquet: unknown column 'filename'"),
    ("usr.parquet", {"cluster": ["prod"], "usr": ["orders"]},
     "usr.parquet: no user column (is 'usr' meant to be user?)"),
]


def write(path: Path, content: str | dict) -> None:
    if isinstance(content, dict):
        pq.write_table(pa.table(content), path)
    else:
        path.write_text(content)


@pytest.mark.parametrize(("name", "content", "expected"), BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_a_file_with_other_columns_is_refused_alike_by_both_local_readers(tmp_path, name, content, expected):
    (tmp_path / "a-good.csv").write_text("cluster,user,producer_byte_rate\nprod,ok,1\n")
    write(tmp_path / name, content)
    message = refused([tmp_path])
    assert f"{tmp_path / expected} | " in message
    assert SCHEMA_FILE in message  # the hint names the schema


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write_snapshot(tmp_path / "prod.json", {Entity.user("orders"): {"producer_byte_rate": 1048576.0}}, "p")
    write_manifest(tmp_path / "m" / "q.yaml",
                   "entities:\n  - user: orders\n    quotas: {producer_byte_rate: 1MiB}\n")
    (tmp_path / "kqplan.toml").write_text(
        '[clusters.prod]\nid = "p"\nsnapshot = "prod.json"\nmanifests = ["m"]\n')
    return tmp_path


@pytest.mark.parametrize("command", ["impact", "rightsize"])
def test_the_issue_s_csv_exits_1_with_the_did_you_mean(project, command):
    """The issue: a header saying client-id and producer_bytes was read with exit 0, every client
    merged into its user and the producer usage null."""
    usage = project / "usage.csv"
    usage.write_text("cluster,user,client-id,ts,producer_bytes\nprod,orders,checkout,1,2400000\n"
                     "prod,orders,other,1,2400000\n")
    result = fleet_cli(project, command, "--usage", usage, "--out", project / "out")
    assert result.exit_code == 1, result.stdout
    assert result.stderr.startswith(f"Error: {usage}: line 1: unknown columns 'client-id' (did you mean "
                                    "'client_id'?), 'producer_bytes' (did you mean 'producer_byte_rate'?)\n")
    assert "Traceback" not in result.stderr
    assert not (project / "out" / "impact.parquet").exists()


@pytest.mark.parametrize(("name", "content", "expected"), BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_spark_refuses_them_in_the_same_words(spark, tmp_path, name, content, expected):
    (tmp_path / "a-good.csv").write_text("cluster,user,producer_byte_rate\nprod,ok,1\n")
    write(tmp_path / name, content)
    local = refused([tmp_path])
    with pytest.raises(KqplanError) as on_spark:
        spark_usage.usage_frame(spark, [tmp_path])
    assert f"{on_spark.value.message} | {on_spark.value.hint}" == local
    with pytest.raises(KqplanError) as on_spark:  # as the jobs check it, while they aggregate
        spark_usage.check(spark_usage.usage_frame(spark, [tmp_path], checked=False))
    assert f"{on_spark.value.message} | {on_spark.value.hint}" == local


def test_spark_checks_the_columns_of_uris_and_tables(spark, tmp_path):
    """What Spark lists and reads itself: a CSV or Parquet URI by its columns, a JSON lines URI line
    by line, a catalog table by its columns; each named, with the closest column."""
    csv = tmp_path / "csv"
    csv.mkdir()
    (csv / "u.csv").write_text("cluster,user,client-id,producer_byte_rate\nprod,orders,checkout,1\n")
    with pytest.raises(KqplanError, match=r"csv: unknown column 'client-id' \(did you mean 'client_id'\?\)"):
        spark_usage.usage_frame(spark, [f"file://{csv}"])
    lines = tmp_path / "lines"
    lines.mkdir()
    (lines / "u.jsonl").write_text('{"cluster": "prod", "user": "orders"}\n'
                                   '{"cluster": "prod", "user": "orders", "producer_bytes": 5}\n')
    # a directory URI: Spark lists and reads it; the row it flags is judged by the local reader (a
    # local file: its line), elsewhere named as "a line"
    with pytest.raises(KqplanError, match=r"u\.jsonl: line 2: unknown column 'producer_bytes' \(did you mean "
                                          r"'producer_byte_rate'\?\)"):
        spark_usage.usage_frame(spark, [f"file://{lines}/"])
    flagged = spark_usage.usage_frame(spark, [f"file://{lines}/"], checked=False).select("problem").collect()
    assert sorted(r[0] or "" for r in flagged) == ["", "column:producer_bytes"]  # Spark's own check
    cased = spark.createDataFrame([("prod", "orders", 1.0)],
                                  "cluster string, User string, producer_byte_rate double")
    cased.createOrReplaceTempView("kq_usage_cased")
    with pytest.raises(KqplanError, match=r"--usage-table kq_usage_cased: no user column "
                                          r"\(is 'User' meant to be user\?\)"):
        spark_usage.usage_frame(spark, [], ["kq_usage_cased"])
