"""What the fleet engines may use of this machine: memory sized from the machine (or its cgroup)
or from kqplan.toml's ``[limits]``, and where the local engine spills. The local engine
(:mod:`kqplan.fleet.columnar`) gives it to DuckDB; the Spark engine to a driver it starts
(:mod:`kqplan.fleet.spark_memory`)."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kqplan.config.model import ProjectConfig

MEMORY_FLOOR, MEMORY_CEILING = 512 * 2**20, 4 * 2**30
"""DuckDB's memory when ``[limits] engine-memory-mib`` does not set it (:func:`default_memory`)."""

SPILLED = 512 * 2**20
"""What DuckDB's aggregations that spill (the usage's scan, the window means) may hold, spilling
on; they run while Python holds the resolved principals (benchmarks/README.md, issue 42: the peak
at 10M samples about 0.8x, at 30M 0.56x, at the same speed). The statistics get the whole memory."""


@dataclass(frozen=True)
class Resources:
    """What the local engine may use: DuckDB's memory (bytes) and where it spills what does not fit
    (None: nowhere; the work must fit in memory)."""

    memory: int
    spill: Path | None

    @property
    def spilled(self) -> int:
        """DuckDB's memory for the aggregations that spill: :data:`SPILLED`, or an eighth of
        ``memory`` when more; all of it when spilling is off (they must fit)."""
        return min(self.memory, max(SPILLED, self.memory // 8)) if self.spill is not None else self.memory

    @classmethod
    def of(cls, memory_mib: int | None = None, spill: str | None = None) -> Resources:
        """From ``[limits]``: ``engine-memory-mib`` (default :func:`default_memory`) and
        ``engine-spill`` (a directory; "" for none; default the system's temporary directory)."""
        memory = memory_mib * 2**20 if memory_mib is not None else default_memory()
        if spill is None:
            return cls(memory, Path(tempfile.gettempdir()))
        return cls(memory, Path(spill) if spill else None)

    @classmethod
    def of_project(cls, config: ProjectConfig) -> Resources:
        """What kqplan.toml's ``[limits]`` give the engine."""
        return cls.of(config.engine_memory_mib, config.engine_spill)


def default_memory() -> int:
    """A quarter of the memory this process may have (the machine's, or its cgroup's limit when
    lower), within :data:`MEMORY_FLOOR` and :data:`MEMORY_CEILING`."""
    total = physical_memory()
    return max(MEMORY_FLOOR, min(MEMORY_CEILING, total // 4)) if total else MEMORY_FLOOR


def physical_memory() -> int | None:
    """Bytes of memory this process may have: the machine's, or its cgroup's limit when lower."""
    try:
        total: int | None = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = None
    for limit in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(limit).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and (total is None or int(text) < total):
            total = int(text)
    return total
