"""``expires:`` values and ``[policy]`` durations: what is a date, in which zone, and how it shows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from kqplan.core.expiry import ExpiryError, iso_when, parse_span, parse_when, show_span, show_when


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-12-01", datetime(2026, 12, 1, tzinfo=UTC)),  # a date: midnight UTC at its start
    ("2026-12-01T18:00", datetime(2026, 12, 1, 18, tzinfo=UTC)),  # no zone: UTC
    ("2026-12-01 18:00:30", datetime(2026, 12, 1, 18, 0, 30, tzinfo=UTC)),
    ("2026-12-01T18:00Z", datetime(2026, 12, 1, 18, tzinfo=UTC)),
    ("2026-12-01t18:00z", datetime(2026, 12, 1, 18, tzinfo=UTC)),
    ("2026-12-01T18:00+02:00", datetime(2026, 12, 1, 16, tzinfo=UTC)),
    ("2026-12-01T01:00+0230", datetime(2026, 11, 30, 22, 30, tzinfo=UTC)),
    ("2026-12-01T18:00-05", datetime(2026, 12, 1, 23, tzinfo=UTC)),
    ("2026-12-01T18:00:00.25Z", datetime(2026, 12, 1, 18, 0, 0, 250000, tzinfo=UTC)),
    (" 2026-12-01 ", datetime(2026, 12, 1, tzinfo=UTC)),
])
def test_dates_and_datetimes_in_utc(text, expected):
    assert parse_when(text) == expected
    assert parse_when(text).tzinfo is UTC


@pytest.mark.parametrize("text", ["2026-31-12", "2026-02-30", "tomorrow", "2026/12/01", "20261201",
                                  "2026-12-01T25:00", "2026-12-01T18", "12/01/2026", ""])
def test_what_is_no_date(text):
    with pytest.raises(ExpiryError) as caught:
        parse_when(text)
    assert "2026-12-01" in caught.value.hint


def test_show_and_iso():
    assert show_when(datetime(2026, 12, 1, tzinfo=UTC)) == "2026-12-01T00:00Z"
    assert show_when(datetime(2026, 12, 1, 18, 0, 30, tzinfo=UTC)) == "2026-12-01T18:00:30Z"
    assert show_when(parse_when("2026-12-01T18:00:00.25+01:00")) == "2026-12-01T17:00:00.25Z"
    assert iso_when(datetime(2026, 12, 1, tzinfo=UTC)) == "2026-12-01T00:00:00Z"
    assert parse_when(iso_when(parse_when("2026-12-01T18:00:00.5+02:00"))) == parse_when(
        "2026-12-01T16:00:00.5Z")


@pytest.mark.parametrize(("text", "span", "shown"), [
    ("7d", timedelta(days=7), "7d"), ("30d", timedelta(days=30), "30d"), ("12h", timedelta(hours=12), "12h"),
    ("90m", timedelta(minutes=90), "90m"), ("2w", timedelta(weeks=2), "14d"),
    ("45s", timedelta(seconds=45), "45s"),
    (" 3 d ", timedelta(days=3), "3d"),
    ("1.5d", timedelta(hours=36), "36h"), ("0.5s", timedelta(milliseconds=500), "500ms"),  # one grammar
    ("1.5ms", timedelta(microseconds=1500), "1.5ms"), ("10min", timedelta(minutes=10), "10m"),
])
def test_spans(text, span, shown):
    assert parse_span(text) == span
    assert show_span(span) == shown


@pytest.mark.parametrize("text", ["7", "7 days", "-1d", "d", "1y", "", "0d", "36526d"])
def test_what_is_no_span(text):
    with pytest.raises(ExpiryError):
        parse_span(text)
