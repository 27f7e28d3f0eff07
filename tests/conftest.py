"""Shared fixtures. Each plugin module owns one family of fixtures.

The suite runs on two pytest-xdist workers (``-n 2 --dist loadgroup`` in pyproject.toml): every
test of a module that uses Spark runs in one lane, in the order of collection, in one process (one
JVM, and the Spark Connect tests before the local session's, as tests/fleet/conftest.py needs);
every test of the real brokers in another (each broker starts once, tests/kafka/plugin.py orders
them); the others go to whichever worker is free. ``-p no:xdist`` (or ``-n 0``) runs it all in
this process, as before."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["tests.kafka.plugin", "tests.live"]

_SPARK = re.compile(r"\b(spark|pyspark|connect_server|spark_cluster)\b")
"""A module whose text says this may start Spark: its tests share the Spark lane."""


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups off the items
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put each test in its lane: ``spark``, ``kafka`` or none (any worker)."""
    spark: dict[Path, bool] = {}
    for item in items:
        path = Path(item.path)
        if path not in spark:
            spark[path] = bool(_SPARK.search(path.read_text(encoding="utf-8")))
        if spark[path]:
            item.add_marker(pytest.mark.xdist_group("spark"))
        elif item.get_closest_marker("real_kafka") is not None:
            item.add_marker(pytest.mark.xdist_group("kafka"))
