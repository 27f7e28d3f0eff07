"""A blast radius (who a plan's change affects) as text and as JSON."""

from __future__ import annotations

from typing import Any

from kqplan.core.impact import Impact, Side
from kqplan.render.escape import terminal


def render_impact_text(impact: Impact, *, limit: int = 100) -> str:
    """``Blast radius: …`` then each changed principal with ``key = before -> after`` lines (names
    and keys written :func:`~kqplan.render.escape.terminal`)."""
    lines = [f"Blast radius: {impact.summary.line}"]
    for item in impact.principals[:limit]:
        lines.append(f"  {terminal(item.entity.display)}")
        lines.extend(terminal(f"      {k.marker} {k.key} = {k.before.show()} -> {k.after.show()}")
                     for k in item.keys)
    hidden = len(impact.principals) - limit
    if hidden > 0:
        lines.append(f"  … and {hidden} more (use --format json for every principal)")
    return "\n".join(lines) + "\n"


def _side_json(side: Side) -> dict[str, Any]:
    return {"value": side.value,
            "source": side.source.to_json() if side.source is not None else None}


def impact_to_json(impact: Impact) -> dict[str, Any]:
    s = impact.summary
    return {
        "summary": {"checked": s.checked, "changed": s.changed, "lose_limit": s.lose_limit,
                    "gain_limit": s.gain_limit},
        "principals": [
            {"entity": p.entity.to_json(),
             "keys": {k.key: {"before": _side_json(k.before), "after": _side_json(k.after)}
                      for k in p.keys}}
            for p in impact.principals
        ],
    }
