"""Durations and instants (issue 41): one duration grammar for every flag and setting, bounded so that
nothing computed from it can overflow; ``expires:`` and ``KQPLAN_NOW`` near the years 1 and 9999 are
located errors, never an OverflowError."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kqplan.core.errors import KqplanError
from kqplan.core.expiry import EARLIEST, LATEST, ExpiryError, iso_when, parse_span, parse_when, show_when
from kqplan.core.units import (
    DURATION_UNITS,
    MAX_DURATION,
    UnitError,
    duration_option,
    looks_like_duration,
    parse_duration,
)
from tests.helpers import REPO, run_cli, write_manifest

HUGE = "9" * 400
UNITS = ["ms", "s", "m", "min", "h", "d", "w"]
NUMBERS = st.one_of(
    st.integers(0, 10**6).map(str),
    st.decimals(min_value=0, max_value=10**6, places=3, allow_nan=False).map(str),
    st.sampled_from([HUGE, "0." + "0" * 400 + "1", "36525", "36525.0001", "5217", "876600", "0", "007"]),
)
DURATIONS = st.builds(lambda pad, number, gap, unit, end: f"{pad}{number}{gap}{unit}{end}",
                      st.sampled_from(["", " "]), NUMBERS, st.sampled_from(["", " "]),
                      st.sampled_from([*UNITS, "", "D", "M", "y", "days", "x", "S"]),
                      st.sampled_from(["", " "]))


def _seconds(read: Callable[[str], float | timedelta], text: str) -> float | None:
    """What ``read`` makes of ``text`` in seconds; None when it refuses it (as a user error)."""
    try:
        found = read(text)
    except (UnitError, ExpiryError, KqplanError):
        return None
    return found.total_seconds() if isinstance(found, timedelta) else float(found)


# -- one grammar ---------------------------------------------------------------------------------------

@settings(max_examples=400, deadline=None)
@given(text=DURATIONS)
def test_flags_and_policy_read_durations_alike(text: str) -> None:
    """``throttled --since`` (parse_duration), ``[policy]`` (parse_span) and ``plan --since``
    (duration_option) accept the same texts as the same length: ``7d`` and ``1.5d`` everywhere."""
    flag, policy = _seconds(parse_duration, text), _seconds(parse_span, text)
    assert flag == (None if policy is None else pytest.approx(policy, abs=1e-6)), text
    # commands/fleet_usage reads whole days itself before the one parser: it agrees within the bound
    # (past it: test_plan_since_in_days_is_bounded_too)
    if flag is not None or not re.fullmatch(r"\s*0*[1-9][0-9]*d\s*", text):
        assert _seconds(lambda t: duration_option(t, "--since"), text) == flag, text


@pytest.mark.parametrize(("text", "seconds"), [
    ("7d", 7 * 86400), ("1.5d", 36 * 3600), ("2w", 14 * 86400), ("0.5h", 1800), ("10min", 600),
    (" 3 d ", 3 * 86400), ("500ms", 0.5), ("36525d", 36525 * 86400), ("1ms", 0.001),
])
def test_the_one_grammar(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds
    assert parse_span(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize(("text", "message", "hint"), [
    ("30", "'30' is not a duration: it has no unit", "write e.g. 30s for seconds, 30m for minutes or 30d"),
    ("7D", "'7D' is not a duration: unknown unit 'D'", "did you mean '7d'?"),
    ("7 days", "'7 days' is not a duration: unknown unit 'days'", "did you mean '7d'?"),
    ("1y", "'1y' is not a duration: unknown unit 'y'", "months and years vary in length"),
    ("soon", "'soon' is not a duration", "e.g. 30s, 2m or 500ms; 1.5h, 7d or 2w"),
    ("0d", "'0d' is not a positive duration", "e.g. 30s, 2m or 500ms"),
    ("0.1ms", "'0.1ms' is too short a duration (at least 1ms)", "e.g. 30s"),
    ("36526d", "'36526d' is too long a duration (at most 36525d, 100 years)", "e.g. 30d or 2w"),
    (HUGE + "s", f"'{HUGE[:39]}…' is too long a duration (at most 36525d, 100 years)", "e.g. 30d"),
])
def test_what_is_no_duration_says_why(text: str, message: str, hint: str) -> None:
    with pytest.raises(UnitError) as caught:
        parse_duration(text)
    assert str(caught.value) == message
    assert hint in caught.value.hint


def test_throttled_takes_days_as_plan_does(tmp_path: Path) -> None:
    """``throttled --since 7d`` was refused while ``plan --since 7d`` was accepted: now it is
    Prometheus (not reachable here) that stops it, not the duration."""
    snapshot = tmp_path / "s.json"
    snapshot.write_text('{"format_version": 1, "cluster_id": "c", "entities": []}')
    result = run_cli("throttled", "--state", snapshot, "--prometheus", "http://127.0.0.1:9", "--since", "7d")
    assert result.exit_code == 1, result.stderr
    assert "--since" not in result.stderr
    assert "cannot reach Prometheus" in result.stderr


def test_the_grammar_is_documented_once() -> None:
    """docs/commands.md#durations lists every unit; the other pages link to it."""
    text = (REPO / "docs" / "commands.md").read_text(encoding="utf-8")
    section = text[text.index("## Durations"):]
    assert all(f"`{unit}`" in section for unit in DURATION_UNITS)
    for page in ("fleet.md", "safe-rollout.md"):
        assert "commands.md#durations" in (REPO / "docs" / page).read_text(encoding="utf-8")


# -- bounded: nothing computed from a duration overflows --------------------------------------------------

@settings(max_examples=400, deadline=None)
@given(text=st.one_of(DURATIONS, st.text(max_size=12)))
def test_an_accepted_duration_is_finite_bounded_and_usable(text: str) -> None:
    refused: UnitError | None = None
    try:
        seconds = parse_duration(text)
    except UnitError as exc:
        refused = exc
    if refused is not None:
        assert str(refused).startswith("'")
        assert refused.hint
        return
    assert math.isfinite(seconds)
    assert 0.001 <= seconds <= float(MAX_DURATION)
    assert looks_like_duration(text)  # what cli/main.py's optional --verify-enforcement window takes
    span = timedelta(seconds=seconds)
    for at in (EARLIEST, LATEST - timedelta(microseconds=1)):
        assert at - 5 * span < at < at + 5 * span  # no OverflowError
    assert int(seconds * 1000) >= 1


@pytest.mark.parametrize("args", [
    ("throttled", "--since", HUGE), ("throttled", "--since", HUGE + "s"),
    ("throttled", "--step", HUGE + "ms"), ("throttled", "--timeout", HUGE + "h"),
    ("plan", "--usage-from-metrics", "--since", HUGE),
    ("plan", "--usage-from-metrics", "--since", HUGE + "w"),
    ("plan", "--usage-from-metrics", "--step", HUGE + "s"),
])
def test_a_duration_of_400_digits_is_a_located_error(tmp_path: Path, args: tuple[str, ...]) -> None:
    snapshot = tmp_path / "s.json"
    snapshot.write_text('{"format_version": 1, "cluster_id": "c", "entities": []}')
    path = write_manifest(tmp_path / "q.yaml", "entities: []\n")
    command, *rest = args
    where = [path] if command == "plan" else []
    result = run_cli(command, *where, "--state", snapshot, "--prometheus", "http://127.0.0.1:9", *rest)
    assert result.exit_code == 1, result.stderr
    assert "internal error" not in result.stderr
    flag = next(a for a in rest if a.startswith("--") and a != "--usage-from-metrics")
    assert re.search(rf"^Error: {flag}: '9{{39}}…' is (not a duration: it has no unit|too long a duration)",
                     result.stderr, re.M), result.stderr


@pytest.mark.parametrize("text", [HUGE + "d", "36526d"])
def test_plan_since_in_days_is_bounded_too(text: str) -> None:
    with pytest.raises(KqplanError, match="too long a duration"):
        duration_option(text, "--since")


# -- instants near the years 1 and 9999 --------------------------------------------------------------------

ZONES = st.integers(-(23 * 60 + 59), 23 * 60 + 59).map(lambda m: timezone(timedelta(minutes=m)))
EDGES = st.one_of(
    st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(1, 1, 3)),
    st.datetimes(min_value=datetime(999, 12, 30), max_value=datetime(1000, 1, 2)),
    st.datetimes(min_value=datetime(8999, 12, 30), max_value=datetime(9000, 1, 2)),
    st.datetimes(min_value=datetime(9999, 12, 29), max_value=datetime(9999, 12, 31, 23, 59, 59, 999999)),
)


def _written(at: datetime, zone: timezone | None) -> str:
    """``at`` as a user writes it: ``YYYY-MM-DDTHH:MM:SS[.ffffff]`` and the zone (none: UTC)."""
    text = at.isoformat()
    if zone is None:
        return text
    minutes = int((zone.utcoffset(None)).total_seconds()) // 60
    return f"{text}{'-' if minutes < 0 else '+'}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


@settings(max_examples=500, deadline=None)
@given(at=EDGES, zone=st.one_of(st.none(), ZONES))
def test_an_instant_near_the_ends_is_refused_or_safe(at: datetime, zone: timezone | None) -> None:
    """Refused (ExpiryError, never OverflowError) unless in the years 1000 to 8999 once in UTC; an
    accepted one shows, round-trips and takes any arithmetic with the longest duration."""
    text = _written(at, zone)
    local = at.replace(tzinfo=zone or UTC)
    near = EARLIEST.year - 1 <= at.year <= LATEST.year  # where the test itself can convert to UTC
    naive_utc = at - (local.utcoffset() or timedelta(0)) if near else None
    if naive_utc is None or not EARLIEST <= naive_utc.replace(tzinfo=UTC) < LATEST:
        with pytest.raises(ExpiryError, match="outside the years 1000 to 8999"):
            parse_when(text)
        return
    found = parse_when(text)
    assert found == local
    assert found.tzinfo is UTC
    assert parse_when(iso_when(found)) == found
    assert parse_when(show_when(found)[:16] + "Z") == found.replace(second=0, microsecond=0)
    longest = timedelta(seconds=float(MAX_DURATION))
    assert found - 5 * longest < found + 5 * longest
    assert (found - EARLIEST).days >= 0
    assert (LATEST - found).days >= 0


EDGE_TEXTS = ["9999-12-31T23:59:59-05:00", "0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59.999999-23:59",
              "0001-01-01T00:00+23:59", "9999-12-31", "0001-01-01", "0999-12-31T23:59Z", "9000-01-01"]


@pytest.mark.parametrize("text", EDGE_TEXTS)
def test_expires_near_the_ends_is_located(tmp_path: Path, text: str) -> None:
    path = write_manifest(tmp_path / "q.yaml", f"entities:\n  - user: alice\n    expires: '{text}'\n"
                          "    quotas: {producer_byte_rate: 1024}\n")
    result = run_cli("validate", path)
    assert result.exit_code == 1, result.stdout + result.stderr
    assert (f"{path}:5:14: error[KQP123] expires: '{text}' is outside the years 1000 to 8999 (in UTC) "
            "that kqplan accepts") in result.stdout
    assert "internal error" not in result.stderr


@pytest.mark.parametrize("text", EDGE_TEXTS)
def test_kqplan_now_near_the_ends_names_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       text: str) -> None:
    path = write_manifest(tmp_path / "q.yaml", "entities:\n  - user: alice\n    expires: 2026-12-01\n"
                          "    quotas: {producer_byte_rate: 1024}\n")
    monkeypatch.setenv("KQPLAN_NOW", text)
    result = run_cli("validate", path)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: KQPLAN_NOW: '{text}' is outside the years 1000 to 8999 (in UTC) "
                                    "that kqplan accepts\n  = help: set it to e.g. 2026-12-01"), result.stderr


def test_the_widest_accepted_instants_plan_warn_and_show(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """``now`` and an entry's expiry at the ends of the accepted range, with the longest durations:
    max-expiry's error, expiry-warning's warning and the saved plan's ``valid_until`` are computed."""
    config = tmp_path / "kqplan.toml"
    config.write_text('[policy]\nmax-expiry = "36525d"\nexpiry-warning = "36525d"\n')
    path = write_manifest(tmp_path / "q.yaml", "entities:\n  - user: alice\n"
                          "    expires: '8999-12-31T23:59:59.999999-00:00'\n"
                          "    quotas: {producer_byte_rate: 1024}\n")
    snapshot = tmp_path / "s.json"
    snapshot.write_text('{"format_version": 1, "cluster_id": "c", "entities": []}')
    monkeypatch.setenv("KQPLAN_NOW", "1000-01-01T00:00+00:00")
    late = run_cli("validate", path, "--config", config)
    assert late.exit_code == 1
    assert "error[KQP159] {user=alice} expires 8999-12-31T23:59:59.999999Z, further ahead than 36525d" \
        in late.stdout, late.stdout + late.stderr
    monkeypatch.setenv("KQPLAN_NOW", "8999-12-31T23:00Z")
    soon = run_cli("validate", path, "--config", config)
    assert soon.exit_code == 0, soon.stdout + soon.stderr
    assert "warning[KQP161] {user=alice} expires 8999-12-31T23:59:59.999999Z, within 36525d" in soon.stdout
    out = tmp_path / "p.json"
    planned = run_cli("plan", path, "--state", snapshot, "--out", out, "--config", config)
    assert planned.exit_code == 0, planned.stderr
    shown = run_cli("show", out, "--format", "json")
    assert shown.exit_code == 0, shown.stderr
    assert shown.json["now"] == "8999-12-31T23:00:00Z"
    assert shown.json["valid_until"] == "8999-12-31T23:59:59.999999Z"


@pytest.mark.parametrize("text", ["1" + " " * 200_000 + "s" + " " * 200_000 + ".",
                                  "1" * 200_000 + " " * 200_000 + "x.", " " * 200_000 + "1" + " " * 200_000])
def test_a_long_hostile_duration_is_refused_at_once(text: str) -> None:
    """The grammar's pattern is possessive: no backtracking over spaces (quadratic before)."""
    started = time.monotonic()
    with pytest.raises(UnitError):
        parse_duration(text)
    assert time.monotonic() - started < 1.0
