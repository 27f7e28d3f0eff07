"""Manifests are compiled file by file as they are parsed, a batch of files at a time
(loader.iter_load, compile._compile), a big file a slice at a time (manifest/slices.py): the
outcome — quotas, origins, layers, every diagnostic — equals compiling whole files with every
file's profiles added first (the order before streaming, kept here as the oracle), and no more
than a batch is parsed while one compiles, unless an entry names a profile of a later file. A
sliced file found unusual midway (a YAML or shape error, an alias across slices, an entry that
is valid but not plain) is undone and read whole: the outcome is still the oracle's."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kqplan.config.model import ProjectConfig
from kqplan.core.desired import DesiredState
from kqplan.core.diagnostics import render_text, sort_key
from kqplan.core.policy import policy_diagnostics
from kqplan.manifest import loader
from kqplan.manifest.compile import load_desired
from kqplan.manifest.compiler import Compiler
from kqplan.manifest.fast import slices
from kqplan.manifest.source import LoadedManifest, SourceFile
from tests.helpers import write_manifest


def all_profiles_first(paths: list[Path], config: ProjectConfig) -> DesiredState:
    """The compile order before streaming: every file loaded, every profile added, then each file."""
    diagnostics = []
    items: list[tuple[LoadedManifest, int]] = []
    seen: set[Path] = set()
    for layer, path in enumerate(paths):
        result = loader.load([path], config)
        diagnostics.extend(result.diagnostics)
        for item in result.manifests:
            key = Path(item.source.path).resolve()
            if key not in seen:
                seen.add(key)
                items.append((item, layer))
    c = Compiler(config)
    for item, _ in items:
        c.add_profiles(item)
    for item, layer in items:
        c.add_guard(item)
        c.add_ownership(item)
        c.add_entities(item, layer)
    c.state.files = len(items)
    state = c.finish()
    state.files += len(diagnostics and {d.span.path for d in diagnostics})
    state.diagnostics = sorted([*diagnostics, *state.diagnostics], key=sort_key)
    if not state.errors:
        found = policy_diagnostics(state, config.policy)
        state.diagnostics = sorted([*state.diagnostics, *found], key=sort_key)
    return state


def write_layers(work: Path, layers: list[list[str]]) -> list[Path]:
    """Each layer's manifests in a directory of its own, in order: the paths to load."""
    paths = []
    for n, files in enumerate(layers):
        for i, text in enumerate(files):
            write_manifest(work / f"l{n}" / f"q{i}.yaml", text)
        paths.append(work / f"l{n}")
    return paths


def outcome(state: DesiredState) -> tuple[object, ...]:
    return (state.quotas, {e: (o.source.path, o.entry, o.layer, o.display) for e, o in state.origins.items()},
            state.absent, state.protected, state.metadata, state.with_default, state.ownership, state.files,
            state.cluster_guard, render_text(state.diagnostics))


NAMES = ["a", "b", "c"]
SPOILERS = [  # entries a slice cannot take alone: the file is read whole, midway through compiling
    "  - user: d\n    metadata: {labels: {team: x}}\n    quotas: {consumer_byte_rate: 1MiB}",  # valid
    "  - user: [unclosed",  # a YAML error
    "  - user: 5\n    quotas: {consumer_byte_rate: 1MiB}",  # a shape error
    "  - user: e\n    quotas: &q {consumer_byte_rate: 2MiB}",  # an anchor ...
    "  - user: f\n    quotas: *q",  # ... and its alias, perhaps in another slice
]
PROFILES = ["gold", "silver", "bronze"]


@st.composite
def manifest(draw: st.DrawFn) -> str:
    lines = []
    if draw(st.booleans()):
        lines.append("profiles:")
        for name in draw(st.lists(st.sampled_from(PROFILES), max_size=2)):
            lines.append(f"  {name}: {{producer_byte_rate: {draw(st.sampled_from(['1MiB', '2MiB', '0']))}}}")
    if draw(st.booleans()):
        lines.append(f"cluster: {draw(st.sampled_from(['one', 'two']))}")
    if draw(st.integers(0, 3)) == 0:
        lines.append(f"ownership: {{prune: true, scope: [{{user: {draw(st.sampled_from(NAMES))}*}}]}}")
    lines.append("entities:")
    for _ in range(draw(st.integers(0, 6))):
        spoiler = draw(st.sampled_from(SPOILERS)) if draw(st.integers(0, 5)) == 0 else None
        if spoiler is not None:
            lines.append(spoiler)
            continue
        entry = f"  - user: {draw(st.sampled_from(NAMES))}"
        if draw(st.booleans()):
            entry += "\n    override: true"
        if draw(st.booleans()):
            entry += f"\n    profile: {draw(st.sampled_from([*PROFILES, 'nope']))}"
        else:
            entry += f"\n    quotas: {{consumer_byte_rate: {draw(st.sampled_from(['1MiB', '3MiB', '-1']))}}}"
        lines.append(entry)
    if lines[-1] == "entities:":
        lines[-1] = "entities: []"
    return "\n".join(lines) + "\n"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(layers=st.lists(st.lists(manifest(), min_size=1, max_size=4), min_size=1, max_size=2),
       threads=st.booleans(), slice_items=st.sampled_from([0, 1, 2]))
def test_streaming_equals_all_profiles_first(layers: list[list[str]], threads: bool, slice_items: int,
                                             tmp_path_factory: pytest.TempPathFactory,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    paths = write_layers(tmp_path_factory.mktemp("layers"), layers)
    config = ProjectConfig()
    with monkeypatch.context() as m:
        m.setattr(slices, "BIG_FILE_CHARS", 1 << 62)
        expected = outcome(all_profiles_first(paths, config))
    with monkeypatch.context() as m:
        m.setattr(loader, "PARALLEL_PARSE_CHARS", 0 if threads else 1 << 62)
        m.setattr(loader, "BATCH_CHARS", 1)  # two files a batch: streaming is what is tested
        if slice_items:  # every file sliced, a slice of one or two entries
            m.setattr(slices, "BIG_FILE_CHARS", 0)
            m.setattr(slices, "SLICE_ITEMS", slice_items)
        assert outcome(load_desired(paths, config)) == expected


def _traced(monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[tuple[str, int]]]:
    """Files parsed, and how many were parsed when each file's entities compiled."""
    parsed: list[str] = []
    compiled: list[tuple[str, int]] = []
    parse, add_entities = loader.parse_yaml, Compiler.add_entities

    def parse_counted(source: SourceFile) -> object:
        parsed.append(source.path)
        return parse(source)

    def add_entities_counted(self: Compiler, item: LoadedManifest, layer: int = 0) -> None:
        compiled.append((item.source.path, len(parsed)))
        add_entities(self, item, layer)

    monkeypatch.setattr(loader, "parse_yaml", parse_counted)
    monkeypatch.setattr(Compiler, "add_entities", add_entities_counted)
    monkeypatch.setattr(loader, "PARALLEL_PARSE_CHARS", 0)
    monkeypatch.setattr(loader, "BATCH_CHARS", 1)  # two files a batch
    return parsed, compiled


def _files(tmp_path: Path, n: int, *, profile_in_last: bool) -> None:
    for i in range(n):
        body = "entities:\n" + "".join(f"  - user: u{i}-{j}\n    quotas: {{producer_byte_rate: 1MiB}}\n"
                                       for j in range(20))
        if profile_in_last and i == 0:
            body += "  - user: uses-gold\n    profile: gold\n"
        if profile_in_last and i == n - 1:
            body = "profiles:\n  gold: {consumer_byte_rate: 2MiB}\n" + body
        write_manifest(tmp_path / f"q{i:02d}.yaml", body)


def test_a_batch_compiles_before_the_next_is_parsed(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _files(tmp_path, 8, profile_in_last=False)
    _parsed, compiled = _traced(monkeypatch)
    state = load_desired([tmp_path], ProjectConfig())
    assert not state.errors
    assert len(state.quotas) == 160
    assert [path for path, _ in compiled] == sorted(str(p) for p in tmp_path.iterdir())
    for i, (path, seen) in enumerate(compiled):
        assert seen == (i // 2 + 1) * 2, f"{path} compiled with {seen} files parsed"


def test_a_profile_of_a_later_file_reads_the_rest_first(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    _files(tmp_path, 5, profile_in_last=True)
    parsed, compiled = _traced(monkeypatch)
    state = load_desired([tmp_path], ProjectConfig())
    assert not state.errors, render_text(state.errors)
    from kqplan.core.entity import Entity

    assert state.quotas[Entity.user("uses-gold")] == {"consumer_byte_rate": 2.0 * 2**20}
    assert state.origins[Entity.user("uses-gold")].source.path.endswith("q00.yaml")
    assert len(parsed) == 5
    assert [p for p, _ in compiled] == sorted(str(p) for p in tmp_path.iterdir())


def test_an_unknown_profile_still_lists_every_file_s_profiles(tmp_path: Path) -> None:
    write_manifest(tmp_path / "a.yaml", "entities:\n  - user: x\n    profile: glod\n")
    write_manifest(tmp_path / "b.yaml", "profiles:\n  gold: {producer_byte_rate: 1MiB}\nentities: []\n")
    write_manifest(tmp_path / "c.yaml", "profiles:\n  silver: {producer_byte_rate: 1MiB}\nentities: []\n")
    text = render_text(load_desired([tmp_path], ProjectConfig()).errors)
    assert "unknown profile 'glod'" in text
    assert "did you mean 'gold'?" in text
