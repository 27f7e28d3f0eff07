"""Reading a saved plan file: ``apply --plan FILE`` and ``show FILE`` read it the same way."""

from __future__ import annotations

from pathlib import Path

from kqplan.core.plan import Plan
from kqplan.files import DEFAULT_INPUT_LIMIT, read_bounded
from kqplan.planfile.codec import loads_plan


def read_plan(path: Path, *, limit: int = DEFAULT_INPUT_LIMIT) -> Plan:
    """A regular file of at most ``limit`` bytes (``[limits] max-input-mib``), checked as a saved
    plan (schema, digest, ops and counts)."""
    return loads_plan(read_bounded(path, what="saved plan", limit=limit), source=str(path))
