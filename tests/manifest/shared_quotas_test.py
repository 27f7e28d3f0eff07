"""Entries that repeat a set of quotas share one dict in the compiled state (compile.add_plain):
never at the cost of a rule (a bool is not 1, an override changes only its own entity)."""

from __future__ import annotations

from pathlib import Path

from kqplan.config.model import ProjectConfig
from kqplan.core.diagnostics import render_text
from kqplan.core.entity import Entity
from kqplan.manifest.compile import load_desired
from tests.helpers import write_manifest


def test_repeated_quotas_are_one_dict(tmp_path: Path) -> None:
    write_manifest(tmp_path / "q.yaml", "entities:\n" + "".join(
        f"  - user: u{i}\n    quotas: {{producer_byte_rate: 1MiB, consumer_byte_rate: 2097152}}\n"
        for i in range(5)) + "  - user: other\n    quotas: {producer_byte_rate: 2MiB}\n")
    state = load_desired([tmp_path], ProjectConfig())
    assert not state.errors
    # the first entry with unseen values goes the general way; every repeat shares one dict
    dicts = {id(state.quotas[Entity.user(f"u{i}")]) for i in range(1, 5)}
    assert len(dicts) == 1
    assert state.quotas[Entity.user("u0")] == {"producer_byte_rate": 2.0**20,
                                               "consumer_byte_rate": 2.0 * 2**20}
    assert state.quotas[Entity.user("other")] == {"producer_byte_rate": 2.0 * 2**20}


def test_a_bool_is_never_taken_for_the_number_it_equals(tmp_path: Path) -> None:
    write_manifest(tmp_path / "q.yaml", "entities:\n"
                   "  - {user: a, quotas: {request_percentage: 1}}\n"
                   "  - {user: b, quotas: {request_percentage: true}}\n")
    state = load_desired([tmp_path], ProjectConfig())
    assert "request_percentage" in render_text(state.errors)
    assert Entity.user("b") not in state.quotas


def test_an_override_changes_only_its_own_entity(tmp_path: Path) -> None:
    write_manifest(tmp_path / "base" / "q.yaml", "entities:\n"
                   "  - {user: a, quotas: {producer_byte_rate: 1MiB}}\n"
                   "  - {user: b, quotas: {producer_byte_rate: 1MiB}}\n")
    write_manifest(tmp_path / "over" / "q.yaml", "entities:\n"
                   "  - {user: a, override: true, quotas: {consumer_byte_rate: 1MiB}}\n")
    state = load_desired([tmp_path / "base", tmp_path / "over"], ProjectConfig())
    assert not state.errors
    assert state.quotas[Entity.user("a")] == {"producer_byte_rate": 2.0**20, "consumer_byte_rate": 2.0**20}
    assert state.quotas[Entity.user("b")] == {"producer_byte_rate": 2.0**20}
