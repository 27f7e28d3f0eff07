"""``apply --verify-enforcement``: per quota bucket, whether Kafka enforces what the plan changed.

Plain values in (:class:`EnforcementRow`), text out; names escaped for a terminal."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from kqplan.render.escape import terminal

_MARKS = {"confirmed": "✓", "not yet observed": "?", "contradicted": "✗"}


@dataclass(frozen=True, slots=True)
class EnforcementRow:
    outcome: str
    """confirmed, not yet observed or contradicted."""
    bucket: str
    key: str
    expected: str
    """``throttled`` or ``not throttled``."""
    detail: str


def render_enforcement(rows: Sequence[EnforcementRow], waited: float) -> str:
    if not rows:
        return ("Enforcement: no bucket with traffic in the last 5 minutes has a quota this apply "
                "changed; nothing to verify.\n")
    counts = Counter(r.outcome for r in rows)
    told = ", ".join(f"{counts[o]} {o}" for o in _MARKS if counts[o])
    lines = [f"Enforcement after {waited:.0f} s: {told}."]
    for r in rows:
        lines.append(terminal(f"  {_MARKS.get(r.outcome, ' ')} {r.bucket} {r.key}: {r.outcome} "
                              f"(expected {r.expected}: {r.detail})"))
    return "\n".join(lines) + "\n"
