"""Big inputs are parsed in batches by two threads (loader.parse_ahead): the same documents and
the same diagnostics, in the same order, as one after the other — bad files mixed in — and never
more than a batch parsed before the caller asks for it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kqplan.config.model import ProjectConfig
from kqplan.core.diagnostics import render_text
from kqplan.manifest import loader, parse
from kqplan.manifest.source import SourceFile

GOOD = "apiVersion: kqplan/v1\nkind: ClientQuotas\nentities:\n" + "".join(
    f"  - user: u{i}\n    quotas: {{producer_byte_rate: 1MiB}}\n" for i in range(50))
BAD = ["entities: [\n", "", "- a\n- b\n", "a: 1\n---\nb: 2\n", "[" * 100 + "]" * 100, "x: \x07\n",
       "apiVersion: kqplan/v2\nkind: ClientQuotas\n", "key: 'unclosed\n", GOOD.replace("u1\n", "[u1\n")]


def loaded(paths: list[Path], *, threads: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[object, str]:
    with monkeypatch.context() as m:
        m.setattr(loader, "PARALLEL_PARSE_CHARS", 0 if threads else 1 << 62)
        result = loader.load(paths, ProjectConfig())
    return ([(m.source.path, m.raw) for m in result.manifests], render_text(result.diagnostics))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.one_of(st.just(GOOD), st.sampled_from(BAD)), min_size=2, max_size=8))
def test_threads_change_nothing(texts: list[str], tmp_path_factory: pytest.TempPathFactory,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path_factory.mktemp("m")
    paths = []
    for i, text in enumerate(texts):
        path = work / f"q{i:02d}.yaml"
        path.write_text(text)
        paths.append(path)
    paths.append(work / "missing.yaml")  # a read error among the parsed files
    assert loaded(paths, threads=True, monkeypatch=monkeypatch) == \
        loaded(paths, threads=False, monkeypatch=monkeypatch)


def test_a_failure_in_the_helper_thread_is_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def broken(source: SourceFile) -> object:
        calls.append(source.path)
        raise MemoryError(source.path)

    monkeypatch.setattr(loader, "parse_yaml", broken)
    sources = [SourceFile(f"f{i}", GOOD) for i in range(4)]
    monkeypatch.setattr(loader, "PARALLEL_PARSE_CHARS", 0)
    with pytest.raises(MemoryError):
        list(loader.parse_ahead(sources))


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(st.sampled_from(["a", " ", "\t", "\n", "\r", "\x00", "\x07", "\x0b", "\x1f", "\x7f",
                                     "\x85", "\x9f", "\ufeff", "\u00e9", "\ufffe", "#", ":"]), max_size=30),
       bom=st.booleans())
def test_forbidden_characters_as_the_regex_finds_them(text: str, bom: bool,
                                                      tmp_path_factory: pytest.TempPathFactory) -> None:
    """read_text's ASCII shortcut reports exactly what the character regex reports."""
    path = tmp_path_factory.mktemp("t") / "q.yaml"
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8", "surrogatepass"))
    found, diag = parse.read_text(path, 1 << 20)
    bad = parse._FORBIDDEN.search(text.removeprefix("\ufeff") if not bom else text)
    if bad is None:
        assert diag is None
        assert found is not None
    else:
        assert diag is not None
        assert diag.code == "KQP009"
        assert f"U+{ord(bad.group()):04X}" in diag.message


def test_at_most_a_batch_is_parsed_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[str] = []
    real = loader.parse_yaml

    def counting(source: SourceFile) -> object:
        parsed.append(source.path)
        return real(source)

    monkeypatch.setattr(loader, "parse_yaml", counting)
    monkeypatch.setattr(loader, "PARALLEL_PARSE_CHARS", 0)
    monkeypatch.setattr(loader, "BATCH_CHARS", 2 * len(GOOD))  # two files a batch
    sources = [SourceFile(f"f{i}", GOOD) for i in range(6)]
    ahead = loader.parse_ahead(sources)
    for i in range(6):
        doc, diag = next(ahead)
        assert diag is None
        assert len(doc["entities"]) == 50
        assert len(parsed) == (i // 2 + 1) * 2, f"file {i} given out with {parsed} parsed"
    assert sorted(parsed) == [s.path for s in sources]  # a batch's files are parsed together
    assert next(ahead, None) is None


def test_a_consumer_that_stops_early_stops_the_helper(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader, "PARALLEL_PARSE_CHARS", 0)
    ahead = loader.parse_ahead([SourceFile(f"f{i}", GOOD) for i in range(4)])
    next(ahead)
    ahead.close()  # what a failing compile does (iter_load's finally)
    assert next(ahead, None) is None
