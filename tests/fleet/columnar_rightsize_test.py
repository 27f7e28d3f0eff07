"""fleet rightsize's columnar local engine (DuckDB) gives the reference's proposals: generated fleets
written as CSV, JSON lines and Parquet files give what ``proposal_rows(states, read_usage(paths).samples)``
gives, and the files the reference refuses (a quota bucket's row among them) are refused in its words."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kqplan.core.entity import Entity
from kqplan.core.errors import KqplanError
from kqplan.fleet.columnar import HELD
from kqplan.fleet.columnar_read import kinds
from kqplan.fleet.columnar_rightsize import proposals_of_files
from kqplan.fleet.rightsize import ProposalRow, Rules, proposal_rows
from kqplan.fleet.usage import USAGE_KEYS, read_usage
from tests.fleet.columnar_test import formats, usage_rows, write_csv, write_files
from tests.fleet.impact_test import same, usages
from tests.fleet.rightsize_test import rule_sets, states

P, C, R, M = USAGE_KEYS


def assert_same_rows(expected: list[ProposalRow], got: list[ProposalRow], *, exact_usage: bool) -> None:
    """Equal, floats up to summation order (the bucket's usage and need); each principal's own
    statistic to the bit unless DuckDB's quantile_cont computed it (``exact_usage`` false); every
    decision (proposal, action, what is written where) the same."""
    assert len(got) == len(expected)
    for a, b in zip(expected, got, strict=True):
        assert all(same(x, y) for x, y in zip(
            (getattr(a, c) for c in a.__slots__), (getattr(b, c) for c in b.__slots__), strict=True)), (a, b)
        assert (a.proposal, a.action, a.after_value, a.after_source) == \
            (b.proposal, b.action, b.after_value, b.after_source), (a, b)
        assert not exact_usage or a.usage == b.usage, (a, b)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(["c", "d"]), states, min_size=1), usages(), rule_sets,
       st.sampled_from([1.0, 60.0]), formats, st.lists(st.booleans(), max_size=40),
       st.sampled_from([HELD, 0, 4]))
def test_generated_fleets_give_the_reference_proposals(tmp_path, fleet, usage, rules, window, parts, merge,
                                                       held):
    """Clusters timed, untimed or both, one of them perhaps not described (its rows left out);
    ``held``: every statistic from its top or bottom values, from DuckDB's quantile_cont, or a few
    keys per query."""
    directory = Path(tempfile.mkdtemp(dir=tmp_path))
    paths = write_files(directory, usage_rows(usage, merge), parts)
    expected = proposal_rows(fleet, read_usage(paths).samples, rules, window=window)
    exact = rules.q is None or held == HELD
    heard: list[set[str]] = []
    got = proposals_of_files(fleet, paths, rules, window=window, held=held,
                             seen=lambda c: heard.append(set(c)))
    assert_same_rows(expected, got, exact_usage=exact)
    assert heard == [{s.cluster for s in usage.samples} | {p[0] for p in usage.principals}]
    # the directory: its files in name order, as the Python reader finds them
    assert_same_rows(expected, proposals_of_files(fleet, [directory], rules, window=window, held=held),
                     exact_usage=exact)


def test_buckets_of_many_principals_timed_and_untimed(tmp_path):
    """A {user=U} bucket of five clients over windows where they overlap and where they do not, a
    {client-id=C} bucket across users, an unlimited principal, and an untimed cluster: the
    reference's rows, windows and samples."""
    state = {Entity.user("u0"): {P: 100.0}, Entity.client("shared"): {C: 50.0}, Entity.user(None): {R: 5.0}}
    rows = [{"cluster": "c", "user": f"u{u}", "client_id": c, "ts": float(t * 60 + u * 7),
             P: 10.0 + u + t, C: 5.0 * (u + 1), R: 0.5 * t}
            for u in range(3) for n, c in enumerate(("shared", "", "c1", "c2", "c3"))
            for t in range(3 + (u * 5 + n) % 7)]  # each principal its own count of samples
    rows += [{"cluster": "d", "user": "v", "client_id": c, "ts": None, P: 3.0 * n}
             for n, c in enumerate(("a", "b", "a", ""))]
    random.Random(7).shuffle(rows)
    path = tmp_path / "usage.csv"
    write_csv(path, rows, 1)
    for stat in ("max", "p99", "p50", "p1"):
        rules = Rules.of(stat=stat, headroom=1.5, tolerance=0.2, min_samples=3)
        expected = proposal_rows({"c": state, "d": {}}, read_usage([path]).samples, rules)
        got = proposals_of_files({"c": state, "d": {}}, [path], rules)
        assert_same_rows(expected, got, exact_usage=True)
        assert {r.windows for r in got if r.cluster == "d"} == {None}
        assert max(r.windows or 0 for r in got) == 9  # a window per t


def refused_alike(path: Path) -> str:
    """The error both engines raise for ``path``: the same message and hint."""
    rules = Rules.of(stat="max", headroom=1.5, tolerance=0.0)
    with pytest.raises(KqplanError) as reference:
        proposal_rows({"c": {}}, read_usage([path]).samples, rules)
    with pytest.raises(KqplanError) as columnar:
        proposals_of_files({"c": {}}, [path], rules)
    assert (str(columnar.value), columnar.value.hint) == (str(reference.value), reference.value.hint)
    return str(columnar.value)


@pytest.mark.parametrize(("row", "message"), [
    ("c,,app,user,5,1", "bucket"),  # a {user=U} bucket's row (of no user)
    ("c,u,,user,5,1", "bucket"),  # a {user=U} bucket's row
    ("c,u,app,client-id,5,1", "bucket"),
    ("c,u,app,,-5,1", "negative"),
    ("c,u,app,,1e30,1", "beyond any quota"),  # read, then no step covers it
])
def test_what_the_reference_refuses_is_refused_in_its_words(tmp_path, row, message):
    path = tmp_path / "usage.csv"
    path.write_text(f"cluster,user,client_id,bucket,{P},ts\nc,ok,app,,1,1\n{row}\n", encoding="utf-8")
    assert message in refused_alike(path)


def test_a_buckets_row_in_parquet_duckdb_reads_is_refused_in_the_references_words(tmp_path):
    """Parquet of ordinary types is read by DuckDB itself: its refusal of a bucket's row (read by
    fleet impact, refused by rightsize) is the Python reader's, word for word."""
    path = tmp_path / "usage.parquet"
    pq.write_table(pa.table({"cluster": ["c", "c"], "user": ["ok", "u"], "client_id": ["app", ""],
                             "bucket": ["", "user"], P: [1.0, 5.0], "ts": [1.0, 2.0]}), path)
    assert kinds(path) is not None  # DuckDB's to read
    assert "row 2" in refused_alike(path)
