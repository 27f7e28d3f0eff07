"""compile's fast path for plain entries (``Compiler.add_plain``) must change nothing but speed:
the same desired state, origins, order and diagnostics as the general path alone, on generated
manifests mixing plain entries with every shape that must leave the fast path (repeats, escapes,
defaults, nulls, unit strings, invalid values, custom keys, ip entries, overrides)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kqplan.config.model import ProjectConfig
from kqplan.core.desired import DesiredState
from kqplan.core.diagnostics import render_text
from kqplan.manifest.compile import load_desired
from kqplan.manifest.compiler import Compiler

# Mostly plain (the fast path's work), with every odd shape mixed in.
names = st.sampled_from(["alice", "bob", "carol", "<default>"] * 4 +
                        ["\\<default>", "", "a b", "caf\u00e9", "x\u202ey", None, 7])
values = st.sampled_from([1024, 1048576, 25.5, "10MiB"] * 5 +
                         [2.5, "1.5KiB", 0, -1, True, None, "abc", 2**60, float("nan")])
keys = st.sampled_from(["producer_byte_rate", "consumer_byte_rate", "request_percentage"] * 4 +
                       ["connection_creation_rate", "bogus_rate"])
shapes = st.sampled_from([["user"]] * 4 + [["user", "client-id"]] * 4 + [["client-id"]] * 2 + [["ip"], []])


@st.composite
def entries(draw: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    for field in draw(shapes):
        entry[field] = draw(names) if field != "ip" else draw(st.sampled_from(["10.0.0.1", "<default>"]))
    if draw(st.integers(0, 9)):
        entry["quotas"] = draw(st.dictionaries(keys, values, max_size=3))
    if draw(st.integers(0, 9)) == 0:
        entry["override"] = True
    return entry


def compiled(paths: list[Path], *, fast: bool, monkeypatch: pytest.MonkeyPatch) -> DesiredState:
    with monkeypatch.context() as m:
        if not fast:
            m.setattr(Compiler, "add_plain", lambda *args: False)
        return load_desired(paths, ProjectConfig())


def summary(state: DesiredState) -> Any:
    return (list(state.quotas.items()), [(e, o.display) for e, o in state.origins.items()],
            sorted(state.absent, key=str), render_text(state.diagnostics))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(layers=st.lists(st.lists(entries(), max_size=12), min_size=1, max_size=2))
def test_fast_path_changes_nothing(layers: list[list[dict[str, Any]]],
                                   tmp_path_factory: pytest.TempPathFactory,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path_factory.mktemp("m")
    paths = []
    for n, items in enumerate(layers):
        path = work / f"layer{n}" / "q.yaml"
        path.parent.mkdir()
        path.write_text(yaml.safe_dump({"apiVersion": "kqplan/v1", "kind": "ClientQuotas", "entities": items},
                                       allow_unicode=True))
        paths.append(path)
    fast, general = compiled(paths, fast=True, monkeypatch=monkeypatch), compiled(paths, fast=False,
                                                                                 monkeypatch=monkeypatch)
    assert repr(summary(fast)) == repr(summary(general))


def test_the_fast_path_takes_plain_entries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    taken: list[int] = []
    original = Compiler.add_plain

    def counting(self: Compiler, source: Any, index: int, raw: dict[str, Any], layer: int) -> bool:
        done = original(self, source, index, raw, layer)
        if done:
            taken.append(index)
        return done

    monkeypatch.setattr(Compiler, "add_plain", counting)
    body = "".join(f"  - user: u{i}\n    quotas: {{producer_byte_rate: 1024}}\n" for i in range(50))
    path = tmp_path / "q.yaml"
    path.write_text(f"apiVersion: kqplan/v1\nkind: ClientQuotas\nentities:\n{body}")
    assert not load_desired([path], ProjectConfig()).diagnostics
    assert taken == list(range(1, 50))  # the first sees the value first, through the general path
