"""The Spark engine: the fleet plan's change rows as a DataFrame join, checked row for row against
the local engine (tests/fleet). Spark pays off where data outgrows one process (many clusters, big
usage tables); for one cluster ``kqplan plan`` stays plain Python.

Which entities a plan deletes (ownership scopes are globs, layers can remove an entity) is decided
once per cluster by the core and passed in as data; the per-key diff — the bulk of the work — is a
full outer join on (cluster, entity, key) with null-safe comparison, no Python UDF.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from kqplan.fleet.changes import ChangeRow, ClusterDiff

_KV = "cluster string, entity string, key string, value double"


@contextmanager
def session(*, master: str | None = None, remote: str | None = None) -> Iterator[Any]:
    """A SparkSession: local (``master``, default ``local[*]``) or Spark Connect (``remote``,
    ``sc://HOST:PORT``); the driver binds to loopback unless SPARK_LOCAL_IP says otherwise, and
    Spark's log noise stays off the terminal."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        from kqplan.errors import KqplanError

        raise KqplanError("the Spark engine needs pyspark", hint="pip install 'kqplan[spark]'") from None
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName("kqplan-fleet")
    if remote:
        builder = builder.remote(remote)
    else:
        builder = (builder.master(master or "local[*]").config("spark.ui.enabled", "false")
                   .config("spark.sql.shuffle.partitions", "4")
                   .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=ERROR"))
    spark = builder.getOrCreate()
    if not remote:
        spark.sparkContext.setLogLevel("ERROR")
    try:
        yield spark
    finally:
        if not remote:
            spark.stop()


def change_rows(spark: Any, diffs: Sequence[ClusterDiff]) -> list[ChangeRow]:
    """One row per changed key of every cluster, as :func:`kqplan.fleet.changes.rows_of_plan`."""
    from pyspark.sql import functions as F

    desired_rows, actual_rows = [], []
    for diff in diffs:
        managed = diff.desired.keys() | diff.deleted
        for entity, quotas in diff.desired.items():
            shown = entity.display
            desired_rows += [(diff.cluster, shown, k, float(v)) for k, v in quotas.items()]
        for entity, quotas in diff.actual.items():
            if entity in managed:  # unmanaged entities are never changed: not joined at all
                shown = entity.display
                actual_rows += [(diff.cluster, shown, k, float(v)) for k, v in quotas.items()]
    want = spark.createDataFrame(desired_rows, _KV).withColumnRenamed("value", "after")
    have = spark.createDataFrame(actual_rows, _KV).withColumnRenamed("value", "before")
    joined = want.join(have, ["cluster", "entity", "key"], "full_outer")
    changed = joined.where(~F.col("before").eqNullSafe(F.col("after")))
    action = (F.when(F.col("after").isNull(), F.lit("delete"))
              .when(F.col("before").isNull(), F.lit("add")).otherwise(F.lit("update")))
    result = changed.select("cluster", "entity", action.alias("action"), "key", "before", "after")
    return sorted(ChangeRow(r.cluster, r.entity, r.action, r.key, r.before, r.after)
                  for r in result.collect())
