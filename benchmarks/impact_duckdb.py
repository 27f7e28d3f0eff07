"""DuckDB doing the impact join alone: the floor under ``kqplan fleet impact --engine local``.

Run by ``benchmarks/fleet.py`` (issue 28), as its own process:

    python benchmarks/impact_duckdb.py USAGE_DIR BUCKETS.parquet OUT.parquet [--q 0.99] [--window 60]
        [--variant per-key|one-query]

``BUCKETS.parquet`` says which bucket each observed principal's key is enforced in, before (side 0)
and after (side 1) the plan: ``cluster, user, client_id, key, side, bucket`` (null: unlimited),
computed by fleet.py from the same snapshot states with kqplan's core, before the clock starts.
Everything else is SQL over the usage Parquet files: each principal's statistic per key, each
member's mean per window of ``floor(ts / window)``, per bucket the window sums and the statistic
over its windows (without ``ts``: the members' statistics summed, as kqplan does), joined back
per principal and key with both sides' bucket usage, written as Parquet. No checks of the usage,
no resolution, no plan, no charts: what kqplan's engine adds is the distance to this.

``--variant per-key`` computes the statistic one key per query, as kqplan does; ``one-query``
computes every key's statistic in one GROUP BY (the first thing one writes).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import duckdb

KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")


def statistic(column: str, q: float | None) -> str:
    return f"max({column})" if q is None else f"quantile_cont({column}, {q!r}e0)"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("usage", type=Path)
    parser.add_argument("buckets", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--q", type=float, default=0.99)
    parser.add_argument("--window", type=float, default=60.0)
    parser.add_argument("--variant", choices=["per-key", "one-query"], default="per-key")
    args = parser.parse_args()
    con = duckdb.connect()  # DuckDB's defaults: every core, 80% of the memory
    con.execute(f"CREATE VIEW usage AS SELECT * FROM read_parquet('{args.usage}/*.parquet')")
    con.execute(f"CREATE VIEW buckets AS SELECT * FROM read_parquet('{args.buckets}')")
    present = {row[0] for row in con.execute("DESCRIBE usage").fetchall()}
    keys = [k for k in KEYS if k in present]
    principal = 'cluster, "user", coalesce(client_id, \'\') AS client_id'
    if args.variant == "one-query":
        con.execute(f"CREATE TABLE stats AS UNPIVOT (SELECT {principal}, "
                    + ", ".join(f"{statistic(k, args.q)} AS {k}" for k in keys)
                    + f" FROM usage GROUP BY ALL) ON {', '.join(keys)} INTO NAME key VALUE usage")
    else:
        con.execute("CREATE TABLE stats (cluster VARCHAR, \"user\" VARCHAR, client_id VARCHAR, key VARCHAR, "
                    "usage DOUBLE)")
        for k in keys:
            con.execute(f"INSERT INTO stats SELECT {principal}, '{k}', {statistic(k, args.q)} FROM usage "
                        f"WHERE {k} IS NOT NULL GROUP BY ALL")
    means = ", ".join(f"avg({k}) AS {k}" for k in keys)
    if "ts" in present:
        con.execute(f"""
            CREATE TABLE bucket_usage AS
            WITH means AS (
                UNPIVOT (SELECT {principal}, floor(ts / {args.window!r}e0)::BIGINT AS w, {means}
                         FROM usage GROUP BY ALL)
                ON {", ".join(keys)} INTO NAME key VALUE mean),
            windows AS (
                SELECT side, bucket, w, sum(mean) AS total
                FROM means JOIN buckets USING (cluster, "user", client_id, key)
                WHERE bucket IS NOT NULL GROUP BY ALL)
            SELECT side, bucket, {statistic("total", args.q)} AS usage FROM windows GROUP BY ALL""")
    else:  # no ts (issue 42's untimed shape): a bucket's usage is its members' statistics summed
        con.execute("""
            CREATE TABLE bucket_usage AS
            SELECT side, bucket, sum(s.usage) AS usage
            FROM buckets JOIN stats s USING (cluster, "user", client_id, key)
            WHERE bucket IS NOT NULL GROUP BY ALL""")
    con.execute(f"""
        COPY (
            SELECT b.cluster, b."user", b.client_id, b.key, s.usage,
                   max(u.usage) FILTER (WHERE b.side = 0) AS before_group_usage,
                   max(u.usage) FILTER (WHERE b.side = 1) AS after_group_usage
            FROM buckets b
            LEFT JOIN stats s USING (cluster, "user", client_id, key)
            LEFT JOIN bucket_usage u USING (side, bucket)
            GROUP BY ALL
        ) TO '{args.out}' (FORMAT parquet)""")
    con.close()


if __name__ == "__main__":
    main()
