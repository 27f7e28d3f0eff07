"""A blast radius (who a plan's change affects) as text and as JSON; ``fleet impact``'s summary
(who a fleet's plans would throttle, per bucket) as text, Markdown and JSON."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from kqplan.core.impact import Impact, Side
from kqplan.render.escape import markdown_code, markdown_text, terminal


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


def with_impact(plan_json: str, impact: Impact | None) -> str:
    """The plan's JSON on stdout with ``"impact"``, the blast radius of ``--principals`` (the saved
    plan file keeps the plan alone); without one, the plan's JSON as it is."""
    if impact is None:
        return plan_json
    data = json.loads(plan_json)
    data["impact"] = impact_to_json(impact)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


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


# -- fleet impact's summary ------------------------------------------------------------------------

UNLIMITED = "principals unlimited after the plan (a key they use has no quota)"
"""What the summary's ``unlimited`` counts, in its words."""


def _buckets(items: Sequence[Mapping[str, Any]], *, markdown: bool) -> str:
    """Buckets as ``{user=a} request_percentage (2 principals)``, the first ten (each escaped)."""
    shown = [f"{markdown_code(t['bucket'], cell=True) if markdown else t['bucket']} "
             f"{markdown_text(t['key']) if markdown else t['key']} "
             f"({t['members']} principal{'s' if t['members'] != 1 else ''})" for t in items]
    listed = ", ".join(shown[:10]) + (f" … and {len(shown) - 10} more" if len(shown) > 10 else "")
    return listed or ("—" if markdown else "none")


def render_fleet_impact(summary: Mapping[str, Mapping[str, Any]], fmt: str, charts: Sequence[str]) -> str:
    """``fleet impact``'s summary (the plain values of its JSON form, per cluster): ``json``, or a
    line per cluster, a Markdown table row (each name, bucket and error escaped for a table cell)
    or a line of text (escaped for a terminal). Buckets are counted as the chart counts them (one
    per key, with usage and a quota after the plan); the buckets a plan newly throttles and those
    whose members it relieves are listed, each with its principals."""
    if fmt == "json":
        return json.dumps({"clusters": summary, "charts": list(charts)}, indent=2) + "\n"
    markdown = fmt == "markdown"
    lines = ["### kqplan fleet impact", "",
             "| cluster | principals | buckets over their quota after the plan | newly throttled buckets "
             f"| relieved buckets | {UNLIMITED} | unused quota entries |",
             "|---|---:|---:|---|---|---:|---:|"] if markdown else []
    for cluster, s in summary.items():
        if s.get("error"):
            failed = f"| {markdown_code(cluster, cell=True)} | error: {markdown_text(s['error'])} |{' |' * 5}"
            lines.append(failed if markdown else terminal(f"{cluster}: error: {s['error']}"))
            continue
        over = f"{s['buckets']['over_quota']} of {s['buckets']['with_quota']}"
        hit, freed = (_buckets(s[k], markdown=markdown) for k in ("newly_throttled", "relieved"))
        bound = (" (samples without ts: each bucket's usage is its members' statistics summed, "
                 "an upper bound for max)") if s["bucket_usage"] == "summed" else ""
        if s.get("split_unknown"):  # never counted as throttled or not: named apart
            bound += f"; split unknown: {_buckets(s['split_unknown'], markdown=markdown)}"
        if markdown:
            lines.append(f"| {markdown_code(cluster, cell=True)} | {s['principals']} | {over} | {hit}"
                         f"{markdown_text(bound)} | {freed} | {s['unlimited']} | {s['unused_entries']} |")
        else:
            lines.append(terminal(f"{cluster}: {s['principals']} principals observed; {over} buckets over "
                                  f"their quota after the plan; newly throttled buckets: {hit}{bound}; "
                                  f"relieved buckets: {freed}; {s['unlimited']} {UNLIMITED}; "
                                  f"{s['unused_entries']} unused quota entries"))
    return "\n".join(lines) + "\n"
