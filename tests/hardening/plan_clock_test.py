"""A saved plan cannot be back-dated (issue 41): one made with a clock ahead of the machine that
applies it (a skewed runner, a leftover KQPLAN_NOW) is refused, and no change caused by an expiry
that has not happened yet by the applying clock is ever sent. Sandbox over TCP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kqplan.core.entity import Entity
from kqplan.sandbox import Sandbox, SandboxConfig
from tests.helpers import run_cli, write_manifest

P = "producer_byte_rate"
EXPIRES = datetime(2026, 6, 1, tzinfo=UTC)
MANIFEST = ("ownership: {prune: true, scope: [{user: 'tmp*'}]}\nentities:\n  - user: tmp\n"
            "    expires: 2026-06-01T00:00Z\n    quotas: {producer_byte_rate: 1024}\n"
            "  - user: tmp-later\n    expires: 2027-06-01T00:00Z\n    quotas: {producer_byte_rate: 2048}\n")
SEED = {Entity.user("tmp"): {P: 1024.0}, Entity.user("tmp-later"): {P: 2048.0}}


def iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


@pytest.fixture
def box() -> Iterator[Sandbox]:
    with Sandbox.start(SandboxConfig(seed=SEED, cluster_id="c")) as sandbox:
        yield sandbox


def saved(tmp_path: Path, box: Sandbox, monkeypatch: pytest.MonkeyPatch, made: datetime) -> Path:
    path = write_manifest(tmp_path / "q.yaml", MANIFEST)
    out = tmp_path / "plan.json"
    monkeypatch.setenv("KQPLAN_NOW", iso(made))
    result = run_cli("plan", path, "--bootstrap-server", box.bootstrap, "--out", out)
    assert result.exit_code == 0, result.stderr
    return out


def apply_at(out: Path, box: Sandbox, monkeypatch: pytest.MonkeyPatch, at: datetime):
    monkeypatch.setenv("KQPLAN_NOW", iso(at))
    return run_cli("apply", "--plan", out, "--bootstrap-server", box.bootstrap, "--auto-approve")


def test_the_issues_case_a_plan_made_months_ahead_never_deletes_early(tmp_path, box, monkeypatch):
    """Made with now = 2026-07-01, the plan deletes {user=tmp} (expired 2026-06-01); a runner whose
    clock says 2026-01-02 refuses it, and the quota stays."""
    out = saved(tmp_path, box, monkeypatch, datetime(2026, 7, 1, tzinfo=UTC))
    doc = json.loads(out.read_text())
    assert doc["expired_at"] == {"{user=tmp}": "2026-06-01T00:00:00Z"}
    result = apply_at(out, box, monkeypatch, datetime(2026, 1, 2, tzinfo=UTC))
    assert result.exit_code == 1
    assert ("Error: the plan deletes {user=tmp} because an entry expired 2026-06-01T00:00Z, but this "
            "machine's clock says 2026-01-02T00:00Z: it has not expired yet; nothing was changed") \
        in result.stderr
    assert box.state == SEED


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ahead=st.integers(min_value=-3600, max_value=3600), made_after=st.integers(min_value=0, max_value=900))
def test_an_expiry_cause_is_applied_only_once_it_happened_by_our_clock(tmp_path, monkeypatch, ahead,
                                                                        made_after):
    """Plans made ``made_after`` s after the expiry, applied by a clock ``ahead`` s behind the plan's:
    sent exactly when the applying clock has reached the expiry and the plan's clock is not more
    than 5 minutes ahead."""
    made = EXPIRES + timedelta(seconds=made_after)
    ours = made - timedelta(seconds=ahead)
    with Sandbox.start(SandboxConfig(seed=SEED, cluster_id="c")) as box:
        out = saved(tmp_path, box, monkeypatch, made)
        result = apply_at(out, box, monkeypatch, ours)
        state = box.state
    allowed = ours >= EXPIRES and ahead <= 300
    assert (result.exit_code == 0) == allowed, (ahead, made_after, result.stderr)
    assert (Entity.user("tmp") in state) != allowed
    if not allowed:
        assert "nothing was changed" in result.stderr


def test_a_plan_made_with_a_clock_ahead_is_refused_even_without_an_expired_cause(tmp_path, box, monkeypatch):
    """No change comes from an expiry (nothing expired yet), but the plan's clock is a day ahead."""
    box.state.pop(Entity.user("tmp"))
    made = datetime(2026, 5, 1, tzinfo=UTC)
    out = saved(tmp_path, box, monkeypatch, made)
    doc = json.loads(out.read_text())
    assert doc["now"] == "2026-05-01T00:00:00Z"
    assert "expired_at" not in doc
    result = apply_at(out, box, monkeypatch, made - timedelta(days=1))
    assert result.exit_code == 1
    assert ("Error: the plan was made at 2026-05-01T00:00Z, later than this machine's clock "
            "(2026-04-30T00:00Z) by more than 5 minutes; nothing was changed") in result.stderr
    within = apply_at(out, box, monkeypatch, made - timedelta(minutes=4))
    assert within.exit_code == 0, within.stderr
    assert box.state[Entity.user("tmp")] == {P: 1024.0}


def test_a_plan_saved_before_expired_at_bounds_its_causes_by_its_now(tmp_path, box, monkeypatch):
    """A plan written before ``expired_at`` existed (re-digested without it, as the older kqplan
    wrote it): its causes happened at or before its ``now``, so a clock behind that is refused."""
    from kqplan.planfile.codec import digest

    made = EXPIRES + timedelta(seconds=60)
    out = saved(tmp_path, box, monkeypatch, made)
    doc = json.loads(out.read_text())
    del doc["expired_at"], doc["digest"]
    doc["digest"] = digest(doc)
    out.write_text(json.dumps(doc))
    behind = apply_at(out, box, monkeypatch, made - timedelta(seconds=30))  # after the expiry, before now
    assert behind.exit_code == 1
    assert "because an entry expired 2026-06-01T00:01Z" in behind.stderr
    assert box.state == SEED
    assert apply_at(out, box, monkeypatch, made).exit_code == 0
    assert Entity.user("tmp") not in box.state


def test_a_plan_within_the_skew_tolerance_still_waits_for_the_expiry(tmp_path, box, monkeypatch):
    """The case only ``expired_at`` catches: made 60 s after the expiry, applied by a clock 120 s
    behind (within the 5-minute tolerance, so the skew check passes), i.e. 60 s before the expiry:
    refused by the expiry's own time, nothing sent; applied once the applying clock reaches it."""
    made = EXPIRES + timedelta(seconds=60)
    out = saved(tmp_path, box, monkeypatch, made)
    assert json.loads(out.read_text())["expired_at"] == {"{user=tmp}": "2026-06-01T00:00:00Z"}
    early = apply_at(out, box, monkeypatch, EXPIRES - timedelta(seconds=60))
    assert early.exit_code == 1
    assert ("Error: the plan deletes {user=tmp} because an entry expired 2026-06-01T00:00Z, but this "
            "machine's clock says 2026-05-31T23:59Z: it has not expired yet; nothing was changed") \
        in early.stderr
    assert box.state == SEED
    on_time = apply_at(out, box, monkeypatch, EXPIRES)
    assert on_time.exit_code == 0, on_time.stderr
    assert Entity.user("tmp") not in box.state
