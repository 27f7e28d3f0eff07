"""Hostile usage files (issue 29): every value must be a finite number at least 0, every file a
readable usage file, else a located refusal — the file, the row (or line) and the column — and
the same refusal from the Python reader and the local engine (DuckDB), whatever the format, the
row the hostile value is in, and whether the files come one by one or as a directory. Through the
CLI: exit 1, the message, no traceback."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kqplan.core.entity import Entity
from kqplan.core.errors import KqplanError
from kqplan.fleet.columnar import impact_of_files
from kqplan.fleet.impact import impact_rows
from kqplan.fleet.usage import USAGE_KEYS, Sample, read_usage
from tests.helpers import fleet_cli, write_manifest

FLEET: Any = {"c": ({}, {Entity.user(None): {"producer_byte_rate": 10.0}})}


def refusals(paths: list[Path]) -> tuple[str, str]:
    """The Python reader's refusal and the local engine's, as (message, hint) text."""
    found = []
    for run in (lambda: read_usage(paths), lambda: impact_of_files(FLEET, paths, 0.99)):
        with pytest.raises(KqplanError) as err:
            run()
        found.append(f"{err.value.message} | {err.value.hint}")
    return found[0], found[1]


def assert_refused(paths: list[Path], expected: str) -> str:
    python, duckdb = refusals(paths)
    assert python == duckdb
    assert expected in python, python
    return python


# -- through the command line (first: the YAML parser has crashed in a thread late in a process) --

@pytest.fixture
def project(tmp_path: Path) -> Path:
    from kqplan.snapshot.file import write_snapshot

    write_snapshot(tmp_path / "c.json", {Entity.user("alice"): {"producer_byte_rate": 20.0}}, "c-id")
    write_manifest(tmp_path / "m" / "q.yaml",
                   "entities:\n  - user: alice\n    quotas: {producer_byte_rate: 10}\n")
    (tmp_path / "kqplan.toml").write_text(
        '[clusters.c]\nid = "c-id"\nsnapshot = "c.json"\nmanifests = ["m"]\n')
    return tmp_path


@pytest.mark.parametrize(("name", "content", "expected"), [
    # a NaN sample with --fail-on-throttle: refused, whatever the row order
    ("u.csv", "cluster,user,producer_byte_rate,ts\nc,alice,5,0\nc,alice,NaN,1\nc,alice,50,2\n",
     r"u\.csv: row 2: producer_byte_rate is not a number: 'NaN'"),
    ("u.csv", "cluster,user,producer_byte_rate,ts\nc,alice,NaN,1\nc,alice,50,2\n",
     r"u\.csv: row 1: producer_byte_rate is not a number: 'NaN'"),
    ("u.jsonl", '{"cluster": "c", "user": "alice", "producer_byte_rate": -50}\n',
     r"u\.jsonl: line 1: producer_byte_rate is negative: -50"),
    ("u.jsonl", "[]\n", r"u\.jsonl: line 1: not a JSON object \(a list\)"),
    ("u.csv", "c,alice,50\n", r"u\.csv: line 1: the header has no cluster column"),
])
def test_fleet_impact_refuses_a_hostile_usage_file_cleanly(project, name, content, expected):
    usage = project / "usage"
    usage.mkdir()
    (usage / name).write_text(content)
    result = fleet_cli(project, "impact", "--usage", usage, "--out", project / "out", "--fail-on-throttle")
    assert result.exit_code == 1, result.stdout
    assert re.search(expected, result.stderr), result.stderr
    assert result.stderr.startswith("Error: ")
    assert "Traceback" not in result.stdout + result.stderr
    assert not (project / "out" / "impact.parquet").exists()


# -- a hostile value at a random row, in every format -------------------------------------------------

CSV_HOSTILE = [("nan", "is not a number: 'nan'"), ("NaN", "is not a number: 'NaN'"),
               ("inf", "is not a number: 'inf'"), ("-inf", "is not a number: '-inf'"),
               ("-1", "is negative: '-1'"), ("-0.5e-3", "is negative: '-0.5e-3'"),
               ("true", "is not a number: 'true'"), ("false", "is not a number: 'false'"),
               ("1e999", "is not a number: '1e999'"), ("0x10", "is not a number: '0x10'")]
JSON_HOSTILE = [("NaN", "is not a number: nan"), ("Infinity", "is not a number: inf"),
                ("-Infinity", "is not a number: -inf"), ("-1", "is negative: -1"),
                ("-2.5", "is negative: -2.5"),
                ("true", "is not a number: True"), ("false", "is not a number: False"),
                ('{"a": 1}', "is not a number: {'a': 1}"), ("[1]", "is not a number: [1]"),
                ('"-3"', "is negative: '-3'"), ('"nan"', "is not a number: 'nan'"),
                ("1e400", "is not a number: inf")]
PARQUET_HOSTILE: list[tuple[Any, Any, str]] = [
    (float("nan"), pa.float64(), "is not a number: nan"),
    (float("inf"), pa.float64(), "is not a number: inf"),
    (float("-inf"), pa.float32(), "is not a number: -inf"), (-1.0, pa.float64(), "is negative: -1.0"),
    (-7, pa.int64(), "is negative: -7"), (True, pa.bool_(), "is not a number: True"),
    (b"1", pa.binary(), "is not a number: b'1'"), ("-1", pa.string(), "is negative: '-1'")]
LINE_HOSTILE = [("5", "not a JSON object (a number)"), ("[1, 2]", "not a JSON object (a list)"),
                ('"x"', "not a JSON object (a string)"), ("null", "not a JSON object (null)"),
                ("true", "not a JSON object (a boolean)"), ('{"cluster": ', "not JSON"),
                ('{"cluster": "c", "cluster": "d", "user": "u"}', "names cluster twice")]

rows = st.lists(st.tuples(st.sampled_from(["u1", "u2", "日本"]), st.sampled_from(USAGE_KEYS),
                          st.floats(0, 1e12, allow_nan=False) | st.integers(0, 10**15)), max_size=12)
fast = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def fresh(tmp_path: Path, name: str) -> Path:
    directory = Path(os.path.join(tmp_path, f"x{len(list(tmp_path.iterdir()))}"))
    directory.mkdir()
    return directory / name


@fast
@given(rows, st.data(), st.sampled_from(CSV_HOSTILE), st.sampled_from(USAGE_KEYS))
def test_a_hostile_csv_cell_is_refused_at_its_row_and_column(tmp_path, good, data, hostile, key):
    at = data.draw(st.integers(0, len(good)))
    lines = [f"c,{u},app,{v!r}" if k == key else f"c,{u},app," for u, k, v in good]
    lines.insert(at, f"c,u,app,{hostile[0]}")
    path = fresh(tmp_path, "usage.csv")
    path.write_text(f"cluster,user,client_id,{key}\n" + "\n".join(lines) + "\n")
    shown = assert_refused([path.parent], f"{path}: row {at + 1}: {key} {hostile[1]}")
    assert "a rate is a finite number >= 0" in shown


@fast
@given(rows, st.data(), st.sampled_from(JSON_HOSTILE), st.sampled_from(USAGE_KEYS))
def test_a_hostile_json_value_is_refused_at_its_line_and_key(tmp_path, good, data, hostile, key):
    lines = [json.dumps({"cluster": "c", "user": u, k: v}) for u, k, v in good]
    blanks = data.draw(st.lists(st.integers(0, len(lines)), max_size=3))
    for b in blanks:
        lines.insert(b, "")
    at = data.draw(st.integers(0, len(lines)))
    lines.insert(at, f'{{"cluster": "c", "user": "u", "{key}": {hostile[0]}}}')
    path = fresh(tmp_path, "usage.jsonl")
    path.write_text("\n".join(lines) + "\n")
    assert_refused([path], f"{path}: line {at + 1}: {key} {hostile[1]}")


@fast
@given(rows, st.data(), st.sampled_from(LINE_HOSTILE))
def test_a_json_line_that_is_no_object_is_refused_at_its_line(tmp_path, good, data, hostile):
    lines = [json.dumps({"cluster": "c", "user": u, k: v}) for u, k, v in good]
    at = data.draw(st.integers(0, len(lines)))
    lines.insert(at, hostile[0])
    path = fresh(tmp_path, "usage.json")
    path.write_text("\n".join(lines) + "\n")
    assert_refused([path], f"{path}: line {at + 1}: {hostile[1]}")


@fast
@given(st.integers(0, 40), st.data(), st.sampled_from(PARQUET_HOSTILE), st.sampled_from(USAGE_KEYS),
       st.integers(1, 9))
def test_a_hostile_parquet_value_is_refused_at_its_row_and_column(tmp_path, n, data, hostile, key, group):
    at = data.draw(st.integers(0, n))
    value, arrow, message = hostile
    good = [1 if arrow == pa.bool_() else b"2" if arrow == pa.binary() else "3" if arrow == pa.string()
            else 4 for _ in range(n)]
    cells = [None if arrow in (pa.bool_(), pa.binary()) else g for g in good]
    cells.insert(at, value)
    table = pa.table({"cluster": ["c"] * (n + 1), "user": [f"u{i}" for i in range(n + 1)],
                      key: pa.array(cells, arrow)})
    path = fresh(tmp_path, "usage.parquet")
    pq.write_table(table, path, row_group_size=group)
    assert_refused([path], f"{path}: row {at + 1}: {key} {message}")


# -- names that are no text --------------------------------------------------------------------------

@pytest.mark.parametrize(("line", "message"), [
    ('{"cluster": 5, "user": "u"}', "line 1: cluster is not text: 5"),
    ('{"cluster": "c", "user": ["u"]}', "line 1: user is not text: ['u']"),
    ('{"cluster": "c", "user": "u", "client_id": true}', "line 1: client_id is not text: True"),
    ('{"cluster": "c", "user": "u", "client_id": 1.5}', "line 1: client_id is not text: 1.5"),
    ('{"cluster": "c", "user": "u", "client_id": {}}', "line 1: client_id is not text: {}"),
    ('{"cluster": "c", "user": ""}', "line 1: cluster and user are required: user is empty"),
    ('{"user": "u"}', "line 1: cluster and user are required: cluster is missing"),
    ('{"cluster": "c", "user": "caf\\ufffd"}', "line 1: user holds U+FFFD"),
])
def test_names_that_are_no_text_are_refused(tmp_path, line, message):
    path = tmp_path / "u.jsonl"
    path.write_text(line + "\n")
    assert_refused([path], f"{path}: {message}")


def test_an_integer_client_id_is_read_as_its_digits(tmp_path):
    (tmp_path / "u.jsonl").write_text('{"cluster": "c", "user": "u", "client_id": 42, '
                                      '"producer_byte_rate": 0}\n')
    assert read_usage([tmp_path]).samples == [Sample("c", "u", "42", "producer_byte_rate", 0.0)]


# -- files that are no usage file ----------------------------------------------------------------------

def test_a_csv_with_a_bom_is_read_as_without(tmp_path):
    text = "cluster,user,client_id,producer_byte_rate\nc,u,app,5\n"
    (tmp_path / "bom.csv").write_bytes(b"\xef\xbb\xbf" + text.encode())
    expected = [Sample("c", "u", "app", "producer_byte_rate", 5.0)]
    assert read_usage([tmp_path]).samples == expected
    assert impact_of_files(FLEET, [tmp_path], None) == impact_rows(FLEET, read_usage([tmp_path]), None)
    got = impact_of_files(FLEET, [tmp_path], None).rows
    assert [r.usage for r in got if r.key == "producer_byte_rate"] == [5.0]


@pytest.mark.parametrize(("content", "expected"), [
    (b"", "line 1: no header (the file is empty)"),
    (b"\n\nc,u,1\n", "line 1: no header (the first line is empty)"),
    (b"c,u,app,5\nc,v,app,6\n", "line 1: the header has no cluster column: c,u,app,5"),
    (b"cluster,producer_byte_rate\nc,5\n", "line 1: the header has no user column"),
    (b"cluster,user,producer_byte_rate,producer_byte_rate\nc,u,1,2\n", "line 1: the header names "
     "producer_byte_rate twice"),
    (b"cluster,user\nc,ok\nc,caf\xe9\n", "line 3: not UTF-8 (byte 0xe9 at column 6)"),
    (b"\xff\xfec\x00l\x00", "line 1: not UTF-8 (byte 0xff at column 1)"),  # UTF-16
    (b'cluster,user,producer_byte_rate\nc,u,"' + b"1" * 200_000 + b'"\n', "row 1: not CSV: field larger"),
])
def test_csv_files_that_are_no_usage_are_refused_where(tmp_path, content, expected):
    path = tmp_path / "u.csv"
    path.write_bytes(content)
    assert_refused([path], f"{path}: {expected}")
    assert_refused([tmp_path], f"{path}: {expected}")


def test_parquet_files_that_are_empty_or_corrupt_are_refused(tmp_path):
    empty = tmp_path / "empty.parquet"
    empty.write_bytes(b"")
    assert_refused([tmp_path], f"{empty}: not a Parquet file")
    empty.unlink()
    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_bytes(b"PAR1" + b"\x00" * 64 + b"PAR1")
    assert_refused([tmp_path], f"{corrupt}: not a Parquet file")


def test_a_directory_named_like_a_usage_file(tmp_path):
    usage = tmp_path / "usage"
    (usage / "x.csv").mkdir(parents=True)
    assert_refused([usage], f"{usage / 'x.csv'}: a directory named like a usage file, holding no usage file")
    assert_refused([usage / "x.csv"], f"{usage / 'x.csv'}: a directory named like a usage file")
    # as Spark writes a CSV "file": a directory of parts, read as a directory
    (usage / "x.csv" / "part-0.csv").write_text("cluster,user,producer_byte_rate\nc,u,3\n")
    (usage / "x.csv" / "_SUCCESS").write_text("")
    for paths in ([usage], [usage / "x.csv"]):
        assert read_usage(paths).samples == [Sample("c", "u", "", "producer_byte_rate", 3.0)]
        assert len(impact_of_files(FLEET, paths, None).rows) == 4


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_fifo_or_device_in_a_usage_directory_is_refused_unread(tmp_path, kind):
    usage = tmp_path / "usage"
    usage.mkdir()
    (usage / "a.csv").write_text("cluster,user,producer_byte_rate\nc,u,3\n")
    hostile = usage / "b.jsonl"
    if kind == "fifo":
        os.mkfifo(hostile)  # nobody writes to it: reading it would block forever
    else:
        hostile.symlink_to("/dev/zero")  # read until memory runs out
    what = "a FIFO" if kind == "fifo" else "a device"
    for paths in ([usage], [hostile]):
        assert_refused(paths, f"cannot read usage file {hostile}: it is {what}, not a regular file")
