"""The shared primitives of issue 29 under generated hostile input: ``inside`` (every output path),
``component_problem`` and ``fit_name`` (names that become file names), ``read_bounded`` (every
input file), ``write_all``/``write_atomically`` (every file written). Fast: a few seconds in all."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kqplan.core.errors import KqplanError
from kqplan.core.filenames import NAME_BYTES, component_problem, fit_name
from kqplan.files import inside, read_bounded, read_bounded_text, write_all, write_atomically

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
FEW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# names from every corner of Unicode, with the pieces a path is made of mixed in
PIECES = st.sampled_from(["/", "\\", "\x00", "..", ".", " ", "-", "\n", "\r", "\x1b", "\u202e", "\u200b",
                          "\x7f", "\x85", "~", "$", "*", "é", "日本", "\U0001f600", "a", "x.json"])
NAMES = st.lists(st.one_of(st.text(max_size=12), PIECES), max_size=8).map("".join)
FORBIDDEN = st.sampled_from(["/", "\\", "\x00", "\n", "\x1b", "\u202e", "\x7f", "\t", "\x85"])


@contextmanager
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="kqplan-primitives-") as directory:
        yield Path(directory)


# -- inside / component_problem -------------------------------------------------------------------

@FAST
@given(name=NAMES)
def test_inside_never_leaves_out_and_agrees_with_component_problem(name: str) -> None:
    out = Path("/srv/out")
    problem = component_problem(name)
    try:
        path = inside(out, name)
    except KqplanError:
        assert problem is not None
        return
    assert problem is None
    assert path.parent == out
    assert path.name == name
    assert os.path.normpath(path) == str(path)
    assert os.path.commonpath([out, os.path.normpath(path)]) == str(out)


@FAST
@given(names=st.lists(NAMES, min_size=1, max_size=4))
def test_inside_joins_several_names_only_when_every_one_is_plain(names: list[str]) -> None:
    out = Path("out")
    if any(component_problem(n) is not None for n in names):
        with pytest.raises(KqplanError):
            inside(out, *names)
    else:
        path = inside(out, *names)
        assert path.parts == ("out", *names)


@FAST
@given(before=st.text(max_size=8), bad=FORBIDDEN, after=st.text(max_size=8))
def test_a_separator_nul_or_control_character_is_always_refused(before: str, bad: str, after: str) -> None:
    name = before + bad + after
    assert component_problem(name) is not None
    with pytest.raises(KqplanError):
        inside(Path("out"), name)


@pytest.mark.parametrize("name", ["", ".", "..", "../x", "/abs", "a/b", "a\\b", "a\x00b", "\x01", "\x1b[2J",
                                  "-rf", " lead", "trail ", "a\u202eb", "x" * (NAME_BYTES + 1)])
def test_the_usual_escapes_are_refused(name: str) -> None:
    assert component_problem(name) is not None
    with pytest.raises(KqplanError):
        inside(Path("out"), name)


@FAST
@given(name=st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,60}", fullmatch=True))
def test_plain_names_are_accepted(name: str) -> None:
    assume(name not in (".", ".."))
    assert component_problem(name) is None
    assert inside(Path("out"), name) == Path("out") / name


# -- fit_name -------------------------------------------------------------------------------------

SUFFIXES = st.sampled_from(["", ".yaml", ".json", ".csv", ".quotas.yaml", ".é.json"])
LONG_TEXT = st.text(min_size=1, max_size=400)


@FAST
@given(stem=LONG_TEXT, suffix=SUFFIXES, key=st.one_of(st.none(), st.text(max_size=50)))
def test_fit_name_fits_keeps_short_names_and_cuts_on_a_character(stem: str, suffix: str,
                                                                  key: str | None) -> None:
    name = fit_name(stem, suffix, key=key)
    assert len(name.encode("utf-8")) <= NAME_BYTES
    assert name.endswith(suffix)
    if len((stem + suffix).encode("utf-8")) <= NAME_BYTES:
        assert name == stem + suffix
    else:
        body = name[: len(name) - len(suffix)]
        cut, _, tag = body.rpartition("-")
        assert len(tag) == 8
        assert set(tag) <= set("0123456789abcdef")
        assert stem.startswith(cut)  # a prefix of whole characters: never half of one
        name.encode("utf-8")  # and it encodes: no lone surrogate from a split


@FAST
@given(stem=st.text(min_size=NAME_BYTES, max_size=300), suffix=SUFFIXES,
       keys=st.lists(st.text(max_size=30), min_size=2, max_size=2, unique=True))
def test_fit_name_keeps_distinct_keys_apart(stem: str, suffix: str, keys: list[str]) -> None:
    assume(len((stem + suffix).encode("utf-8")) > NAME_BYTES)
    assert fit_name(stem, suffix, key=keys[0]) != fit_name(stem, suffix, key=keys[1])


@FAST
@given(common=st.text(min_size=NAME_BYTES, max_size=260), tails=st.lists(st.text(min_size=1, max_size=20),
                                                                         min_size=2, max_size=2, unique=True))
def test_fit_name_keeps_long_names_with_a_common_start_apart(common: str, tails: list[str]) -> None:
    a, b = (fit_name(common + t, ".yaml") for t in tails)
    assert a != b


def test_fit_name_never_splits_a_four_byte_character() -> None:
    for pad in range(4):
        stem = "a" * pad + "\U0001f600" * 80
        name = fit_name(stem, ".json")
        assert len(name.encode("utf-8")) <= NAME_BYTES
        assert stem.startswith(name[: -len(".json")].rpartition("-")[0])


# -- read_bounded ---------------------------------------------------------------------------------

@FAST
@given(data=st.binary(max_size=4096), limit=st.integers(0, 5000))
def test_read_bounded_returns_exactly_the_bytes_or_refuses_over_the_limit(data: bytes, limit: int) -> None:
    with scratch() as d:
        path = d / "in.bin"
        path.write_bytes(data)
        if len(data) <= limit:
            assert read_bounded(path, what="probe", limit=limit) == data
        else:
            with pytest.raises(KqplanError, match=r"over the .* limit") as err:
                read_bounded(path, what="probe", limit=limit)
            assert str(path) in err.value.message
            assert err.value.message.startswith("cannot read probe ")


@FAST
@given(text=st.text(max_size=500), bom=st.booleans())
def test_read_bounded_text_reads_utf8_with_or_without_a_bom(text: str, bom: bool) -> None:
    with scratch() as d:
        path = d / "in.txt"
        path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
        got = read_bounded_text(path)
        assert got == (text if bom or not text.startswith("\ufeff") else text[1:])


def test_read_bounded_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, kind in ((Path("/dev/zero"), "a device"), (fifo, "a FIFO"), (tmp_path, "a directory")):
        with pytest.raises(KqplanError, match=f"it is {kind}, not a regular file"):
            read_bounded(path, what="probe")


# -- write_all / write_atomically -----------------------------------------------------------------

MODES = st.sampled_from([0o600, 0o640, 0o644, 0o660, 0o664, 0o700, 0o755, 0o444])
UMASKS = st.sampled_from([0o000, 0o002, 0o022, 0o027, 0o077])
CONTENT = st.one_of(st.text(max_size=200), st.binary(max_size=200))


def as_bytes(content: str | bytes) -> bytes:
    return content.encode("utf-8") if isinstance(content, str) else content


@contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


@FEW
@given(mode=MODES, content=CONTENT)
def test_an_existing_file_keeps_its_mode(mode: int, content: str | bytes) -> None:
    with scratch() as d:
        path = d / "kept.yaml"
        path.write_text("old\n")
        path.chmod(mode)
        write_atomically(path, content)
        assert stat.S_IMODE(path.stat().st_mode) == mode
        assert path.read_bytes() == as_bytes(content)


@FEW
@given(mask=UMASKS, content=CONTENT)
def test_a_new_file_gets_the_usual_umask(mask: int, content: str | bytes) -> None:
    with scratch() as d, umask(mask):
        path = d / "new.json"
        write_atomically(path, content)
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask
        assert path.read_bytes() == as_bytes(content)
        assert sorted(p.name for p in d.iterdir()) == ["new.json"]  # no temporary left behind


@FEW
@given(content=CONTENT, relative=st.booleans(), mode=MODES)
def test_a_symlink_stays_a_symlink_and_its_target_gets_the_content(content: str | bytes, relative: bool,
                                                                   mode: int) -> None:
    with scratch() as d:
        (d / "real").mkdir()
        target = d / "real" / "manifest.yaml"
        target.write_text("old\n")
        target.chmod(mode)
        link = d / "link.yaml"
        link.symlink_to(Path("real/manifest.yaml") if relative else target)
        write_atomically(link, content)
        assert link.is_symlink()
        assert os.readlink(link) == str(Path("real/manifest.yaml") if relative else target)
        assert target.read_bytes() == as_bytes(content)
        assert stat.S_IMODE(target.stat().st_mode) == mode


@FEW
@given(olds=st.lists(st.text(max_size=40), min_size=1, max_size=5), new=st.text(max_size=40))
def test_a_set_whose_last_name_is_too_long_changes_nothing(olds: list[str], new: str) -> None:
    """A failure while the temporary files are written (here the last file's name is over the
    file system's limit) leaves every earlier target as it was, and no temporary file behind."""
    with scratch() as d:
        paths = [d / f"f{i}.yaml" for i in range(len(olds))]
        for path, old in zip(paths, olds, strict=True):
            path.write_bytes(old.encode("utf-8"))
        files: dict[Path, str | bytes] = {p: new + "!" for p in paths}
        files[d / ("x" * 300 + ".yaml")] = new
        with pytest.raises(OSError, match="too long"):
            write_all(files)
        assert [p.read_bytes().decode("utf-8") for p in paths] == olds
        assert sorted(p.name for p in d.iterdir()) == sorted(p.name for p in paths)


def test_a_set_whose_last_target_is_a_directory_changes_nothing(tmp_path: Path) -> None:
    paths = [tmp_path / f"f{i}.yaml" for i in range(3)]
    for path in paths:
        path.write_text("old\n")
    (tmp_path / "taken.yaml").mkdir()
    files: dict[Path, str | bytes] = {p: "new\n" for p in paths}
    files[tmp_path / "taken.yaml"] = "new\n"
    with pytest.raises(KqplanError, match="a directory is in the way"):
        write_all(files)
    assert [p.read_text() for p in paths] == ["old\n"] * 3
