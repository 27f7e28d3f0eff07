"""Units: byte rates (parse ``10MiB``/``10MB`` exactly, show raw numbers with human units) and
durations (``30s``, ``1.5h``, ``7d``: the one grammar every flag and setting takes, bounded).

The multipliers are pydantic's ``ByteSize`` table, written out here because importing pydantic
costs every command 0.07 s of start-up (benchmarks/README.md, issue 15); a test keeps the two
equal. Parsing is exact (``Decimal``) and case-sensitive: pydantic truncates ``1.0001KiB`` to
1024 and reads ``10Mb`` as megabytes, both wrong for a quota, where a silent rounding or a
megabit/megabyte confusion changes what the cluster enforces.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

from kqplan.core.errors import KqplanError

UNITS: tuple[str, ...] = ("B", "kB", "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB")
MULTIPLIERS: dict[str, int] = {
    "B": 1, "kB": 10**3, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
    "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
}
_PATTERN = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]+)\s*$")
_BINARY = (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024))


class UnitError(ValueError):
    """A byte-size string that is not ``<number><unit>``; ``str()`` is the user message."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


def parse_bytes(text: str) -> Decimal:
    """``"10MiB"`` → ``Decimal(10485760)``; may be fractional (the caller rejects that)."""
    m = _PATTERN.match(text)
    accepted = ", ".join(UNITS)
    if not m:
        raise UnitError(
            f"'{text}' is not a number with a byte unit",
            f"write a plain number of bytes per second, or a number with one of {accepted}",
        )
    number, unit = m.groups()
    if unit not in MULTIPLIERS:
        lower = {u.lower(): u for u in UNITS}
        guess = lower.get(unit.lower())
        if unit.lower().endswith("bit") or unit in ("Mb", "Kb", "Gb", "kb", "mb", "gb"):
            hint = (f"quotas are in bytes; '{unit}' reads as bits. Use one of {accepted} "
                    "(e.g. 10MB = 10,000,000 bytes, 10MiB = 10,485,760 bytes)")
        elif guess:
            hint = f"units are case-sensitive: did you mean '{number}{guess}'?"
        else:
            hint = f"use one of {accepted}"
        raise UnitError(f"unknown byte unit '{unit}' in '{text}'", hint)
    try:
        return Decimal(number) * MULTIPLIERS[unit]
    except InvalidOperation:  # pragma: no cover - the regex admits only valid decimals
        raise UnitError(f"'{text}' is not a number", f"use one of {accepted}") from None


def format_number(value: float) -> str:
    """Kafka values are doubles; show whole ones without ``.0`` (as KIP-546 prints them)."""
    if math.isfinite(value) and value == int(value) and abs(value) < 1e17:
        return str(int(value))
    return repr(value)


def format_bytes(value: float) -> str | None:
    """``1048576`` → ``"1 MiB"``; None below 1 KiB or for non-finite values."""
    if not math.isfinite(value) or value < 1024:
        return None
    for unit, size in _BINARY:
        if value >= size:
            scaled = value / size
            text = f"{scaled:.2f}".rstrip("0").rstrip(".")
            exact = float(f"{scaled:.2f}") == scaled
            return f"{text} {unit}" if exact else f"≈{text} {unit}"
    return None  # pragma: no cover - unreachable for value >= 1024


# -- durations: the one grammar (docs/commands.md#durations) ----------------------------------------

DURATION_UNITS: dict[str, Decimal] = {
    "ms": Decimal("0.001"), "s": Decimal(1), "m": Decimal(60), "min": Decimal(60), "h": Decimal(3600),
    "d": Decimal(86400), "w": Decimal(7 * 86400),
}
MIN_DURATION = Decimal("0.001")
"""The shortest duration: 1ms."""
MAX_DURATION = Decimal(36525 * 86400)
"""The longest duration: 36525d, 100 years. Bounded so that no caller can overflow with it
(``timedelta``, a datetime plus it, a float turned into an int); every instant kqplan accepts is
more than five of these from ``datetime``'s ends (:data:`kqplan.core.expiry.EARLIEST`)."""
DURATION_HINT = ("write a number and a unit: ms, s, m (or min), h, d or w, e.g. 30s, 2m or 500ms; "
                 "1.5h, 7d or 2w")
_DURATION = re.compile(r"\s*+([0-9]++(?:\.[0-9]++)?+)\s*+([^\s0-9.]*+)\s*+")  # possessive: linear
_SHOWN = 40


def parse_duration(text: str) -> float:
    """The one duration grammar, in seconds: a positive number, whole or decimal, and a unit among
    ``ms``, ``s``, ``m`` (or ``min``: minutes), ``h``, ``d`` and ``w`` — ``30s``, ``1.5h``, ``7d``,
    ``2w``. A bare number is refused: its unit would be a guess (seconds for ``--timeout``, days for
    ``[policy] expiry-warning``). From 1ms to 100 years (:data:`MAX_DURATION`)."""
    m = _DURATION.fullmatch(text)
    shown = _short(text)
    if m is None:
        raise UnitError(f"'{shown}' is not a duration", DURATION_HINT)
    number, unit = m.groups()
    if not unit:
        n = number if len(number) <= _SHOWN // 4 else "30"  # never echo a number of 400 digits thrice
        raise UnitError(f"'{shown}' is not a duration: it has no unit",
                        f"write e.g. {n}s for seconds, {n}m for minutes or {n}d for days "
                        "(units: ms, s, m or min, h, d, w)")
    if unit not in DURATION_UNITS:
        raise UnitError(f"'{shown}' is not a duration: unknown unit '{_short(unit)}'",
                        _unit_hint(number if len(number) <= _SHOWN // 4 else "", unit))
    seconds = Decimal(number) * DURATION_UNITS[unit]
    if seconds == 0:
        raise UnitError(f"'{shown}' is not a positive duration", DURATION_HINT)
    if seconds < MIN_DURATION:
        raise UnitError(f"'{shown}' is too short a duration (at least 1ms)", DURATION_HINT)
    if seconds > MAX_DURATION:
        raise UnitError(f"'{shown}' is too long a duration (at most 36525d, 100 years)",
                        "write a shorter one, e.g. 30d or 2w")
    return float(seconds)


def duration_option(text: str, option: str) -> float:
    """:func:`parse_duration` of the value given to ``option`` (a flag or a setting), in seconds:
    a KqplanError naming the option when it is not a duration. Every duration flag reads so."""
    try:
        return parse_duration(text)
    except UnitError as exc:
        raise KqplanError(f"{option}: {exc}", hint=exc.hint) from None


def looks_like_duration(text: str) -> bool:
    """``text`` has the grammar's shape, a number and one of its units, whatever the value (``0s``
    too): for telling an optional duration argument from a path before parsing it."""
    m = _DURATION.fullmatch(text)
    return m is not None and m[2] in DURATION_UNITS


def _short(text: str) -> str:
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN - 1]}…"


def _unit_hint(number: str, unit: str) -> str:
    if unit == "M" or unit.lower().removesuffix("s") in ("y", "yr", "year", "mo", "month"):
        return "months and years vary in length: write days or weeks, e.g. 30d or 52w (m is minutes)"
    lower = unit.lower()
    meant = lower if lower in DURATION_UNITS else _WORDS.get(lower.removesuffix("s"))
    if meant is not None:
        return f"did you mean '{number}{meant}'? (the units: ms, s, m or min, h, d, w)"
    return DURATION_HINT


_WORDS = {"msec": "ms", "millisecond": "ms", "sec": "s", "second": "s", "min": "min", "minute": "m",
          "hr": "h", "hour": "h", "day": "d", "wk": "w", "week": "w"}
