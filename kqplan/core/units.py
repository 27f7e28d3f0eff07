"""Byte-rate units: parse ``10MiB``/``10MB`` exactly, and show raw numbers with human units.

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


_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m|min|h)?\s*$")
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """``"30s"``, ``"2m"``, ``"500ms"``, ``"1h"`` or a plain number of seconds → seconds (> 0)."""
    m = _DURATION.match(text)
    if not m:
        raise UnitError(f"'{text}' is not a duration",
                        "write a number with ms, s, m or h, e.g. 30s, 2m or 500ms")
    seconds = float(m.group(1)) * _SECONDS[m.group(2) or "s"]
    if seconds <= 0:
        raise UnitError(f"'{text}' is not a positive duration", "e.g. 30s, 2m or 500ms")
    return seconds

