"""The local engine within its memory (issue 42): DuckDB's memory is sized from the machine or set by
``[limits] engine-memory-mib``, it spills under ``[limits] engine-spill`` (or nowhere), and what it
computes does not depend on either: many principals × many windows in a small memory give the
reference's impact. An exact statistic that must hold every sample at once and cannot fit is
refused before the work, with the ways out; a spill directory that cannot be written is named."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kqplan.core.entity import Entity
from kqplan.core.errors import KqplanError
from kqplan.fleet.columnar import impact_of_files
from kqplan.fleet.impact import impact_rows
from kqplan.fleet.resources import MEMORY_CEILING, MEMORY_FLOOR, Resources, default_memory, physical_memory
from kqplan.fleet.usage import read_usage
from kqplan.snapshot.file import write_snapshot
from tests.fleet.columnar_test import assert_same_impact
from tests.helpers import run_cli, write_manifest

P, C = "producer_byte_rate", "consumer_byte_rate"
MIB = 2**20


def _windows(path: Path, principals: int, windows: int) -> Path:
    """One row per principal per 60 s window (issue 42's shape), a seventh with an empty client-id;
    rates that differ per row."""
    rows = principals * windows
    ids = [r % principals for r in range(rows)]
    pq.write_table(pa.table({
        "cluster": pa.array(["c"] * rows),
        "user": pa.array([f"u{i // 3}" for i in ids]),
        "client_id": pa.array(["" if i % 7 == 0 else f"app{i % 3}" for i in ids]),
        "ts": pa.array([60.0 * (r // principals) + (r % 59) for r in range(rows)]),
        P: pa.array([float((r * 7919) % 1000) for r in range(rows)]),
        C: pa.array([float((r * 104729) % 5000) / 3 for r in range(rows)]),
    }), path)
    return path


STATES = {"c": ({Entity.user(None): {P: 500.0}, Entity.user("u1"): {P: 100.0, C: 50.0}},
                {Entity.user(None): {P: 400.0}, Entity.client("app1"): {P: 900.0, C: 2000.0},
                 Entity.user_client("u2", "app2"): {C: 7.0}})}


def test_many_principals_and_windows_in_a_small_memory_give_the_reference_impact(tmp_path: Path) -> None:
    """3,000 principals × 40 windows: the window means are 120,000 groups, DuckDB has 32 MiB and
    spills; rows, buckets and unused entries equal the reference's (p99 and max), as with the
    memory sized from the machine."""
    path = _windows(tmp_path / "usage.parquet", 3_000, 40)
    usage = read_usage([path], buckets=True)
    for q in (0.99, None):
        expected = impact_rows(STATES, usage, q)
        small = impact_of_files(STATES, [path], q, resources=Resources(32 * MIB, tmp_path))
        assert_same_impact(expected, small)
        assert_same_impact(expected, impact_of_files(STATES, [path], q))
    assert list(tmp_path.glob("kqplan-duckdb-*")) == []  # its spill directory is gone


def _one_principal(path: Path, rows: int) -> Path:
    pq.write_table(pa.table({"cluster": ["c"] * rows,
                             "user": ["u1"] * rows, "client_id": [""] * rows,
                             "ts": pa.array(range(rows), pa.float64()),
                             P: pa.array([r % 97 for r in range(rows)], pa.float64())}), path)
    return path


def test_an_exact_median_that_cannot_fit_is_refused_before_the_work(tmp_path: Path) -> None:
    """p50 of 10^6 samples of one principal by DuckDB's quantile_cont (``held`` 0) holds them all
    (~23 MiB): with 16 MiB it is refused before the statistics start, with the count, the size
    and the ways out; with room for it, computed (equal to the reference)."""
    path = _one_principal(tmp_path / "one.parquet", 1_000_000)
    with pytest.raises(KqplanError) as err:
        impact_of_files(STATES, [path], 0.5, held=0, resources=Resources(16 * MIB, None))
    assert err.value.message == (
        "the exact p50 of producer_byte_rate holds every one of its 1,000,000 samples at once (~23 MiB): "
        "more than the local engine's memory (16 MiB)")
    assert err.value.hint is not None
    assert "--stat max" in err.value.hint
    assert "engine-memory-mib" in err.value.hint
    assert "--engine spark" in err.value.hint
    expected = impact_rows(STATES, read_usage([path], buckets=True), 0.5)
    assert_same_impact(expected, impact_of_files(STATES, [path], 0.5, held=0,
                                                 resources=Resources(256 * MIB, None)), exact_usage=False)
    # the same median from the top values (held by default): a few MiB, to the bit
    assert_same_impact(expected, impact_of_files(STATES, [path], 0.5, resources=Resources(64 * MIB, None)))


def test_a_spill_directory_that_cannot_be_written_is_named(tmp_path: Path) -> None:
    path = _windows(tmp_path / "usage.parquet", 10, 2)
    blocked = tmp_path / "file-not-dir"
    blocked.write_text("")
    with pytest.raises(KqplanError) as err:
        impact_of_files(STATES, [path], None, resources=Resources(64 * MIB, blocked))
    assert err.value.message.startswith(f"the local engine cannot spill to {blocked}: ")
    assert err.value.hint is not None
    assert "engine-spill" in err.value.hint


def test_the_memory_is_sized_from_the_machine() -> None:
    total = physical_memory()
    assert total is not None
    assert total > 0
    assert default_memory() == max(MEMORY_FLOOR, min(MEMORY_CEILING, total // 4))
    assert Resources.of().memory == default_memory()
    assert Resources.of(100).memory == 100 * MIB
    assert Resources.of(None, "").spill is None


def _project(tmp_path: Path, limits: str) -> Path:
    write_manifest(tmp_path / "q" / "q.yaml",
                   "entities:\n  - user: u1\n    quotas: {producer_byte_rate: 100}\n")
    write_snapshot(tmp_path / "snap.json", {Entity.user("u1"): {P: 50.0}}, None)
    (tmp_path / "kqplan.toml").write_text(f'[limits]\n{limits}\n\n[clusters.c]\nsnapshot = "snap.json"\n'
                                          'manifests = ["q"]\n')
    return tmp_path


@pytest.mark.parametrize(("limits", "said"), [
    ('engine-memory-mib = 1\nengine-spill = ""',
     "the local engine ran out of its 1 MiB of memory with spilling off ([limits] engine-spill): "),
    ('engine-spill = "snap.json"', "the local engine cannot spill to {home}/snap.json: "),
])
def test_limits_reach_the_engine_from_kqplan_toml(tmp_path: Path, limits: str, said: str) -> None:
    """``fleet impact`` and ``plan --usage`` run the engine within kqplan.toml's ``[limits]`` (a
    spill directory from kqplan.toml's): exit 1, the limit named, nothing written."""
    home = _project(tmp_path, limits)
    _windows(home / "usage.parquet", 30, 3)
    cwd = os.getcwd()
    os.chdir(home)
    try:
        impact = run_cli("fleet", "impact", "--usage", "usage.parquet", "--stat", "p99", "--out", "out")
        plan = run_cli("plan", "q", "--cluster", "c", "--usage", "usage.parquet")
    finally:
        os.chdir(cwd)
    for result in (impact, plan):
        assert result.exit_code == 1, result.stderr
        assert said.format(home=home.resolve()) in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
    assert not (home / "out").exists()


@pytest.mark.parametrize(("limits", "problem"), [
    ("engine-memory-mib = 0", "a whole number of MiB greater than 0"),
    ('engine-memory-mib = "1GB"', "a whole number of MiB greater than 0"),
    ("engine-spill = 3", 'a directory in quotes'),
    ("engine-spil = 'x'", "engine-spill"),
])
def test_bad_engine_limits_are_located_errors(tmp_path: Path, limits: str, problem: str) -> None:
    home = _project(tmp_path, limits)
    result = run_cli("validate", home / "q", "--config", home / "kqplan.toml")
    assert result.exit_code != 0
    assert "kqplan.toml:2" in result.stderr, result.stderr
    assert problem in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_one_principal_with_half_the_samples_fits_a_small_memory(tmp_path: Path) -> None:
    """Issue 42's skewed shape, small: one principal's p99 needs its top 401 values, and DuckDB
    sizes ``max(x, 401)`` for 401 values in every one of 3,001 groups; in 16 MiB the statistic
    takes ``quantile_cont`` instead (70,000 values) and gives the reference's impact."""
    big, others, each = 40_000, 3_000, 10
    rows = big + others * each
    ids = [0] * big + [1 + i // each for i in range(others * each)]
    pq.write_table(pa.table({
        "cluster": ["c"] * rows, "user": [f"u{i}" for i in ids], "client_id": [""] * rows,
        "ts": pa.array([float(r % 600) for r in range(rows)]),
        P: pa.array([float((r * 7919) % 1000) for r in range(rows)]),
    }), tmp_path / "skew.parquet")
    path = tmp_path / "skew.parquet"
    expected = impact_rows(STATES, read_usage([path], buckets=True), 0.99)
    assert_same_impact(expected, impact_of_files(STATES, [path], 0.99, resources=Resources(16 * MIB, None)),
                       exact_usage=False)


def test_the_scans_that_spill_get_512_mib_or_an_eighth_of_the_memory(tmp_path: Path) -> None:
    assert Resources(4 * 2**30, tmp_path).spilled == 512 * MIB
    assert Resources(8 * 2**30, tmp_path).spilled == 2**30
    assert Resources(256 * MIB, tmp_path).spilled == 256 * MIB
    assert Resources(4 * 2**30, None).spilled == 4 * 2**30  # nowhere to spill: they must fit


def test_the_scans_that_spill_run_within_their_share(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a share too small for any scan, the scan runs out of it (and says so) though the whole
    memory would hold it: the share is what DuckDB had. The share is given back afterwards."""
    import kqplan.fleet.resources as resources

    path = _windows(tmp_path / "usage.parquet", 300, 4)
    expected = impact_of_files(STATES, [path], 0.99, resources=Resources(32 * MIB, tmp_path))
    monkeypatch.setattr(resources, "SPILLED", 1 * MIB)
    with pytest.raises(KqplanError, match=r"ran out of its 32 MiB of memory \(4 MiB of it for the scans that "
                                          r"spill\) and spilling"):
        impact_of_files(STATES, [path], 0.99, resources=Resources(32 * MIB, tmp_path))
    assert_same_impact(expected, impact_of_files(STATES, [path], 0.99, resources=Resources(32 * MIB, None)))


@pytest.mark.parametrize("query", ["the scan", "the window means"])
def test_each_aggregation_that_spills_runs_within_the_share(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            query: str) -> None:
    """The usage's scan and the window means, each on its own: with a share too small for it
    (1 MiB of 32), DuckDB runs out of the share; with all 32 MiB it does not."""
    import duckdb

    import kqplan.fleet.resources as resources
    from kqplan.fleet.columnar import _scan, _window_means
    from kqplan.fleet.columnar_read import register_usage

    path = _windows(tmp_path / "usage.parquet", 300, 4)
    units = sorted({(r["cluster"], r["user"], r["client_id"], "") for r in pq.read_table(path).to_pylist()})

    def run(limits: Resources) -> None:
        con = duckdb.connect(config={"memory_limit": f"{limits.memory // MIB}MiB", "threads": 1,
                                     "temp_directory": str(tmp_path / "spill")})
        sources = register_usage(con, [path], buckets=True)
        if query == "the scan":
            _scan(con, sources, limits)
        else:
            _window_means(con, units, [P, C], window=60.0, limits=limits)
        con.close()

    run(Resources(32 * MIB, tmp_path))
    monkeypatch.setattr(resources, "SPILLED", 1 * MIB)
    run(Resources(32 * MIB, None))  # spilling off: the whole memory, no share
    with pytest.raises(duckdb.OutOfMemoryException):
        run(Resources(32 * MIB, tmp_path))


def test_a_share_of_the_memory_is_given_back_after_its_block() -> None:
    import duckdb

    from kqplan.fleet.columnar import _within

    con = duckdb.connect(config={"memory_limit": "100MiB"})

    def limit() -> str:
        return str(con.execute("SELECT current_setting('memory_limit')").fetchone()[0])  # type: ignore[index]

    whole = limit()
    with _within(con, 10 * MIB, 100 * MIB):
        assert limit() != whole
        assert limit().startswith(("10.0 MiB", "9."))
    assert limit() == whole
    with pytest.raises(ZeroDivisionError), _within(con, 10 * MIB, 100 * MIB):
        1 / 0  # noqa: B018
    assert limit() == whole
