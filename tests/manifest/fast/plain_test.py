"""A plain entity list read from its text (kqplan/manifest/fast/plain.py) must change nothing but speed:
the same desired state, origins, layers and diagnostics as the whole-file parse, on generated
manifests close to the plain shape — tricky names (YAML keywords, numbers, escapes), bad keys
and values, uneven or repeated quota lines, repeats across files and layers, defaults, comments,
other fields — and the plain path must really be taken when a file is plain. The size threshold
is lowered so small files take it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kqplan.config.model import ProjectConfig
from kqplan.core.entity import Entity
from kqplan.manifest import loader
from kqplan.manifest.compile import load_desired
from kqplan.manifest.compiler import Compiler
from kqplan.manifest.fast import plain, slices
from kqplan.manifest.parse import ALIAS_LIMITS
from tests.helpers import write_manifest
from tests.manifest.streaming_test import outcome, write_layers

GOOD_NAMES = ["alice", "bob", "svc-1", "a.b_c", "x@y.io", "<default>"]
ODD_NAMES = ["null", "True", "FALSE", "yes", "n", "Infinity", "1abc", "0x1F", "12", "\\<default>", "é",
             "a b", "'q'", "\"q\"", "a#b", ""]
GOOD_KEYS = ["producer_byte_rate", "consumer_byte_rate", "request_percentage"]
ODD_KEYS = ["controller_mutation_rate", "connection_creation_rate", "unknown_key", "null", "true"]
GOOD_VALUES = ["1048576", "2MiB", "1MB", "25.5", "1e3"]
ODD_VALUES = ["0", "-1", ".inf", ".nan", "true", "null", "9007199254740993", "1.5", "0x10", "1_000", "1 MiB",
              "2KiB", "~"]


def mostly(good: list[str], odd: list[str], clean: bool) -> st.SearchStrategy[str]:
    """``good`` only when ``clean``; else now and then ``odd``."""
    if clean:
        return st.sampled_from(good)
    return st.one_of(*[st.sampled_from(good)] * 3, st.sampled_from(odd))


@st.composite
def quotas(draw: st.DrawFn, keys_column: int, odd: frozenset[str]) -> str:
    """What follows ``quotas:``: a flow mapping, or block lines (sometimes uneven, or repeated)."""
    pairs = draw(st.lists(st.tuples(mostly(GOOD_KEYS, ODD_KEYS, "keys" not in odd),
                                    mostly(GOOD_VALUES, ODD_VALUES, "values" not in odd)),
                          min_size=0 if "shape" in odd and draw(st.integers(0, 9)) == 0 else 1, max_size=3))
    clean = "shape" not in odd
    if draw(st.booleans()):
        return " {" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}\n"
    deeper = keys_column + draw(st.sampled_from([1, 2, 2, 4]))
    lines = ""
    for i, (k, v) in enumerate(pairs):
        column = deeper + (1 if i == 1 and not clean and draw(st.integers(0, 9)) == 0 else 0)  # uneven
        lines += " " * column + f"{k}: {v}\n"
    return "\n" + lines


@st.composite
def entry(draw: st.DrawFn, column: int, odd: frozenset[str]) -> str:
    keys = " " * (column + 2)
    names = mostly(GOOD_NAMES, ODD_NAMES, "names" not in odd)
    clean = "shape" not in odd
    forms = ["user", "user", "user+client", "client", *([] if clean else ["client+user"])]
    form = draw(st.sampled_from(forms))
    if form == "user":
        head = f"user: {draw(names)}\n"
    elif form == "user+client":
        head = f"user: {draw(names)}\n{keys}client-id: {draw(names)}\n"
    elif form == "client":
        head = f"client-id: {draw(names)}\n"
    else:  # the other order: valid, not plain
        head = f"client-id: {draw(names)}\n{keys}user: {draw(names)}\n"
    extra = "" if clean else draw(st.sampled_from([
        "", "", "", "", f"{keys}override: true\n", f"{keys}protect: true\n",
        f"{keys}metadata: {{labels: {{team: a}}}}\n", f"{keys}# a comment\n", "\n",
        f"{keys}profile: gold\n"]))
    body = f"{keys}quotas:" + draw(quotas(column + 2, odd))
    text = " " * column + "- " + head + (extra + body if draw(st.booleans()) else body + extra)
    if not clean and draw(st.integers(0, 19)) == 0:
        text = text.replace("\n", "  \n", 1)  # trailing spaces
    return text


@st.composite
def manifest(draw: st.DrawFn) -> str:
    column = draw(st.sampled_from([0, 2, 2, 4]))
    head = ""
    if draw(st.integers(0, 4)) == 0:
        head += "metadata: {labels: {team: x}}\n"
    if draw(st.integers(0, 4)) == 0:
        head += "profiles: {gold: {producer_byte_rate: 1MiB}}\n"
    # what may be odd in this file (each half the time): a file with none is plain, but for
    # repeats; one with odd keys or values only is plain text with problems to report
    odd = frozenset(draw(st.sets(st.sampled_from(["names", "keys", "values", "shape"]))))
    items = "".join(draw(st.lists(entry(column, odd), min_size=1, max_size=6)))
    tail = draw(st.sampled_from(["", "", "ownership: {prune: true, scope: [{user: 'a*'}]}\n"]))
    text = head + "entities:\n" + items + tail
    return text[:-1] if draw(st.integers(0, 9)) == 0 else text  # no newline at the end


def _load(paths: list[Path], *, plain_text: bool, monkeypatch: pytest.MonkeyPatch,
          sliced: bool = False) -> tuple[object, ...]:
    """The outcome read whole, or with plain lists read from their text (``sliced``: every file
    read in slices of 2 entries, each slice from its text when plain)."""
    with monkeypatch.context() as m:
        m.setattr(slices, "BIG_FILE_CHARS", 0 if sliced else 1 << 62)
        m.setattr(slices, "SLICE_ITEMS", 2)
        m.setattr(plain, "PLAIN_FILE_CHARS", 0 if plain_text else 1 << 62)
        return outcome(load_desired(paths, ProjectConfig()))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(layers=st.lists(st.lists(manifest(), min_size=1, max_size=3), min_size=1, max_size=2))
def test_reading_the_text_equals_parsing_it(layers: list[list[str]], tmp_path_factory: pytest.TempPathFactory,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    paths = write_layers(tmp_path_factory.mktemp("layers"), layers)
    header = "apiVersion: kqplan/v1\nkind: ClientQuotas\n"
    read = sum(plain.read_plain(header + text, ALIAS_LIMITS) is not None
               for files in layers for text in files)
    event(f"files read from their text: {min(read, 2)}+")
    whole = _load(paths, plain_text=False, monkeypatch=monkeypatch)
    assert _load(paths, plain_text=True, monkeypatch=monkeypatch) == whole
    assert _load(paths, plain_text=True, sliced=True, monkeypatch=monkeypatch) == whole


PLAIN_FILE = """\
entities:
  - user: alice
    quotas: {producer_byte_rate: 1MiB, consumer_byte_rate: 2097152}
  - user: alice
    client-id: app
    quotas:
      request_percentage: 25.5
  - client-id: <default>
    quotas: {producer_byte_rate: 1MiB, consumer_byte_rate: 2097152}
  - user: <default>
    client-id: batch.job@x
    quotas: {producer_byte_rate: 1MiB, consumer_byte_rate: 2097152}
"""


def bulk_adds(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """What each bulk add (``add_plain_list``) answers, in order, from now on."""
    added: list[bool] = []
    bulk = Compiler.add_plain_list

    def counted(self: Compiler, *args: object) -> bool:
        added.append(bulk(self, *args))  # type: ignore[arg-type]
        return added[-1]

    monkeypatch.setattr(Compiler, "add_plain_list", counted)
    return added


def test_a_plain_file_is_compiled_without_a_parse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No whole parse, and one bulk add: the path is really taken (the differential test above
    would pass if it never were)."""
    monkeypatch.setattr(plain, "PLAIN_FILE_CHARS", 0)
    monkeypatch.setattr(loader, "parse_yaml", lambda source: pytest.fail(f"{source.path} parsed whole"))
    added = bulk_adds(monkeypatch)
    state = load_desired([write_manifest(tmp_path / "q.yaml", PLAIN_FILE)], ProjectConfig())
    assert added == [True]
    assert not state.diagnostics
    rate = {"producer_byte_rate": 1048576.0, "consumer_byte_rate": 2097152.0}
    any_client, batch = Entity.of({"client-id": None}), Entity.user_client(None, "batch.job@x")
    assert state.quotas == {Entity.user("alice"): rate, Entity.user_client("alice", "app"):
                            {"request_percentage": 25.5}, any_client: rate, batch: rate}
    assert state.quotas[Entity.user("alice")] is state.quotas[any_client]  # one dict a tier
    assert state.with_default == {any_client, batch}
    assert [o.display for o in state.origins.values()] == [f"{tmp_path / 'q.yaml'}:{line}:5"
                                                           for line in (4, 6, 10, 12)]


def test_each_slice_of_a_big_file_is_read_from_its_text(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A big file's plain slices are added in bulk, unparsed; a slice that is not plain (a
    comment) is parsed alone, and the rest of the file still read from its text."""
    monkeypatch.setattr(slices, "BIG_FILE_CHARS", 0)
    monkeypatch.setattr(slices, "SLICE_ITEMS", 2)
    parsed: list[str] = []
    parse = slices._parse_slice

    def counted(text: str, start: int, end: int, limits: object) -> object:
        parsed.append(text[start:end])
        return parse(text, start, end, limits)

    monkeypatch.setattr(slices, "_parse_slice", counted)
    monkeypatch.setattr(loader, "parse_yaml", lambda source: pytest.fail(f"{source.path} parsed whole"))
    added = bulk_adds(monkeypatch)
    path = write_manifest(tmp_path / "q.yaml", PLAIN_FILE + PLAIN_FILE.replace("alice", "carol").replace(
        "<default>", "dan").removeprefix("entities:\n"))
    whole = outcome(load_desired([path], ProjectConfig()))
    assert (added, parsed) == ([True] * 4, [])
    path.write_text(path.read_text().replace("  - user: carol\n", "  - user: carol  # b\n", 1))
    assert outcome(load_desired([path], ProjectConfig()))[:2] == whole[:2]
    assert added[4:] == [True, True, True]
    assert len(parsed) == 1
    assert "# b" in parsed[0]


@pytest.mark.parametrize("name", ["null", "Null", "TRUE", "false", "yes", "on", "n", "NaN", "inf",
                                  "Infinity"])
def test_a_keyword_is_no_plain_name(name: str) -> None:
    """YAML may read these as other than a string: the file is parsed whole."""
    text = f"apiVersion: kqplan/v1\nkind: ClientQuotas\nentities:\n  - user: {name}\n    quotas: {{x: 1}}\n"
    assert plain.read_plain(text, ALIAS_LIMITS) is None
    assert plain.read_plain(text.replace(f"user: {name}", f"user: x{name}"), ALIAS_LIMITS) is not None


@pytest.mark.parametrize("second", [
    "  - user: alice\n    quotas: {request_percentage: 5}\n",  # listed twice in the file
    "  - user: bob\n    quotas: {request_percentage: 0}\n",  # a value Kafka refuses
    "  - user: bob\n    quotas: {producer_byte_rate: 9007199254740993}\n",  # a warning (not exact)
    "  - user: bob\n    quotas: {connection_creation_rate: 5}\n",  # a key user entities do not take
])
def test_anything_to_report_goes_entry_by_entry(second: str, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The bulk add refuses, changing nothing, and the entry-by-entry path reports exactly what
    the whole parse does."""
    text = "entities:\n  - user: alice\n    quotas: {request_percentage: 5}\n" + second
    path = write_manifest(tmp_path / "q.yaml", text)
    monkeypatch.setattr(plain, "PLAIN_FILE_CHARS", 0)
    assert plain.read_plain(path.read_text(), ALIAS_LIMITS) is not None
    assert _load([path], plain_text=True, monkeypatch=monkeypatch) == _load([path], plain_text=False,
                                                                           monkeypatch=monkeypatch)
    assert load_desired([path], ProjectConfig()).diagnostics


def test_a_repeat_in_another_file_goes_entry_by_entry(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    write_manifest(tmp_path / "a.yaml", "entities:\n  - user: alice\n    quotas: {request_percentage: 5}\n")
    write_manifest(tmp_path / "b.yaml", "entities:\n  - user: bob\n    quotas: {request_percentage: 5}\n"
                   "  - user: alice\n    quotas: {request_percentage: 6}\n")
    got = _load([tmp_path], plain_text=True, monkeypatch=monkeypatch)
    assert got == _load([tmp_path], plain_text=False, monkeypatch=monkeypatch)
    assert "KQP102" in str(got[-1])
