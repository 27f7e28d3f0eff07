"""Issue 41: a URI whose filesystem Spark lacks (no connector on its classpath, no FileSystem for
the scheme) or cannot reach (an HDFS nameservice without its Hadoop configuration) is a located
error naming the filesystem and how to add it — read by the Java exception classes of a real
local SparkSession's errors, never a Py4JJavaError and its Java stack."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kqplan.core.errors import KqplanError
from kqplan.fleet.spark_usage import usage_frame
from tests.fleet import conftest as fleet_fixtures
from tests.helpers import run_cli, write_manifest

spark = fleet_fixtures.spark
"""The one local SparkSession of the run (tests/fleet's fixture)."""

NAMESERVICE = "kqplan-no-such-nameservice"
"""An HDFS URI's authority that no resolver knows: an HA nameservice without its hdfs-site.xml."""


@pytest.mark.parametrize(("uri", "says", "hint"), [
    ("s3a://bucket/usage/u.parquet", "org.apache.hadoop.fs.s3a.S3AFileSystem (fs.s3a.impl) is not on Spark's "
     "classpath", "org.apache.hadoop:hadoop-aws:"),
    ("gs://bucket/usage", "(fs.gs.impl) is not on Spark's classpath", "gcs-connector"),
    ("abfss://c@account.dfs.core.windows.net/u.csv", "(fs.abfss.impl) is not on Spark's classpath",
     "org.apache.hadoop:hadoop-azure:"),
    ("kqfs://b/u.csv", "Spark has no FileSystem for kqfs://", "spark.jars.packages"),
    (f"hdfs://{NAMESERVICE}/usage/u.csv", f"Spark cannot resolve {NAMESERVICE}, the URI's namenode or "
     "nameservice", "HADOOP_CONF_DIR"),
], ids=["s3a", "gs", "abfss", "unknown scheme", "hdfs"])
def test_a_usage_uri_whose_filesystem_spark_lacks_is_named(spark: Any, uri: str, says: str,
                                                           hint: str) -> None:
    with pytest.raises(KqplanError) as err:
        usage_frame(spark, [uri])
    assert err.value.message.startswith(f"--usage {uri}: "), err.value.message
    assert says in err.value.message
    assert hint in (err.value.hint or "")
    assert "java" not in (err.value.hint or "").lower()  # no Java stack, no exception class


def test_an_out_uri_is_checked_before_any_work_and_a_write_is_named(spark: Any, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "snap.json").write_text('{"format_version": 1, "cluster_id": "c1", "entities": []}')
    (tmp_path / "kqplan.toml").write_text('[clusters.c1]\nsnapshot = "snap.json"\nid = "c1"\n'
                                          'manifests = ["q"]\n')
    write_manifest(tmp_path / "q" / "q.yaml",
                   "entities:\n  - user: u1\n    quotas: {producer_byte_rate: 2000}\n")
    monkeypatch.chdir(tmp_path)
    result = run_cli("fleet", "plan", "--engine", "spark", "--out", "S3A://bucket/fleet")
    assert result.exit_code == 1, result.stdout + result.stderr
    assert result.stderr.startswith("Error: --out s3a://bucket/fleet: Spark cannot use s3a:// URIs"), \
        result.stderr
    assert "hadoop-aws" in result.stderr
    assert "internal error" not in result.stderr
    # the scheme Spark has (hdfs), its host unknown: the write itself says so
    from kqplan.fleet.spark_tables import write_table

    unresolved = f"--out hdfs://{NAMESERVICE}/fleet: Spark cannot resolve {NAMESERVICE}"
    with pytest.raises(KqplanError, match=unresolved):
        write_table(spark.range(1), f"hdfs://{NAMESERVICE}/fleet", "changes.parquet")
