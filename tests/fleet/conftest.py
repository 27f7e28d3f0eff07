"""One local SparkSession for the fleet tests (a JVM start costs seconds), stopped at the end."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from kqplan.fleet.spark import session

    with session(master="local[1]") as active:
        yield active
