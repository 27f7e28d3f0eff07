"""The columnar local engine (DuckDB) gives the reference's impact: generated fleets written as CSV,
JSON lines and Parquet files give what ``impact_rows(states, read_usage(paths))`` gives; its reader
gives the Python reader's samples to the last bit, for every Parquet type it reads itself and
every file it leaves to Python; and every file the Python reader refuses is refused in its words."""

from __future__ import annotations

import csv
import datetime as dt
import json
import random
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kqplan.core.entity import Entity
from kqplan.core.errors import KqplanError
from kqplan.fleet.columnar import HELD, impact_of_files
from kqplan.fleet.columnar_read import VIEW, kinds, register_usage
from kqplan.fleet.impact import Impact, impact_rows
from kqplan.fleet.usage import USAGE_KEYS, Sample, Usage, parse_stat, read_usage
from tests.fleet.impact_test import same, states, usages

COLUMNS = ["cluster", "user", "client_id", "ts", *USAGE_KEYS]
"""A file's columns; and ``bucket`` (before ``ts``) when a row is a quota bucket's."""


# -- writing usage files ----------------------------------------------------------------------------

def usage_rows(usage: Usage, merge: Iterable[bool]) -> list[dict[str, Any]]:
    """Usage rows: each sample in a row of its own, or (``merge``) in the previous row when that
    is of the same unit (principal or bucket) and time and has no rate of its key yet; a row per
    unit seen without any rate."""
    rows: list[dict[str, Any]] = []
    joins = iter(merge)
    for s in usage.samples:
        last = rows[-1] if rows else None
        if (last is not None and next(joins, False) and s.key not in last
                and (last["cluster"], last["user"], last["client_id"], last["bucket"], last["ts"])
                == (*s.unit, s.ts)):
            last[s.key] = s.value
        else:
            rows.append({"cluster": s.cluster, "user": s.user, "client_id": s.client_id, "bucket": s.bucket,
                         "ts": s.ts, s.key: s.value})
    sampled = {s.unit for s in usage.samples}
    rows += [{"cluster": c, "user": u, "client_id": i, "bucket": b, "ts": None}
             for c, u, i, b in sorted(usage.units) if (c, u, i, b) not in sampled]
    return rows


def columns_of(rows: list[dict[str, Any]]) -> list[str]:
    """:data:`COLUMNS`, and ``bucket`` when a row is a bucket's."""
    return COLUMNS[:3] + ["bucket"] * any(r.get("bucket") for r in rows) + COLUMNS[3:]


def _text(value: Any) -> str:
    return "" if value is None else repr(value) if isinstance(value, float) else str(value)


def write_csv(path: Path, rows: list[dict[str, Any]], style: int) -> None:
    header = columns_of(rows)[::1 if style % 2 else -1]  # CSV columns are read by name
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows([_text(r.get(c)) for c in header] for r in rows)


def write_jsonl(path: Path, rows: list[dict[str, Any]], style: int) -> None:
    def shown(row: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in row.items() if v is not None}
        if not row["client_id"] and style % 3 == 1:
            out["client_id"] = None  # null, missing or empty: a client that sends none
        elif not row["client_id"] and style % 3 == 2:
            del out["client_id"]
        if not row.get("bucket") and style % 3 != 2:  # a principal's: missing, or (below) null or empty
            out.pop("bucket", None)
        elif not row.get("bucket") and style % 2:
            out["bucket"] = None
        if not row["user"] and style % 2:  # a {client-id=C} bucket's: null or empty
            out["user"] = None
        if style % 2 and "ts" in out and out["ts"] == int(out["ts"]):
            out["ts"] = int(out["ts"])
        return out

    path.write_text("".join(json.dumps(shown(r)) + "\n" for r in rows), encoding="utf-8")


def write_parquet(path: Path, rows: list[dict[str, Any]], style: int) -> None:
    """Parquet of several shapes: ts as seconds (double or integer), as a timestamp (us, ns, with
    a zone) or absent; rates as double, integer or float; empty client-ids (and users, buckets) as
    nulls or ''; ``bucket`` only when a row is a bucket's, or always (a null type when all null)."""
    times = [r["ts"] for r in rows]
    ts_kind = style % 5
    columns: dict[str, Any] = {
        "cluster": pa.array([r["cluster"] for r in rows]),
        "user": pa.array([r["user"] or (None if style % 7 == 3 else "") for r in rows],
                         pa.large_string() if style % 2 else None),
        "client_id": pa.array([r["client_id"] or (None if style % 3 else "") for r in rows]),
    }
    if any(r.get("bucket") for r in rows) or style % 4 == 3:
        columns["bucket"] = pa.array([r.get("bucket") or (None if style % 3 else "") for r in rows])
    if ts_kind == 1 and all(t is None or t == int(t) for t in times):
        columns["ts"] = pa.array([None if t is None else int(t) for t in times], pa.int64())
    elif ts_kind in (2, 3):
        unit, zone = ("us", None) if ts_kind == 2 else ("ns", "UTC")
        epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        when = [None if t is None else (epoch + dt.timedelta(seconds=t)).replace(tzinfo=None) for t in times]
        columns["ts"] = pa.array(when, pa.timestamp(unit, tz=zone))
    elif ts_kind != 4 or any(t is not None for t in times):
        columns["ts"] = pa.array(times, pa.float64())
    for key in USAGE_KEYS:
        values = [r.get(key) for r in rows]
        arrow = pa.int64() if style % 4 == 1 else pa.float32() if style % 4 == 2 else pa.float64()
        if any(v is not None for v in values) or style % 2:
            columns[key] = pa.array([None if v is None else int(v) if arrow == pa.int64() else v
                                     for v in values], arrow)
    pq.write_table(pa.table(columns), path, row_group_size=max(1, len(rows) // 2))


WRITERS: dict[str, Callable[[Path, list[dict[str, Any]], int], None]] = {
    "csv": write_csv, "jsonl": write_jsonl, "parquet": write_parquet}


def write_files(directory: Path, rows: list[dict[str, Any]], parts: list[tuple[str, int]]) -> list[Path]:
    """``rows`` split over one file per part (its format and style), in order."""
    paths = []
    for n, (suffix, style) in enumerate(parts):
        share = rows[n * len(rows) // len(parts):(n + 1) * len(rows) // len(parts)]
        path = directory / f"part-{n}.{suffix}"
        WRITERS[suffix](path, share, style)
        paths.append(path)
    return paths


def assert_same_impact(expected: Impact, got: Impact, *, exact_usage: bool = True) -> None:
    """Equal, floats up to summation order (as Spark vs local); each unit's own statistic to the
    bit unless DuckDB's quantile_cont computed it (``exact_usage`` false); the buckets alike."""
    assert got.unused == expected.unused
    assert got.untimed == expected.untimed
    assert len(got.rows) == len(expected.rows)
    for a, b in zip(expected.rows, got.rows, strict=True):
        assert type(a) is type(b), (a, b)
        assert all(same(x, y) for x, y in zip(a, b, strict=True)), (a, b)
        assert not exact_usage or a.usage == b.usage, (a, b)
    assert len(got.buckets) == len(expected.buckets)
    for c, d in zip(expected.buckets, got.buckets, strict=True):
        assert type(c) is type(d), (c, d)
        assert all(same(x, y) for x, y in zip(c, d, strict=True)), (c, d)


# -- the impact, differentially ---------------------------------------------------------------------

formats = st.lists(st.tuples(st.sampled_from(sorted(WRITERS)), st.integers(0, 59)), min_size=1, max_size=3)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(["c", "d"]), st.tuples(states, states), min_size=1),
       usages(), st.sampled_from(["max", "p50", "p99", "p99.9", "p1"]), st.sampled_from([1.0, 60.0]), formats,
       st.lists(st.booleans(), max_size=40), st.sampled_from([HELD, 0, 4]))
def test_generated_fleets_give_the_reference_impact(tmp_path, fleet, usage, stat, window, parts, merge, held):
    """``held``: every key's statistic from its top or bottom values in one query, DuckDB's
    quantile_cont for each key, or a few keys per query and quantile_cont for the others."""
    directory = Path(tempfile.mkdtemp(dir=tmp_path))
    paths = write_files(directory, usage_rows(usage, merge), parts)
    q = parse_stat(stat)
    expected = impact_rows(fleet, read_usage(paths), q, window=window)
    exact = q is None or held == HELD
    got = impact_of_files(fleet, paths, q, window=window, held=held)
    assert_same_impact(expected, got, exact_usage=exact)
    # the directory: its files in name order, as the Python reader finds them
    assert_same_impact(expected, impact_of_files(fleet, [directory], q, window=window, held=held),
                       exact_usage=exact)


def test_many_clients_per_user_shared_client_ids_and_defaults_at_every_level(tmp_path):
    """Buckets of every level, filled from a Parquet file and a CSV file together."""
    after = {Entity.user("u0"): {"producer_byte_rate": 100.0},
             Entity.client("shared"): {"consumer_byte_rate": 50.0},
             Entity.user(None): {"request_percentage": 5.0},
             Entity.client(None): {"producer_byte_rate": 70.0},
             Entity.user_client(None, None): {"consumer_byte_rate": 30.0},
             Entity.user_client("u1", None): {"producer_byte_rate": 20.0},
             Entity.user_client(None, "c3"): {"request_percentage": 1.0}}
    before = {Entity.user(None): {"producer_byte_rate": 10.0}}
    rows = [{"cluster": "c", "user": f"u{u}", "client_id": c, "ts": float(t * 20 + u),
             "producer_byte_rate": 10.0 + u + t, "consumer_byte_rate": 5.0 * (u + 1),
             "request_percentage": 0.5 * t}
            for u in range(4) for c in ("", "shared", "c1", "c2", "c3") for t in range(6)]
    paths = [tmp_path / "a.parquet", tmp_path / "b.csv"]
    write_parquet(paths[0], rows[::2], 0)
    write_csv(paths[1], rows[1::2], 1)
    for stat in ("max", "p99", "p50", "p1", "p10"):
        q = parse_stat(stat)
        expected = impact_rows({"c": (before, after)}, read_usage(paths), q, window=60.0)
        assert sum(r.after_group is not None for r in expected.rows) > 40
        assert_same_impact(expected, impact_of_files({"c": (before, after)}, paths, q, window=60.0))


# -- the reader, to the last bit ----------------------------------------------------------------------

def duckdb_usage(paths: list[Path], *, buckets: bool = False) -> Usage:
    """What :func:`register_usage` makes of ``paths`` (files it reads without a refused row), as
    the Python reader's Usage."""
    con = duckdb.connect()
    try:
        register_usage(con, paths, buckets=buckets)
        rates = ", ".join(USAGE_KEYS)
        rows = con.execute(f'SELECT cluster, "user", client_id, bucket, ts, {rates}, kq_refused '
                           f"FROM {VIEW}").fetchall()
    finally:
        con.close()
    assert not any(r[-1] for r in rows)
    samples = [Sample(r[0], r[1], r[2], key, r[5 + i], r[4], r[3]) for r in rows
               for i, key in enumerate(USAGE_KEYS) if r[5 + i] is not None]
    return Usage(samples, frozenset((r[0], r[1], r[2]) for r in rows if not r[3]),
                 frozenset((r[0], r[1], r[2], r[3]) for r in rows if r[3]))


def assert_read_alike(paths: list[Path], *, buckets: bool = False) -> Usage:
    local = read_usage(paths, buckets=buckets)
    on_duckdb = duckdb_usage(paths, buckets=buckets)
    assert sorted(on_duckdb.samples, key=Sample.sort_key) == sorted(local.samples, key=Sample.sort_key)
    assert on_duckdb.principals == local.principals
    assert on_duckdb.buckets == local.buckets
    return local


def test_parquet_types_duckdb_reads_itself_give_the_python_readers_values(tmp_path):
    epoch = dt.datetime(1970, 1, 1)
    far = [dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
           dt.datetime(1600, 2, 29, 1, 2, 3, 7), dt.datetime(2300, 6, 1, 0, 0, 0, 999999),
           dt.datetime(2026, 11, 22, 10, 0, 0, 123457), epoch]
    nanos = [1_764_000_000_123_456_789, -1_000_000_001, 1_764_000_000_000_000_500, 1_764_000_000_007_812_500,
             0, 9_000_000_000_999_999_999]
    n = len(far)
    base = {"cluster": pa.array(["c"] * n).dictionary_encode(), "user": [f"u{i}" for i in range(n)]}
    tables = {
        "far-us": {**base, "ts": pa.array(far, pa.timestamp("us")), "producer_byte_rate": [1.5] * n},
        # in a zone pyarrow gives the years 2 to 9998 only
        "far-ms-zoned": {**base, "ts": pa.array([f.replace(microsecond=f.microsecond // 1000 * 1000)
                                                 for f in far[2:] + far[2:4]],
                                                pa.timestamp("ms", tz="Europe/Paris")),
                         "consumer_byte_rate": pa.array([2**63 - 1, 2**53 + 1, 3, 0, 7, 1], pa.int64())},
        "nanos": {**base, "ts": pa.array(nanos, pa.timestamp("ns")),
                  "request_percentage": pa.array([2**64 - 1, 3, 2**53 + 1, 0, 5, 6], pa.uint64())},
        "nanos-utc": {**base, "ts": pa.array(nanos, pa.timestamp("ns", tz="UTC")),
                      "controller_mutation_rate": pa.array([0.1, 3.4028234663852886e38, None, 1e-45, 2.5, 3],
                                                           pa.float32())},
        "numbers": {**base, "ts": pa.array([-62135596800, 253402300799, 0, None, 1764000000, 7], pa.int64()),
                    "producer_byte_rate": pa.array([None] * n, pa.null()),
                    "client_id": ["", None, "x", "y", "", "z"],
                    "request_percentage": [1e308, 5e-324, -0.0, 1e-300, 4.0, None]},
        "seconds": {**base, "ts": [-62135596800.0, 253402300799.0, 0.1, 1764000000.25, None, 1.764e9],
                    "consumer_byte_rate": pa.array([None] * n, pa.bool_())},
        "nothing-but-names": {**base, "ts": pa.array([None] * n, pa.null())},
    }
    for name, table in tables.items():
        pq.write_table(pa.table(table), tmp_path / f"{name}.parquet", row_group_size=4)
        assert kinds(tmp_path / f"{name}.parquet") is not None, name  # read by DuckDB itself
        assert_read_alike([tmp_path / f"{name}.parquet"])
    local = assert_read_alike([tmp_path])
    assert len(local.samples) == 28


def test_random_timestamps_of_every_unit_give_the_python_readers_seconds(tmp_path):
    """Microseconds beyond 2^53 (a double holds them no more), nanoseconds rounded as pandas does."""
    rng = random.Random(28)
    n = 3000
    values = {"us": [rng.randint(-62135596800 * 10**6, 253402300799 * 10**6) for _ in range(n)],
              "ns": [rng.randint(-(2**63) + 1, 2**63 - 1) for _ in range(n // 2)]
              + [1_764_000_000 * 10**9 + rng.randint(0, 10**9) for _ in range(n - n // 2)],
              "ms": [rng.randint(-10**13, 10**13) for _ in range(n)]}
    for unit, counts in values.items():
        path = tmp_path / f"{unit}.parquet"
        pq.write_table(pa.table({"cluster": ["c"] * n, "user": [str(i) for i in range(n)],
                                 "ts": pa.array(counts, pa.timestamp(unit)),
                                 "producer_byte_rate": [1.0] * n}), path)
        assert kinds(path) is not None
        assert_read_alike([path])


def test_files_left_to_the_python_reader_are_read_alike(tmp_path):
    """Parquet with text rates or ts, decimals, dates; CSV and JSON lines: the Python reader reads
    them, DuckDB gets its samples. (Names in another case or DuckDB's own column names are not
    usage columns: refused alike, tests/fleet/usage_schema_test.py.)"""
    import decimal

    n = 3
    base = {"cluster": ["c"] * n, "user": ["a", "b", "c"]}
    tables = {
        "text-rates": {**base, "producer_byte_rate": ["1.5", "", "2e3"]},
        "text-ts": {**base, "ts": ["2026-11-22T10:00:00Z", "1764000000.5", ""],
                    "producer_byte_rate": [1.0] * n},
        "decimal": {**base,
                    "consumer_byte_rate": pa.array([decimal.Decimal("1.25")] * n, pa.decimal128(5, 2))},
        "date": {**base, "ts": pa.array([dt.date(2026, 11, 22)] * n), "producer_byte_rate": [1.0] * n},
        "numeric-client": {**base, "client_id": [1, 2, None], "producer_byte_rate": [1.0] * n},
    }
    for name, table in tables.items():
        pq.write_table(pa.table(table), tmp_path / f"{name}.parquet")
        assert kinds(tmp_path / f"{name}.parquet") is None, name
    (tmp_path / "a.csv").write_text("cluster,user,client_id,ts,producer_byte_rate\nc,x,,2026-11-22,3\n")
    (tmp_path / "b.jsonl").write_text('{"cluster": "c", "user": "y", "ts": "2026-11-22 10:00:00", '
                                      '"request_percentage": "7"}\n\n')
    local = assert_read_alike([tmp_path])
    assert len(local.samples) == 16


def test_no_usage_at_all(tmp_path):
    (tmp_path / "empty.csv").write_text("cluster,user,client_id,producer_byte_rate\n")
    fleet = {"c": ({}, {Entity.user(None): {"producer_byte_rate": 1.0}})}
    for paths in ([], [tmp_path]):
        assert impact_of_files(fleet, paths, None) == impact_rows(fleet, read_usage(paths), None)


# -- refusals, in the Python reader's words -------------------------------------------------------------

def refusal(run: Callable[[], object]) -> tuple[str, str | None]:
    with pytest.raises(KqplanError) as err:
        run()
    return err.value.message, err.value.hint


def assert_refused_alike(paths: list[Path], fragment: str) -> None:
    expected = refusal(lambda: read_usage(paths))
    assert fragment in expected[0]
    assert refusal(lambda: impact_of_files({"c": ({}, {})}, paths, 0.99)) == expected


CSV_CELLS = [("ts", "yesterday"), ("ts", "2026-11-22T10:00"), ("ts", "22/11/2026"),
             ("ts", "2026-11-22T10:00:00 UTC"), ("ts", "1e400"), ("ts", "1e20"), ("ts", "1764000000000"),
             ("producer_byte_rate", "1_000"), ("producer_byte_rate", "5d"), ("producer_byte_rate", "nan"),
             ("producer_byte_rate", "-inf"), ("producer_byte_rate", " 12"), ("producer_byte_rate", "lots"),
             ("user", ""), ("cluster", "")]


@pytest.mark.parametrize(("column", "cell"), CSV_CELLS)
def test_csv_cells_refused_alike(tmp_path, column, cell):
    values = {"cluster": "c", "user": "u", "ts": "1", "producer_byte_rate": "1", column: cell}
    bad = tmp_path / "bad.csv"
    bad.write_text("cluster,user,client_id,ts,producer_byte_rate\nc,ok,x,1,1\n"
                   f"{values['cluster']},{values['user']},x,{values['ts']},{values['producer_byte_rate']}\n")
    assert_refused_alike([bad], "row 2")


def test_json_lines_refused_alike(tmp_path):
    huge = tmp_path / "huge.jsonl"
    huge.write_text('{"cluster": "c", "user": "u", "ts": 1' + "0" * 400 + ', "producer_byte_rate": 1}\n')
    assert_refused_alike([huge], "ts is not a time")
    listed = tmp_path / "list.jsonl"
    listed.write_text("[1, 2]\n")
    assert_refused_alike([listed], "list.jsonl: line 1: not a JSON object (a list)")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"cluster": "c", "user": "u"}\n{"cluster": \n')
    assert_refused_alike([broken], "broken.jsonl: line 2: not JSON")
    latin = tmp_path / "latin.csv"
    latin.write_bytes("cluster,user\nc,caf\xe9\n".encode("latin-1"))
    assert_refused_alike([latin], "latin.csv: line 2: not UTF-8 (byte 0xe9 at column 6)")


PARQUET_CELLS: list[tuple[str, dict[str, Any], str]] = [
    ("nan-ts", {"ts": [1.0, float("nan")]}, "ts is not a time: nan"),
    ("inf-ts", {"ts": [1.0, float("inf")]}, "ts is not a time: inf"),
    ("millis-ts", {"ts": pa.array([1, 1_764_000_000_000], pa.int64())}, "ts is not a time: 1764000000000"),
    ("bool-rate", {"ts": [1.0, 1.0], "producer_byte_rate": [None, True]},
     "producer_byte_rate is not a number: True"),
    ("nan-rate", {"consumer_byte_rate": pa.array([1.0, float("nan")], pa.float32())}, "is not a number: nan"),
    ("inf-rate", {"request_percentage": [1.0, float("-inf")]}, "is not a number: -inf"),
    ("null-user", {"user": ["u", None]}, "cluster and user are required"),
    ("empty-cluster", {"cluster": ["c", ""]}, "cluster and user are required"),
    ("no-user", {"user": pa.array([None, None], pa.null())}, "row 1: cluster and user are required"),
    ("int-cluster", {"cluster": [1, 2]}, "row 1: cluster is not text: 1"),
]


@pytest.mark.parametrize(("name", "columns", "fragment"), PARQUET_CELLS)
def test_parquet_cells_refused_alike(tmp_path, name, columns, fragment):
    bad = tmp_path / f"{name}.parquet"
    table = {"cluster": ["c", "c"], "user": ["u", "u"], "producer_byte_rate": [1.0, 2.0], **columns}
    pq.write_table(pa.table(table), bad)
    assert_refused_alike([bad], fragment)


def test_the_first_refusal_in_file_order_row_order_and_cell_order(tmp_path):
    """A bad row in a later row group of the second file; a row bad twice; a CSV file before it."""
    rows = 50
    good = {"cluster": ["c"] * rows, "user": [f"u{i}" for i in range(rows)], "ts": [1.0] * rows,
            "producer_byte_rate": [1.0] * rows}
    pq.write_table(pa.table(good), tmp_path / "a.parquet", row_group_size=7)
    twice = {**good, "ts": [1.0] * 40 + [float("nan")] + [1.0] * 9,
             "producer_byte_rate": [1.0] * 37 + [float("inf")] * 13}
    pq.write_table(pa.table(twice), tmp_path / "b.parquet", row_group_size=7)
    pq.write_table(pa.table({**good, "user": [None] * rows}), tmp_path / "c.parquet")
    assert_refused_alike([tmp_path], "b.parquet: row 38: producer_byte_rate is not a number: inf")
    twice["producer_byte_rate"] = [1.0] * rows
    pq.write_table(pa.table(twice), tmp_path / "b.parquet", row_group_size=7)
    assert_refused_alike([tmp_path], "b.parquet: row 41: ts is not a time: nan")
    (tmp_path / "0.csv").write_text("cluster,user,producer_byte_rate\nc,u,x\n")
    assert_refused_alike([tmp_path], "0.csv: row 1: producer_byte_rate is not a number: 'x'")


def test_files_that_are_not_usage_and_missing_paths_are_refused_alike(tmp_path):
    fake = tmp_path / "fake.parquet"
    fake.write_text("not parquet")
    assert_refused_alike([fake], "not a Parquet file")
    damaged = tmp_path / "damaged.parquet"  # a footer pyarrow reads, pages it does not (DuckDB: some)
    pq.write_table(pa.table({"cluster": ["c"] * 1000, "user": [f"u{i}" for i in range(1000)]}), damaged)
    data = bytearray(damaged.read_bytes())
    data[8:200] = b"\xab" * 192
    damaged.write_bytes(bytes(data))
    assert kinds(damaged) is not None
    assert_refused_alike([damaged], "damaged.parquet: not a Parquet file")
    damaged.unlink()
    good = tmp_path / "good.csv"
    good.write_text("cluster,user,producer_byte_rate\nc,u,1\n")
    assert_refused_alike([good, tmp_path / "gone"], "gone: no such file or directory")
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"cluster": ["c"], "user": [""]}), bad)
    # the Python reader reads the files before a missing path: a bad one among them comes first
    assert_refused_alike([bad, tmp_path / "gone"], "bad.parquet: row 1: cluster and user are required")


def test_a_window_boundary_is_the_python_readers(tmp_path):
    """Timestamps whose seconds are not exact in binary: each sample in the window the reference
    puts it in, windows of 1 ms."""
    times = [dt.datetime(2026, 11, 22, 10, 0, 0, us) for us in (999, 1000, 1001, 2999, 3000, 123457)]
    pq.write_table(pa.table({"cluster": ["c"] * 6, "user": ["u"] * 6,
                             "ts": pa.array(times, pa.timestamp("us")),
                             "producer_byte_rate": [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]}), tmp_path / "a.parquet")
    fleet = {"c": ({}, {Entity.user("u"): {"producer_byte_rate": 1.0}})}
    expected = impact_rows(fleet, read_usage([tmp_path]), 0.5, window=0.001)
    assert impact_of_files(fleet, [tmp_path], 0.5, window=0.001) == expected  # exact: no interpolation
