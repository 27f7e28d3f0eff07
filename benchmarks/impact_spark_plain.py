"""Spark's own plain aggregation: the floor under ``kqplan fleet impact --engine spark``.

Run by ``benchmarks/fleet.py`` (issue 28), as its own process:

    python benchmarks/impact_spark_plain.py USAGE_DIR OUT_DIR [--wide]

A local[*] SparkSession configured as kqplan's (kqplan.fleet.spark.session: 4 shuffle partitions,
no UI) reads the usage Parquet files, stacks the rates into (key, value), and writes the exact 0.99
percentile per (cluster, user, client_id, key) as Parquet: no checks, no resolution, no buckets,
no windows. ``--wide``: the keys' percentiles side by side, grouped by principal only (the faster
form, and the one kqplan's engine uses). The JVM's start is in the time, as it is in kqplan's.
"""

from __future__ import annotations

import os
import sys

KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")


def main() -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    usage, out = sys.argv[1], sys.argv[2]
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (SparkSession.builder.appName("plain-percentile").master("local[*]")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "4")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    frame = spark.read.parquet(usage)
    keys = [k for k in KEYS if k in frame.columns]
    rows = frame.select("cluster", "user", F.coalesce("client_id", F.lit("")).alias("client_id"), *keys)
    if "--wide" in sys.argv:  # the keys side by side, one group per principal (as kqplan aggregates)
        result = rows.groupBy("cluster", "user", "client_id").agg(
            *(F.percentile(k, F.lit(0.99)).alias(k) for k in keys))
    else:  # the keys stacked into (key, value), one group per principal and key
        stacked = rows.select("cluster", "user", "client_id", F.expr(
            f"stack({len(keys)}, " + ", ".join(f"'{k}', `{k}`" for k in keys) + ") AS (key, value)"))
        result = (stacked.where(F.col("value").isNotNull()).groupBy("cluster", "user", "client_id", "key")
                  .agg(F.expr("percentile(value, 0.99)").alias("usage")))
    result.write.mode("overwrite").parquet(out)
    spark.stop()


if __name__ == "__main__":
    main()
