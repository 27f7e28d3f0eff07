"""Byte units: kqplan's table is pydantic's ByteSize table (written out to keep pydantic off
the start-up path), parsed exactly and case-sensitively."""

from __future__ import annotations

from decimal import Decimal

import pytest
from pydantic import ByteSize

from kqplan.core.units import MULTIPLIERS, UNITS, UnitError, parse_bytes


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
