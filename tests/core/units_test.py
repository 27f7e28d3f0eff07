"""Byte units: kqplan's table is pydantic's ByteSize table (written out to keep pydantic off
the start-up path), parsed exactly and case-sensitively."""

from __future__ import annotations

from decimal import Decimal

import pytest
from pydantic import ByteSize

from kqplan.core.units import MULTIPLIERS, UNITS, UnitError, looks_like_duration, parse_bytes, parse_duration


def test_the_table_is_pydantics():
    assert set(MULTIPLIERS) == set(UNITS)
    assert {u: MULTIPLIERS[u] for u in UNITS} == {u: int(ByteSize.byte_sizes[u.lower()]) for u in UNITS}


@pytest.mark.parametrize(("text", "value"), [("10MiB", 10 * 2**20), ("1.5KiB", 1536), ("3 kB", 3000),
                                             ("1.0001KiB", Decimal("1024.1024")), ("1TB", 10**12), ("7B", 7)])
def test_parse_is_exact(text, value):
    assert parse_bytes(text) == value


@pytest.mark.parametrize(("text", "hint"), [("10Mb", "reads as bits"), ("10mib", "did you mean '10MiB'"),
                                            ("10 parsecs", "use one of")])
def test_wrong_units_say_why(text, hint):
    with pytest.raises(UnitError) as err:
        parse_bytes(text)
    assert hint in err.value.hint


@pytest.mark.parametrize(("text", "shaped", "seconds"), [
    ("5m", True, 300.0), ("1.5d", True, 129600.0), ("2w", True, 1209600.0), (" 3 min ", True, 180.0),
    ("0s", True, None), ("40000d", True, None), ("30", False, None), ("plan.json", False, None),
    ("5M", False, None), ("", False, None),
])
def test_a_duration_has_one_shape(text, shaped, seconds):
    """``looks_like_duration`` (an optional ``--verify-enforcement`` window or a path?) is the
    parser's own grammar: anything it parses has the shape."""
    assert looks_like_duration(text) is shaped
    if seconds is None:
        with pytest.raises(UnitError):
            parse_duration(text)
    else:
        assert parse_duration(text) == seconds
