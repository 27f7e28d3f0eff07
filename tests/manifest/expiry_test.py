"""``expires:`` in compile: exactly at ``now``, zones, override chains, the layer rules, and a property
over generated layered manifests against a plain model of what "treated as absent" means."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kqplan.config.model import ProjectConfig
from kqplan.core.entity import Entity
from kqplan.core.expiry import iso_when
from kqplan.manifest.compile import load_desired
from tests.helpers import write_manifest

P, C = "producer_byte_rate", "consumer_byte_rate"
T = datetime(2026, 12, 1, tzinfo=UTC)
A = Entity.user("a")


def desired(tmp_path: Path, *layers: str, now: datetime = T):
    paths = []
    for i, body in enumerate(layers):
        paths.append(write_manifest(tmp_path / f"l{i}" / "q.yaml", "entities:\n" + body).parent)
    return load_desired(paths, ProjectConfig(), now=now)


@pytest.mark.parametrize(("now", "applies"), [
    (T - timedelta(microseconds=1), True),
    (T, False),  # exactly at now: expired
    (T + timedelta(seconds=1), False),
])
def test_expired_from_the_instant_on(tmp_path, now, applies):
    state = desired(tmp_path, "  - user: a\n    expires: 2026-12-01\n    quotas: {producer_byte_rate: 1}\n",
                    now=now)
    assert state.errors == []
    assert (A in state.quotas) is applies
    assert [e.entity for e in (state.expiring if applies else state.expired)] == [A]
    assert state.now == now


@pytest.mark.parametrize("written", ["2026-12-01T01:00+02:00", "2026-11-30T23:00Z", "2026-11-30T23:00",
                                     "2026-11-30 23:00:00", "2026-11-30T18:00-05:00",
                                     "2026-12-01T00:30+0130"])
def test_zones_name_one_instant(tmp_path, written):
    instant = datetime(2026, 11, 30, 23, tzinfo=UTC)
    body = f"  - user: a\n    expires: \"{written}\"\n    quotas: {{producer_byte_rate: 1}}\n"
    assert A in desired(tmp_path, body, now=instant - timedelta(seconds=1)).quotas
    assert A not in desired(tmp_path, body, now=instant).quotas


def test_an_override_chain_falls_back_layer_by_layer(tmp_path):
    base = "  - user: a\n    quotas: {producer_byte_rate: 1, consumer_byte_rate: 1}\n"
    first = "  - user: a\n    override: true\n    expires: 2026-12-01\n    quotas: {producer_byte_rate: 2}\n"
    second = ("  - user: a\n    override: true\n    expires: 2026-12-10\n"
              "    quotas: {consumer_byte_rate: null, request_percentage: 5}\n")
    at = [desired(tmp_path, base, first, second, now=now).quotas.get(A) for now in (
        T - timedelta(days=1), T, T + timedelta(days=8), T + timedelta(days=9))]
    assert at == [{P: 2.0, "request_percentage": 5.0}, {P: 1.0, "request_percentage": 5.0},
                  {P: 1.0, "request_percentage": 5.0}, {P: 1.0, C: 1.0}]
    state = desired(tmp_path, base, first, second, now=T)
    assert [(e.at, e.override, e.origin.layer) for e in state.expired] == [(T, True, 1)]
    assert state.expired[0].expired_text().startswith("override expired 2026-12-01T00:00Z (")
    assert state.next_expiry == T + timedelta(days=9)


def test_an_override_of_an_expired_entry_is_inert_and_a_repeat_still_an_error(tmp_path):
    base = "  - user: a\n    expires: 2026-11-01\n    quotas: {producer_byte_rate: 1}\n"
    over = "  - user: a\n    override: true\n    quotas: {producer_byte_rate: 9}\n"
    state = desired(tmp_path, base, over)
    assert state.errors == []
    assert A not in state.quotas
    assert A not in state.absent
    again = desired(tmp_path, base + "  - user: a\n    quotas: {producer_byte_rate: 2}\n")
    assert [d.code for d in again.errors] == ["KQP102"]
    later = desired(tmp_path, base, "  - user: a\n    quotas: {producer_byte_rate: 2}\n")
    assert [d.code for d in later.errors] == ["KQP102"]  # a later layer needs override: true, as always


def test_an_expired_override_that_removed_every_key_restores_the_entity(tmp_path):
    base = "  - user: a\n    quotas: {producer_byte_rate: 1}\n"
    gone = ("  - user: a\n    override: true\n    expires: 2026-12-01\n"
            "    quotas: {producer_byte_rate: null}\n")
    assert A in desired(tmp_path, base, gone, now=T - timedelta(days=1)).absent
    after = desired(tmp_path, base, gone, now=T)
    assert after.quotas[A] == {P: 1.0}
    assert A not in after.absent


@pytest.mark.parametrize("value", ["tomorrow", "2026-13-01", "12", "true"])
def test_a_bad_expires_is_located(tmp_path, value):
    state = desired(tmp_path, f"  - user: a\n    expires: {value}\n    quotas: {{producer_byte_rate: 1}}\n")
    assert [(d.code, d.span.line, d.span.column) for d in state.errors] == [("KQP123", 5, 14)]


# -- the property: generated layers ------------------------------------------------------------------

DAYS = [1, 2, 3]
"""Expiries are T + these days; ``now`` is drawn around each of them."""


@st.composite
def chains(draw: st.DrawFn) -> tuple[list[dict[str, object]], datetime]:
    """One entity through 1-4 layers: a base entry and overrides, each maybe with an expiry (in a
    zone of its own), setting or removing keys; and a ``now`` at, before or after an expiry."""
    entries = []
    for layer in range(draw(st.integers(1, 4))):
        values = st.sampled_from([1, 2, None] if layer else [1, 2])  # null removes a key: overrides only
        quotas = draw(st.dictionaries(st.sampled_from([P, C]), values, min_size=1))
        day = draw(st.none() | st.sampled_from(DAYS))
        entries.append({"quotas": quotas, "expires": None if day is None else T + timedelta(days=day),
                        "zone": draw(st.sampled_from(["Z", "+02:00", "-05:00", ""]))})
    now = T + timedelta(days=draw(st.sampled_from([0, *DAYS, 4]))) + draw(
        st.sampled_from([timedelta(0), timedelta(seconds=-1), timedelta(seconds=1)]))
    return entries, now


def written(at: datetime, zone: str) -> str:
    if zone == "":
        return at.strftime("%Y-%m-%dT%H:%M:%S")
    offset = {"Z": 0, "+02:00": 2, "-05:00": -5}[zone]
    return (at + timedelta(hours=offset)).strftime("%Y-%m-%dT%H:%M:%S") + zone


def model(entries: list[dict[str, object]], now: datetime) -> dict[str, float] | None:
    """Expired entries are absent: the base gone makes every override inert."""
    quotas: dict[str, float] | None = None
    for i, entry in enumerate(entries):
        expires = entry["expires"]
        if expires is not None and expires <= now:
            if i == 0:
                return None
            continue
        quotas = dict(quotas or {})
        for key, value in entry["quotas"].items():
            if value is None:
                quotas.pop(key, None)
            else:
                quotas[key] = float(value)
    return quotas or None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chains())
def test_layered_expiries_follow_the_model(tmp_path, chain):
    entries, now = chain
    layers = []
    for i, entry in enumerate(entries):
        body = "  - user: a\n" + ("    override: true\n" if i else "")
        if entry["expires"] is not None:
            body += f"    expires: \"{written(entry['expires'], entry['zone'])}\"\n"
        body += "    quotas: {" + ", ".join(f"{k}: {'null' if v is None else v}"
                                           for k, v in entry["quotas"].items()) + "}\n"
        layers.append(body)
    state = desired(tmp_path, *layers, now=now)
    assert state.errors == []
    assert state.quotas.get(A) == model(entries, now), (layers, iso_when(now))
    live = [e["expires"] for i, e in enumerate(entries) if e["expires"] is not None and e["expires"] > now
            and not (entries[0]["expires"] is not None and entries[0]["expires"] <= now)]
    assert state.next_expiry == min(live, default=None)
