"""Temporary quotas (``expires:``): when an entry stops being part of the desired state.

An entry's ``expires`` is a date (``2026-12-01``: midnight UTC at its start) or an ISO 8601
datetime (``2026-12-01T18:00``, UTC when no zone is given; ``Z`` or ``+02:00`` otherwise). The
entry is in effect while ``now < expires``; from ``expires`` on (exactly at it included) it is
treated as absent: an ``override: true`` entry falls back to the layer beneath, an entity listed
only there is no longer listed (deleted under an ownership scope with ``prune``). Values only:
the clock is read by :mod:`kqplan.config.clock`, never here.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_WHEN = re.compile(r"\d{4}-\d{2}-\d{2}(?:[Tt ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?"
                   r"(?:[Zz]|[+-]\d{2}(?::?\d{2})?)?)?")
_SPAN = re.compile(r"\s*([0-9]{1,7})\s*(s|m|h|d|w)\s*")
_SPAN_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
WHEN_EXAMPLE = "2026-12-01 or 2026-12-01T18:00Z"


class ExpiryError(ValueError):
    """A date, datetime or duration that is not one; ``str()`` is the user message."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


def parse_when(text: str) -> datetime:
    """An ``expires`` value (or ``KQPLAN_NOW``) as an aware UTC datetime."""
    if not _WHEN.fullmatch(text.strip()):
        raise ExpiryError(f"'{text}' is not a date or an ISO 8601 datetime",
                          f"write e.g. {WHEN_EXAMPLE} (UTC unless a zone such as +02:00 is given)")
    try:
        found = datetime.fromisoformat(text.strip().replace("z", "Z").replace("t", "T"))
    except ValueError as exc:
        raise ExpiryError(f"'{text}' is not a valid date or time ({exc})",
                          f"write e.g. {WHEN_EXAMPLE}") from None
    if found.tzinfo is None:
        found = found.replace(tzinfo=UTC)
    return found.astimezone(UTC)


def show_when(at: datetime) -> str:
    """``2026-12-01T00:00Z``: minutes always, seconds (and fractions) only when set, always UTC."""
    at = at.astimezone(UTC)
    text = at.strftime("%Y-%m-%dT%H:%M")
    if at.second or at.microsecond:
        text += at.strftime(":%S")
        if at.microsecond:
            text += f".{at.microsecond:06d}".rstrip("0")
    return text + "Z"


def iso_when(at: datetime) -> str:
    """The JSON form: ``2026-12-01T00:00:00Z`` (seconds always; fractions when set)."""
    at = at.astimezone(UTC)
    text = at.strftime("%Y-%m-%dT%H:%M:%S")
    if at.microsecond:
        text += f".{at.microsecond:06d}".rstrip("0")
    return text + "Z"


def parse_span(text: str) -> timedelta:
    """A ``[policy]`` duration: a whole number with ``s``, ``m`` (minutes), ``h``, ``d`` or ``w``."""
    found = _SPAN.fullmatch(text)
    if found is None:
        raise ExpiryError(f"'{text}' is not a duration",
                          "write a whole number with s, m, h, d or w, e.g. 7d, 12h or 2w")
    return timedelta(seconds=int(found[1]) * _SPAN_SECONDS[found[2]])


def show_span(span: timedelta) -> str:
    """``7d``, ``36h``, ``90m``: the largest unit up to days that divides it."""
    seconds = int(span.total_seconds())
    for unit in ("d", "h", "m"):
        size = _SPAN_SECONDS[unit]
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
