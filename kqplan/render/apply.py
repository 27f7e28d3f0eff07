"""An apply report: per-entity lines and a terraform-style closing line, and the ``--report`` JSON."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kqplan.core.cluster import error_name
from kqplan.core.plan import Action, same_value
from kqplan.core.report import ApplyReport, Status
from kqplan.core.units import format_number
from kqplan.render.text import paint


def report_to_json(report: ApplyReport) -> dict[str, Any]:
    """The ``--report`` file."""
    return {
        "format_version": 1,
        "status": report.status.value,
        "started_at": report.started_at,
        "finished_at": report.finished_at,
        "plan_digest": report.plan_digest,
        "error": report.error,
        "cluster": {"id": report.cluster.id, "bootstrap": report.cluster.address,
                    "version": report.cluster.version, "mode": report.cluster.mode},
        "ok": report.ok,
        "preflight_failed": report.preflight_failed,
        "summary": {s.value.replace(" ", "_"): report.count(s) for s in Status}
        | {"unchanged": report.unchanged},
        "batches": report.batches,
        "requests": dict(report.requests),
        # the describes verify took: Kafka shows an alter after a short read-after-write lag
        "verify": {"polls": report.verify_polls, "seconds": round(report.verify_seconds, 3)},
        "notes": list(report.notes),
        "entities": [
            {
                "entity": o.change.entity.to_json(),
                "display": o.change.display,
                "action": o.change.action.value,
                "status": o.status.value,
                "error": None if not o.error_code else {
                    "code": o.error_code, "name": error_name(o.error_code), "message": o.error_message},
                # what the cluster holds: the stored values when they differ from those asked
                # (another writer's, for "changed underneath": null when it removed the entity)
                "after": (dict(o.stored) or None) if o.stored is not None else
                dict(o.change.after) if o.change.after is not None else None,
            }
            for o in report.outcomes
        ],
    }


_SHOW_ALL_UP_TO = 1000  # past this many entities, only the ones needing attention are listed


def render_apply(report: ApplyReport, *, color: bool = False) -> str:
    """Per-entity results, then a terraform-style closing line; ``color``: the markers as in plans,
    and what did not apply in red."""
    lines: list[str] = []
    outcomes = report.outcomes
    show_all = len(outcomes) <= _SHOW_ALL_UP_TO
    hidden = {Status.APPLIED: 0, Status.NOT_SENT: 0}
    for o in outcomes:
        if o.status in hidden and not show_all:
            hidden[o.status] += 1
            continue
        marker = o.change.action.marker
        status = o.status.value if o.ok else paint("-", o.status.value, color)
        text = f"  {paint(marker, marker, color)} {o.change.display}: {status}"
        if o.error_code:
            text += f": {error_name(o.error_code)}: {o.error_message or ''}".rstrip(": ")
        elif o.status is Status.UNVERIFIED:
            text += " (the broker accepted it, but describe did not show it before the deadline)"
        elif o.status is Status.UNKNOWN:
            text += (" (the answer to its batch's alter was lost and describe did not show the change: "
                     "it may have landed, or may still; run `kqplan plan` to see)")
        elif o.status is Status.STORED_DIFFERENTLY and o.stored is not None:
            asked = o.change.after or {}
            text += ": " + ", ".join(f"{k}={format_number(o.stored[k])} (asked {format_number(asked[k])})"
                                     for k in sorted(asked) if k in o.stored
                                     and not same_value(o.stored[k], asked[k]))
        elif o.status is Status.CHANGED_UNDERNEATH and o.stored is not None:
            text += f": {_underneath(o.stored, o.change.after or {})}"
        lines.append(text)
    lines.extend(f"  … and {n:,} more {status.value} (the --report file lists every entity)"
                 for status, n in hidden.items() if n)
    lines.extend(report.notes)
    if report.preflight_failed:
        failed = report.count(Status.FAILED)
        lines.append(f"Apply refused by the broker's validation: {failed} entit"
                     f"{'y' if failed == 1 else 'ies'} failed; nothing was changed.")
    elif report.ok:
        counts = {a: sum(o.change.action is a for o in outcomes) for a in Action}
        lines.append(f"Apply complete: {counts[Action.CREATE]} added, {counts[Action.UPDATE]} "
                     f"changed, {counts[Action.DELETE]} deleted.")
    else:
        applied = report.count(Status.APPLIED)
        problems = ", ".join(f"{report.count(s):,} {s.value}" for s in Status
                             if s is not Status.APPLIED and report.count(s))
        lines.append(f"Apply incomplete: {applied:,} of {len(outcomes):,} entities applied; {problems}. "
                     f"{_advice(report)}")
    return "\n".join(lines) + "\n"


def _underneath(stored: Mapping[str, float], sent: Mapping[str, float]) -> str:
    """What describe shows of an entity another writer changed, against what this apply sent
    (``sent`` empty: the apply deleted the entity)."""
    if not stored:
        return "no quotas now (sent " + ", ".join(f"{k}={format_number(sent[k])}" for k in sorted(sent)) + ")"
    gone = "deleted" if not sent else "not sent"
    shown = [f"{k}={format_number(stored[k])} ({f'sent {format_number(sent[k])}' if k in sent else gone})"
             for k in sorted(stored) if k not in sent or not same_value(stored[k], sent[k])]
    shown += [f"{k} absent (sent {format_number(sent[k])})" for k in sorted(sent) if k not in stored]
    return ", ".join(shown)


def _advice(report: ApplyReport) -> str:
    """What to do about an incomplete apply: a fresh plan where another writer came between, the
    manifest where the broker stores values differently, else apply again."""
    advice: list[str] = []
    raced = report.count(Status.CHANGED_UNDERNEATH)
    if raced:
        advice.append(f"The value changed underneath ({raced} entit{'y' if raced == 1 else 'ies'}): another "
                      "writer altered it between this apply's alter and its verify. Make a fresh plan "
                      "(`kqplan plan`) and review it before applying again.")
    if report.count(Status.STORED_DIFFERENTLY):
        advice.append("Re-running cannot converge where the cluster stores values differently: change the "
                      "manifest to what it keeps (ZooKeeper-mode brokers truncate whole-number keys).")
    if not advice and (report.count(Status.UNKNOWN) or report.count(Status.NOT_SENT)):
        advice.append("Run `kqplan plan` to see what is left (an unknown batch may still land), "
                      "then apply again.")
    return " ".join(advice) or "Run apply again to converge."
