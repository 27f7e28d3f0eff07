"""A big manifest read in slices (kqplan/manifest/fast/slices.py) must change nothing but memory: the
same desired state, origins and diagnostics as the whole-file parse, on generated manifests in
the layouts people write (indented or not, comments and blank lines between items, a key after
the list), with plain and unusual entries alike. The thresholds are lowered so small files
slice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kqplan.config.model import ProjectConfig
from kqplan.core.desired import DesiredState
from kqplan.core.entity import Entity
from kqplan.manifest.compile import load_desired
from kqplan.manifest.fast import slices
from kqplan.manifest.parse import ALIAS_LIMITS
from kqplan.manifest.shape import plain_entities
from tests.manifest.fast.compile_test import entries, summary


def text_of(items: list[dict[str, Any]], *, indent: bool, notes: list[int], tail: bool) -> str:
    head = "apiVersion: kqplan/v1\nkind: ClientQuotas\nentities:  # the list\n"
    if not indent:
        body = yaml.safe_dump(items, allow_unicode=True) if items else ""
    else:
        body = ""
        for i, item in enumerate(items):
            if i in notes:
                body += "\n  # a comment between items\n"
            body += "".join("  " + line + "\n" for line in yaml.safe_dump([item], allow_unicode=True,
                                                                          indent=2).splitlines())
    return head + body + ("metadata:\n  description: after the list\n" if tail else "")


def compiled(path: Path, *, sliced: bool, monkeypatch: pytest.MonkeyPatch) -> DesiredState:
    with monkeypatch.context() as m:
        m.setattr(slices, "BIG_FILE_CHARS", 0 if sliced else 1 << 40)
        m.setattr(slices, "SLICE_ITEMS", 3)
        return load_desired([path], ProjectConfig())


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items=st.lists(entries(), max_size=14), indent=st.booleans(),
       notes=st.lists(st.integers(0, 14), max_size=3), tail=st.booleans())
def test_slices_change_nothing(items: list[dict[str, Any]], indent: bool, notes: list[int], tail: bool,
                               tmp_path_factory: pytest.TempPathFactory,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path_factory.mktemp("m") / "q.yaml"
    path.write_text(text_of(items, indent=indent, notes=notes, tail=tail))
    whole = compiled(path, sliced=False, monkeypatch=monkeypatch)
    in_slices = compiled(path, sliced=True, monkeypatch=monkeypatch)
    assert repr(summary(in_slices)) == repr(summary(whole))


PLAIN = [{"user": f"u{i}", "quotas": {"producer_byte_rate": 1024 * (i + 1)}} for i in range(10)]


def _never() -> None:
    raise AssertionError("a plain file is never read whole")


@pytest.mark.parametrize("indent", [True, False])
def test_plain_files_are_sliced(indent: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slices, "SLICE_ITEMS", 3)
    text = text_of(PLAIN, indent=indent, notes=[4], tail=True)
    read = slices.read_sliced(text, plain_entities, ALIAS_LIMITS, _never)
    assert read is not None
    entries = read[1]["entities"]
    assert len(entries) == 10
    assert entries.check()
    assert list(entries) == PLAIN


def test_each_slice_is_parsed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One pass: a usual big file's slices are parsed as compile reads them, not checked first."""
    monkeypatch.setattr(slices, "BIG_FILE_CHARS", 0)
    monkeypatch.setattr(slices, "SLICE_ITEMS", 3)
    parsed: list[int] = []
    parse = slices._parse_slice

    def counted(text: str, start: int, end: int, alias_limits: Any) -> list[Any] | None:
        parsed.append(start)
        return parse(text, start, end, alias_limits)

    monkeypatch.setattr(slices, "_parse_slice", counted)
    path = tmp_path / "q.yaml"
    path.write_text(text_of(PLAIN, indent=True, notes=[], tail=False))
    state = load_desired([path], ProjectConfig())
    assert len(state.quotas) == 10
    assert not state.errors
    assert len(parsed) == 4 == len(set(parsed))


@pytest.mark.parametrize("spoiler", [
    "  - &a {user: x, quotas: {producer_byte_rate: 1}}\n  - {user: y}\n  - *a\n",  # an alias across slices
    "  - user: x\n    metadata: {labels: {team: a}}\n",  # not the plain shape
    "  - user: [unclosed\n",  # a YAML error
])
def test_anything_unusual_stops_the_slices(spoiler: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slices, "SLICE_ITEMS", 3)
    text = text_of(PLAIN, indent=True, notes=[], tail=False) + spoiler
    read = slices.read_sliced(text, plain_entities, ALIAS_LIMITS, _never)
    assert read is not None
    entries = read[1]["entities"]
    assert not entries.check()
    with pytest.raises(slices.Unsliceable):
        list(entries)


def test_an_item_on_its_own_line_is_read_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    text = text_of(PLAIN, indent=True, notes=[], tail=False) + "  -\n    user: x\n"
    assert slices.read_sliced(text, plain_entities, ALIAS_LIMITS, _never) is None


def _same_as_whole(paths: list[Path], monkeypatch: pytest.MonkeyPatch) -> DesiredState:
    """Compiled with every file sliced (two entries a slice), checked equal to the whole-file oracle."""
    from tests.manifest.streaming_test import all_profiles_first, outcome

    config = ProjectConfig()
    with monkeypatch.context() as m:
        m.setattr(slices, "BIG_FILE_CHARS", 1 << 62)
        expected = outcome(all_profiles_first(paths, config))
    with monkeypatch.context() as m:
        m.setattr(slices, "BIG_FILE_CHARS", 0)
        m.setattr(slices, "SLICE_ITEMS", 2)
        state = load_desired(paths, config)
    assert outcome(state) == expected
    return state


@pytest.mark.parametrize("spoiler", ["  - user: [unclosed\n", "  - user: z\n    metadata: {labels: {t: a}}\n"
                                     "    quotas: {producer_byte_rate: 1}\n"])
def test_overrides_made_before_the_slice_that_stops_are_undone(
        spoiler: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = tmp_path / "base" / "q.yaml"
    over = tmp_path / "over" / "q.yaml"
    base.parent.mkdir()
    over.parent.mkdir()
    base.write_text(text_of(PLAIN, indent=True, notes=[], tail=False))
    over.write_text("apiVersion: kqplan/v1\nkind: ClientQuotas\nentities:\n"
                    "  - user: u1\n    override: true\n    quotas: {producer_byte_rate: 7}\n"
                    "  - user: u2\n    override: true\n    quotas: {producer_byte_rate: null}\n"
                    "  - user: new\n    quotas: {consumer_byte_rate: 5}\n" + spoiler)
    state = _same_as_whole([base.parent, over.parent], monkeypatch)
    if "unclosed" in spoiler:  # the overlay is not read: the base stands
        assert state.quotas[Entity.user("u1")] == {"producer_byte_rate": 2048.0}
        assert Entity.user("new") not in state.origins
    else:
        assert state.quotas[Entity.user("u1")] == {"producer_byte_rate": 7.0}
        assert Entity.user("u2") in state.absent


@pytest.mark.parametrize("spoiler", ["  - user: [unclosed\n", "  - user: z\n    metadata: {labels: {t: a}}\n"
                                     "    quotas: {producer_byte_rate: 1}\n"])
def test_profiles_read_ahead_before_the_slice_that_stops_are_kept(
        spoiler: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry names a later file's profile (the rest is read ahead), then a slice stops: the
    later files' profiles stay, each once, in file order (no 'defined twice' of the undone file's)."""
    head = "apiVersion: kqplan/v1\nkind: ClientQuotas\n"
    (tmp_path / "a.yaml").write_text(head + "profiles:\n  tier: {producer_byte_rate: 1}\nentities:\n"
                                     "  - user: a1\n    profile: gold\n  - user: a2\n    profile: tier\n"
                                     + spoiler)
    (tmp_path / "b.yaml").write_text(head + "profiles:\n  gold: {producer_byte_rate: 2}\n"
                                     "  tier: {producer_byte_rate: 3}\nentities:\n"
                                     "  - user: b1\n    profile: gold\n")
    state = _same_as_whole([tmp_path], monkeypatch)
    assert state.quotas[Entity.user("b1")] == {"producer_byte_rate": 2.0}


@pytest.mark.parametrize("spoiler", ["  - user: [unclosed\n", "  - user: z\n    metadata: {labels: {t: a}}\n"
                                     "    quotas: {producer_byte_rate: 1}\n"])
def test_a_file_read_ahead_is_checked_before_its_profiles_count(
        spoiler: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading ahead for a profile meets a sliced file that is unusual: it is read whole first, so
    its profiles count only if it is valid (an invalid file's never shadow a later file's)."""
    head = "apiVersion: kqplan/v1\nkind: ClientQuotas\n"
    (tmp_path / "a.yaml").write_text(head + "entities:\n  - user: a1\n    profile: gold\n")
    (tmp_path / "b.yaml").write_text(head + "profiles:\n  gold: {producer_byte_rate: 2}\nentities:\n"
                                     "  - user: b1\n    profile: gold\n" + spoiler)
    (tmp_path / "c.yaml").write_text(head + "profiles:\n  gold: {producer_byte_rate: 3}\nentities: []\n")
    state = _same_as_whole([tmp_path], monkeypatch)
    assert state.quotas[Entity.user("a1")] == {"producer_byte_rate": 3.0 if "unclosed" in spoiler else 2.0}
