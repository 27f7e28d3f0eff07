"""The local engine's DuckDB work beside Python (``columnar._beside``): an error in the Python
side stops the DuckDB side, even when it lands between two of its queries, before the
connection is given back."""

from __future__ import annotations

import threading
import time

import duckdb
import pytest

from kqplan.fleet.columnar import _beside

LONG = "SELECT sum(i) FROM range(200000000000) t(i)"  # minutes, unless interrupted


def test_an_error_between_two_queries_still_stops_the_second() -> None:
    con = duckdb.connect()
    between = threading.Event()

    def work() -> object:
        con.execute("SELECT 1").fetchall()
        between.set()
        time.sleep(0.3)  # the error lands here, while no query runs
        return con.execute(LONG).fetchall()

    def python_side() -> None:
        with _beside(con, work):
            assert between.wait(10)
            raise RuntimeError("python side failed")

    started = time.monotonic()
    with pytest.raises(RuntimeError, match="python side failed"):
        python_side()
    assert time.monotonic() - started < 30  # the long query was interrupted, not run to its end
    assert con.execute("SELECT 2").fetchall() == [(2,)]  # the connection is free again
    con.close()


def test_the_work_s_own_error_is_raised_by_result() -> None:
    con = duckdb.connect()
    with _beside(con, lambda: con.execute("SELECT * FROM no_such_table").fetchall()) as done, \
            pytest.raises(duckdb.CatalogException):
        done.result()
    con.close()
