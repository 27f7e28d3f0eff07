"""The clock expiries are judged by: ``KQPLAN_NOW`` when set (an ISO 8601 date or datetime, UTC
when no zone is given, in the years 1000 to 8999 as every instant :func:`parse_when` accepts), else
the system clock. Plans record the ``now`` they used, so a plan and a
test are reproducible with the variable set."""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime

from kqplan.core.errors import KqplanError
from kqplan.core.expiry import WHEN_EXAMPLE, ExpiryError, parse_when

ENV_NOW = "KQPLAN_NOW"


def now(env: Mapping[str, str] | None = None) -> datetime:
    """``KQPLAN_NOW`` (checked: a KqplanError saying how to write it), else the system clock, in UTC."""
    text = (os.environ if env is None else env).get(ENV_NOW, "")
    if not text.strip():
        return datetime.now(UTC)
    try:
        return parse_when(text)
    except ExpiryError as exc:
        raise KqplanError(f"{ENV_NOW}: {exc}", hint=f"set it to e.g. {WHEN_EXAMPLE}, or unset it to use "
                          "the system clock") from None
