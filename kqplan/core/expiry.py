"""Temporary quotas (``expires:``): when an entry stops being part of the desired state.

An entry's ``expires`` is a date (``2026-12-01``: midnight UTC at its start) or an ISO 8601
datetime (``2026-12-01T18:00``, UTC when no zone is given; ``Z`` or ``+02:00`` otherwise). The
entry is in effect while ``now < expires``; from ``expires`` on (exactly at it included) it is
treated as absent: an ``override: true`` entry falls back to the layer beneath, an entity listed
only there is no longer listed (deleted under an ownership scope with ``prune``). Values only:
the clock is read by :mod:`kqplan.config.clock`, never here.

Every instant accepted (an ``expires``, ``KQPLAN_NOW``, a plan's ``now``) lies, once in UTC, in
the years 1000 to 8999 (:data:`EARLIEST`, :data:`LATEST`): far enough from ``datetime``'s ends
(years 1 and 9999) that no arithmetic on it — an instant plus or minus five of the longest durations
(:data:`kqplan.core.units.MAX_DURATION`, 100 years), a difference of two — can overflow.
``[policy]`` durations are the one duration grammar of :func:`kqplan.core.units.parse_duration`.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from kqplan.core.units import UnitError, parse_duration

_WHEN = re.compile(r"\d{4}-\d{2}-\d{2}(?:[Tt ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?"
                   r"(?:[Zz]|[+-]\d{2}(?::?\d{2})?)?)?")
_SPAN_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
WHEN_EXAMPLE = "2026-12-01 or 2026-12-01T18:00Z"
EARLIEST = datetime(1000, 1, 1, tzinfo=UTC)
"""The earliest instant accepted (included)."""
LATEST = datetime(9000, 1, 1, tzinfo=UTC)
"""The first instant past the accepted ones: the years 1000 to 8999, in UTC."""
_EARLIEST_NAIVE, _LATEST_NAIVE = EARLIEST.replace(tzinfo=None), LATEST.replace(tzinfo=None)


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
    # compared before converting: the conversion itself overflows near the years 1 and 9999
    local, offset = found.replace(tzinfo=None), found.utcoffset() or timedelta(0)
    if not _EARLIEST_NAIVE + offset <= local < _LATEST_NAIVE + offset:
        raise ExpiryError(f"'{text}' is outside the years 1000 to 8999 (in UTC) that kqplan accepts",
                          f"write a real date, e.g. {WHEN_EXAMPLE}; an entry without `expires:` "
                          "never expires")
    return found.astimezone(UTC)


def show_when(at: datetime) -> str:
    """``2026-12-01T00:00Z``: minutes always, seconds (and fractions) only when set, always UTC."""
    at = at.astimezone(UTC)
    text = f"{at.year:04d}-{at.month:02d}-{at.day:02d}T{at.hour:02d}:{at.minute:02d}"
    if at.second or at.microsecond:
        text += f":{at.second:02d}"
        if at.microsecond:
            text += f".{at.microsecond:06d}".rstrip("0")
    return text + "Z"


def iso_when(at: datetime) -> str:
    """The JSON form: ``2026-12-01T00:00:00Z`` (seconds always; fractions when set)."""
    at = at.astimezone(UTC)
    text = f"{at.year:04d}-{at.month:02d}-{at.day:02d}T{at.hour:02d}:{at.minute:02d}:{at.second:02d}"
    if at.microsecond:
        text += f".{at.microsecond:06d}".rstrip("0")
    return text + "Z"


def parse_span(text: str) -> timedelta:
    """A ``[policy]`` duration: :func:`kqplan.core.units.parse_duration`'s grammar (``7d``, ``1.5h``,
    ``2w``), as an ExpiryError for the config reader."""
    try:
        return timedelta(seconds=parse_duration(text))
    except UnitError as exc:
        raise ExpiryError(str(exc), exc.hint) from None


def show_span(span: timedelta) -> str:
    """``7d``, ``36h``, ``90m``, ``1500ms``: the largest unit up to days that divides it."""
    micros = span // timedelta(microseconds=1)
    for unit, size in _SPAN_SECONDS.items():
        if micros and micros % (size * 10**6) == 0:
            return f"{micros // (size * 10**6)}{unit}"
    if micros % 1000 == 0:
        return f"{micros // 1000}ms"
    return f"{Decimal(micros) / 1000}ms"
