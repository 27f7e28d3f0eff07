"""Shared fixtures. Each plugin module owns one family of fixtures.

The suite runs on two pytest-xdist workers (``-n 2`` in pyproject.toml), in lanes
(:class:`tests.lanes.Lanes`): every test of a module that may start Spark runs in one lane, in the
order of collection, in one process (one JVM, and the Spark Connect tests before the local
session's, as tests/fleet/conftest.py needs); every real-broker test in another (each broker starts
once, in the order tests/kafka/plugin.py gives them); the others go to whichever worker is free.
``-n 0`` runs it all in this process, as before."""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

pytest_plugins = ["tests.kafka.plugin", "tests.live"]

def pytest_configure(config: pytest.Config) -> None:
    """Before any test can start a JVM: pyspark reads PYSPARK_SUBMIT_ARGS when it launches its
    gateway, and a stopped session leaves the gateway running for every later session of the
    process, so the first test to start Spark in-process (not necessarily the ``spark`` fixture)
    fixes the driver's heap for the rest of the run. Subprocesses inherit it (a maximum, not an
    allocation)."""
    from tests.lanes import DRIVER_HEAP_GIB

    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", f"--driver-memory {DRIVER_HEAP_GIB}g pyspark-shell")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from tests.lanes import Lanes

    return Lanes(config, log)


@pytest.fixture(autouse=True, scope="module")
def _release_spark_objects() -> Iterator[None]:
    """After each module, Python's full collection in a process with a local Spark session: the
    Java objects a module's jobs made stay alive in the JVM while Python objects in reference
    cycles still point at them, and Python rarely runs its oldest generation in a process of this
    size: the one driver of the Spark lane ran out of heap late in a full run (3 GiB)."""
    yield
    if "pyspark" in sys.modules:
        gc.collect()
