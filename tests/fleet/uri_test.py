"""Usage where fleets keep it: ``--usage`` URIs that Spark lists and reads itself, ``--usage-table``
from Spark's catalog, and the local engine saying which of those it cannot read."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from kqplan.core.errors import KqplanError
from kqplan.fleet.spark_usage import samples_of, usage_frame
from kqplan.fleet.usage import Sample, Usage, local_paths, read_usage
from tests.fleet.usage_frame_test import write_usage
from tests.helpers import fleet_cli, write_manifest


def on_spark(spark: Any, usage: list[Any], tables: list[str] | None = None) -> Usage:
    rows = samples_of(usage_frame(spark, usage, tables or [])).collect()
    return Usage([Sample(*r) for r in rows if r["value"] is not None],
                 frozenset((r["cluster"], r["user"], r["client_id"]) for r in rows))


def same(a: Usage, b: Usage) -> bool:
    return sorted(a.samples, key=Sample.sort_key) == sorted(b.samples, key=Sample.sort_key) \
        and a.principals == b.principals


def test_a_directory_uri_is_listed_by_spark(spark: Any, tmp_path: Path) -> None:
    # CSV, JSON lines and Parquet under one file:// URI, nested: Spark finds each format itself
    [directory] = write_usage(tmp_path / "usage")
    local = read_usage([directory])
    assert same(on_spark(spark, [directory.as_uri()]), local)
    assert same(on_spark(spark, [(directory / "a.csv").as_uri(), (directory / "more").as_uri() + "/"]),
                read_usage([directory / "a.csv", directory / "more"]))


def test_a_uri_without_usage_files_is_an_error(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("not usage")
    with pytest.raises(KqplanError, match=r"--usage file:.*/empty: no usage file there"):
        on_spark(spark, [(tmp_path / "empty").as_uri()])
    with pytest.raises(KqplanError, match=r"Spark found no file at file:.*/missing"):
        on_spark(spark, [(tmp_path / "missing").as_uri()])


def test_csv_files_with_other_headers_under_one_uri_are_refused(spark: Any, tmp_path: Path) -> None:
    # listed by Spark, they cannot be grouped by header as local paths are: Spark is told to check
    # every header against the first, and the file that differs is named
    folder = tmp_path / "u"
    folder.mkdir()
    (folder / "a.csv").write_text("cluster,user,producer_byte_rate\nc,u,1\n")
    (folder / "b.csv").write_text("cluster,producer_byte_rate,user\nc,2,v\n")
    with pytest.raises(KqplanError, match=r"Spark cannot read file:.*\.csv: its CSV header differs") as err:
        on_spark(spark, [folder.as_uri()])
    assert "as their own --usage" in (err.value.hint or "")
    # given as local paths, the same files are read apart, by name, as the local reader reads them
    assert same(on_spark(spark, [folder]), read_usage([folder]))


def test_a_catalog_table(spark: Any, tmp_path: Path) -> None:
    # a table saved under a location of its own (a local warehouse), read by name
    [directory] = write_usage(tmp_path / "usage")
    source = read_usage([directory / "more"])
    spark.sql(f"CREATE TABLE kq_usage_t USING parquet LOCATION '{(directory / 'more').as_uri()}'")
    try:
        assert same(on_spark(spark, [], ["kq_usage_t"]), source)
        both = on_spark(spark, [directory / "a.csv"], ["kq_usage_t"])
        assert same(both, read_usage([directory / "a.csv", directory / "more"]))
    finally:
        spark.sql("DROP TABLE kq_usage_t")
    with pytest.raises(KqplanError, match=r"--usage-table: no table `[^`]*nosuch` in Spark's catalog"):
        on_spark(spark, [], ["nosuch"])


def test_the_local_engine_reads_file_uris_and_names_what_it_cannot(tmp_path: Path) -> None:
    assert local_paths([tmp_path.as_uri(), "rel/x.csv"]) == [tmp_path, Path("rel/x.csv")]
    with pytest.raises(KqplanError, match=r"--usage s3a://b/u: the local engine reads local files, not "
                                          r"s3a:// URIs") as err:
        local_paths(["s3a://b/u"])
    assert "--engine spark" in (err.value.hint or "")
    with pytest.raises(KqplanError, match="--usage-table t: the local engine reads files"):
        local_paths([], ["t"])


@pytest.fixture
def offline(tmp_path: Path) -> Path:
    """One offline cluster (a snapshot) whose plan lowers {user=alice} from 20MB to 12MB, and usage of
    three clients of alice at 5 MB/s each: alone under it, together over it."""
    from kqplan.core.entity import Entity
    from kqplan.snapshot.file import write_snapshot

    write_snapshot(tmp_path / "c.json", {Entity.user("alice"): {"producer_byte_rate": 20e6}}, "c-id")
    write_manifest(tmp_path / "m" / "q.yaml",
                   "entities:\n  - user: alice\n    quotas: {producer_byte_rate: 12MB}\n")
    (tmp_path / "kqplan.toml").write_text(
        '[clusters.c]\nid = "c-id"\nsnapshot = "c.json"\nmanifests = ["m"]\n')
    (tmp_path / "usage").mkdir()
    (tmp_path / "usage" / "u.csv").write_text(
        "cluster,user,client_id,producer_byte_rate,ts\n"
        + "".join(f"c,alice,a{i},5000000,{t}\n" for i in (1, 2, 3) for t in (0, 30)))
    return tmp_path


def test_impact_reads_uris_and_tables_through_the_command(spark: Any, offline: Path) -> None:
    usage = (offline / "usage").as_uri()
    local = fleet_cli(offline, "impact", "--usage", usage, "--out", offline / "local")
    assert local.exit_code == 0, local.stderr
    uri = fleet_cli(offline, "impact", "--usage", usage, "--out", offline / "uri", "--engine", "spark")
    assert uri.exit_code == 0, uri.stderr
    spark.sql(f"CREATE TABLE kq_usage_c USING csv OPTIONS (header 'true') LOCATION '{usage}'")
    try:
        table = fleet_cli(offline, "impact", "--usage-table", "kq_usage_c", "--out", offline / "table",
                          "--engine", "spark")
    finally:
        spark.sql("DROP TABLE kq_usage_c")
    assert table.exit_code == 0, table.stderr
    rows = [pq.read_table(offline / name / "impact.parquet").to_pylist()
            for name in ("local", "uri", "table")]
    assert rows[0] == rows[1] == rows[2]
    assert {(r["after_group"], r["after_group_usage"], r["would_throttle"]) for r in rows[0]
            if r["key"] == "producer_byte_rate"} == {("{user=alice}", 15e6, True)}
    assert "{user=alice} producer_byte_rate (3 principals)" in local.stdout
    cannot = fleet_cli(offline, "impact", "--usage", "s3a://bucket/usage", "--out", offline / "x")
    assert cannot.exit_code == 1
    assert cannot.stderr.startswith("Error: --usage s3a://bucket/usage: the local engine reads local files")
    none = fleet_cli(offline, "impact", "--out", offline / "x")
    assert none.exit_code == 1
    assert none.stderr.startswith("Error: no usage given")


@pytest.mark.parametrize(("line", "message"), [
    ("c,alice,a1,lots,0", r"u2\.csv: (row 1: )?producer_byte_rate is not a number: 'lots'"),
    # a row of a cluster not in the inventory is checked too
    ("elsewhere,alice,a1,1,1764000000000", r"u2\.csv: (row 1: )?ts is not a time: '1764000000000'"),
    (",alice,a1,1,0", r"u2\.csv: (a row has no cluster or user|row 1: cluster and user are required)"),
])
@pytest.mark.parametrize("job", ["impact", "rightsize"])
def test_the_spark_jobs_check_every_row_as_they_aggregate(spark: Any, offline: Path, line: str, message: str,
                                                           job: str) -> None:
    # the Spark jobs check the usage within their first aggregation (no pass of its own): a broken
    # row is still found, in any cluster, and named as the local reader names it
    (offline / "usage" / "u2.csv").write_text(f"cluster,user,client_id,producer_byte_rate,ts\n{line}\n")
    for engine in ("local", "spark"):
        result = fleet_cli(offline, job, "--usage", offline / "usage", "--out", offline / f"o-{engine}",
                           "--engine", engine)
        assert result.exit_code == 1, (engine, result.stdout)
        assert re.search(message, result.stderr), (engine, result.stderr)
    header = offline / "other"
    header.mkdir()
    (header / "a.csv").write_text("cluster,user,producer_byte_rate\nc,alice,1\n")
    (header / "b.csv").write_text("cluster,producer_byte_rate,user\nc,2,bob\n")
    other = fleet_cli(offline, job, "--usage", header.as_uri(), "--out", offline / "o", "--engine", "spark")
    assert other.exit_code == 1
    assert re.search(r"Spark cannot read file:.*\.csv: its CSV header differs", other.stderr), other.stderr
