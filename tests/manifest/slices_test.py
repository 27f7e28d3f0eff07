"""A big manifest read in slices (kqplan/manifest/slices.py) must change nothing but memory: the
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

from kqplan.config import ProjectConfig
from kqplan.manifest import slices
from kqplan.manifest.compile import DesiredState, load_desired
from kqplan.manifest.loader import ALIAS_LIMITS, _plain_entities
from tests.manifest.fast_compile_test import entries, summary


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


@pytest.mark.parametrize("indent", [True, False])
def test_plain_files_are_sliced(indent: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slices, "SLICE_ITEMS", 3)
    text = text_of(PLAIN, indent=indent, notes=[4], tail=True)
    read = slices.read_sliced(text, _plain_entities, ALIAS_LIMITS)
    assert read is not None
    assert list(read[1]["entities"]) == PLAIN
    assert len(read[1]["entities"]) == 10


@pytest.mark.parametrize("spoiler", [
    "  - &a {user: x, quotas: {producer_byte_rate: 1}}\n  - {user: y}\n  - *a\n",  # an alias across slices
    "  - user: x\n    metadata: {labels: {team: a}}\n",  # not the plain shape
    "  -\n    user: x\n",  # an item on its own line
    "  - user: [unclosed\n",  # a YAML error
])
def test_anything_unusual_is_read_whole(spoiler: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slices, "SLICE_ITEMS", 3)
    text = text_of(PLAIN, indent=True, notes=[], tail=False) + spoiler
    assert slices.read_sliced(text, _plain_entities, ALIAS_LIMITS) is None
