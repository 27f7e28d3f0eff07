"""Quota values as Kafka keeps them (doubles): a manifest's number or byte size parsed, checked by
Kafka's own rule for its key (:mod:`kqplan.core.quotas`), and memoized: big manifests repeat a few
values."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from kqplan.core.diagnostics import Loc, Pending, Severity
from kqplan.core.quotas import QUOTA_KEYS, value_error
from kqplan.core.units import UnitError, parse_bytes
from kqplan.manifest.source import SourceFile


class Values:
    """Parses and checks quota values; each problem is appended to ``pending`` (the compile's)."""

    def __init__(self, pending: list[tuple[SourceFile, Pending]]) -> None:
        self.pending = pending
        self.cache: dict[tuple[str, type, Any], float] = {}
        """Valid values by (key, class, parsed value): the class keeps 1, 1.0 and True apart."""

    def report(self, source: SourceFile, pending: Pending) -> None:
        self.pending.append((source, pending))

    def parse(self, source: SourceFile, loc: Loc, key: str, raw: Any) -> float | None:
        """A quota value as Kafka's double, or None after reporting why it is not one."""
        spec = QUOTA_KEYS.get(key)
        if isinstance(raw, bool) or not isinstance(raw, int | float | str):
            self.report(source, Pending("KQP021", f"{key}: value must be a number", loc))
            return None
        if isinstance(raw, str):
            if spec is None or not spec.bytes_per_second:
                self.report(source, Pending(
                    "KQP116", f"{key} takes a plain number, not '{raw}'", loc,
                    hint="units are accepted only for producer_byte_rate and consumer_byte_rate"))
                return None
            try:
                exact = parse_bytes(raw)
            except UnitError as exc:
                self.report(source, Pending("KQP116", str(exc), loc, hint=exc.hint))
                return None
            if exact != exact.to_integral_value():
                self.report(source, Pending(
                    "KQP113", f"{key} = {raw} is {exact.normalize():f} bytes, not a whole number",
                    loc, hint="byte rates are whole bytes per second; adjust the number or unit"))
                return None
            return self.exact_float(source, loc, key, int(exact))
        if isinstance(raw, int):
            return self.exact_float(source, loc, key, raw)
        if math.isnan(raw) or math.isinf(raw):
            self.report(source, Pending(
                "KQP115", f"{key} = {raw}: NaN and infinity are not quotas", loc,
                hint="for no limit, remove the key"))
            return None
        return raw

    def exact_float(self, source: SourceFile, loc: Loc, key: str, value: int) -> float:
        if value.bit_length() > 64:  # past any Kafka type: "too large" (and never turned into text:
            return math.inf if value > 0 else -math.inf  # Python refuses str() of 4300+ digits)
        as_float = float(value)
        if abs(value) > _EXACT_DOUBLE_LIMIT and Decimal(as_float) != value:
            self.report(source, Pending(
                "KQP160", f"{key} = {value} cannot be stored exactly (Kafka keeps quotas as "
                f"doubles); it becomes {Decimal(as_float):f}", loc, severity=Severity.WARNING,
                hint="use a value below 2^53 or a multiple of a power of two"))
        return as_float

    def check(self, source: SourceFile, loc: Loc, key: str, value: float) -> bool:
        problem = value_error(key, value)
        if problem is None:
            return True
        code = {"must be greater": "KQP112", "too large": "KQP114"}
        hint = None
        if "fractional" in problem:
            kind = "bytes per second" if QUOTA_KEYS[key].bytes_per_second else "a whole number"
            self.report(source, Pending("KQP113", f"{key} must be {kind}: {value!r} is fractional "
                                        f"(Kafka: \"{problem}\")", loc,
                                        hint="round it to a whole number"))
            return False
        if "greater than 0" in problem:
            hint = "quotas are positive; for no limit, remove the key"
        elif "too large" in problem:
            hint = "for no limit, remove the key"
        the_code = next((c for k, c in code.items() if k in problem), "KQP112")
        self.report(source, Pending(the_code, f"{key}: {problem}", loc, hint=hint))
        return False

    def valid(self, source: SourceFile, loc: Loc, key: str, raw: Any) -> float | None:
        """A valid value for a known key, memoized: big manifests repeat a few values."""
        cache_key = (key, raw.__class__, raw)  # the class keeps 1, 1.0 and True apart
        cached = self.cache.get(cache_key)
        if cached is not None:
            return cached
        value = self.parse(source, loc, key, raw)
        if value is None or (key in QUOTA_KEYS and not self.check(source, loc, key, value)):
            return None
        if abs(value) <= _EXACT_DOUBLE_LIMIT:  # larger ones carry a per-use warning
            self.cache[cache_key] = value
        return value


_EXACT_DOUBLE_LIMIT = 2**53
