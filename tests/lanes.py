"""The test suite's lanes on pytest-xdist workers (tests/conftest.py).

A lane is a scope of xdist's LoadScopeScheduling: its tests go to one worker, in the order of
collection, and the scopes with the most tests are handed out first. ``--dist loadgroup`` would
do this with ``xdist_group`` marks, but pytest 9.2 gives tests structured node ids that the
group's suffix no longer reaches, and the groups are silently ignored (pytest-xdist#1386): the
lanes are found from the node ids themselves.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from xdist.scheduler import LoadScopeScheduling

SPARK = re.compile(r"\b(spark|pyspark|connect_server|spark_cluster)\b")
"""A module whose text says this may start Spark: its tests share the Spark lane."""
APART = {"tests/fleet/standalone_test.py": "standalone", "tests/project/extras_test.py": None}
"""Modules that name Spark but run it only in subprocesses (a Spark standalone cluster; fresh
venvs): no JVM of the worker's own, so no Spark lane; the standalone cluster's tests stay together
(one module-scoped cluster)."""
DRIVER_HEAP_GIB = 3
"""The heap of the one Spark driver a test process runs (the Spark lane's): hundreds of jobs in one
JVM, where a kqplan process runs one job and ends; pyspark's default 1 GiB ran out late in full
runs ("Java heap space" in a task's serialisation)."""

KAFKA = "real_kafka-"
"""In the parameter id of a test run against a real broker (tests/kafka/plugin.py's ``spec_id``)."""


@cache
def _spark(path: str) -> bool:
    try:
        return bool(SPARK.search(Path(path).read_text(encoding="utf-8")))
    except OSError:
        return False


def lane(nodeid: str, root: Path) -> str | None:
    """The lane of a test (``spark``, ``kafka``, ``standalone``), or None: any worker."""
    module = nodeid.split("::", 1)[0]
    if module in APART:
        return APART[module]
    if _spark(str(root / module)):
        return "spark"
    name = nodeid.rsplit("::", 1)[-1]
    if "[" in name and KAFKA in name[name.index("["):]:
        return "kafka"
    return None


class Lanes(LoadScopeScheduling):
    """Each lane one scope; every other test a scope of its own."""

    def _split_scope(self, nodeid: str) -> str:
        return lane(nodeid, Path(self.config.rootpath)) or nodeid
