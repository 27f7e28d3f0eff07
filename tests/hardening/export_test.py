"""export and import write a set of manifests: never another cluster's files, never a file name a
file system refuses (long, non-ASCII, path-unsafe user names), and all of them or none."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kqplan.config.model import ProjectConfig
from kqplan.core.entity import Entity
from kqplan.core.filenames import component_problem
from kqplan.core.state import QuotaState
from kqplan.files import NAME_MAX, TEMP_NAME_ROOM
from kqplan.manifest.compile import load_desired
from kqplan.manifest.export import SplitBy, export_source, exported_from, split_file
from kqplan.manifest.export import export as export_manifests
from kqplan.snapshot.file import write_snapshot
from tests.helpers import Result, run_cli, write_manifest


def files_of(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` (relative name → bytes): what a failed write must not change."""
    return {p.relative_to(directory).as_posix(): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def snapshot(path: Path, state: QuotaState, cluster_id: str) -> Path:
    write_snapshot(path, state, cluster_id)
    return path


def export(snap: Path, out: Path, *args: str) -> Result:
    return run_cli("export", "--state", snap, "--out", out, "--split-by", "user", *args)


# -- another cluster's export -----------------------------------------------------------------------

A = {Entity.user("alice"): {"producer_byte_rate": 1024.0},
     Entity.user("shared"): {"producer_byte_rate": 2048.0},
     Entity.user(None): {"consumer_byte_rate": 4096.0}}
B = {Entity.user("bob"): {"producer_byte_rate": 1024.0}, Entity.user("shared"): {"producer_byte_rate": 8.0}}


@pytest.mark.parametrize("force", [False, True])
def test_an_export_never_replaces_nor_removes_another_clusters_export(tmp_path, force):
    out = tmp_path / "manifests"
    assert export(snapshot(tmp_path / "a.json", A, "cluster-a"), out).exit_code == 0
    before = files_of(out)
    assert "users/alice.yaml" in before
    other = export(snapshot(tmp_path / "b.json", B, "cluster-b"), out, *(["--force"] if force else []))
    assert other.exit_code == 1
    assert "holds manifests exported from cluster cluster-a" in other.stderr
    assert "this export is of cluster cluster-b" in other.stderr
    assert "pass --force" not in other.stderr  # --force would not help: it never touches them
    assert "internal error" not in other.stderr
    assert files_of(out) == before


def test_a_clusters_own_stale_files_are_still_removed_with_force(tmp_path):
    out = tmp_path / "manifests"
    assert export(snapshot(tmp_path / "a.json", A, "cluster-a"), out).exit_code == 0
    # a file no export wrote, with the schema modeline (fleet rightsize writes such files): not stale
    mine = out / "users" / "proposed.yaml"
    mine.write_text("# yaml-language-server: $schema=https://kqplan.dev/schemas/manifest-v1.json\n"
                    "# Proposed by hand\napiVersion: kqplan/v1\nkind: ClientQuotas\nentities: []\n")
    smaller = snapshot(tmp_path / "a2.json", {e: q for e, q in A.items() if e != Entity.user("alice")},
                       "cluster-a")
    refused = export(smaller, out)
    assert refused.exit_code == 1
    assert "1 exported file(s) hold entities no longer on the cluster" in refused.stderr
    forced = export(smaller, out, "--force")
    assert forced.exit_code == 0, forced.stderr
    assert not (out / "users" / "alice.yaml").exists()
    assert mine.exists()


@pytest.mark.parametrize("cluster_id", ["4L6g3nShT-eMCtK--X86sw", "two\nlines", "'quoted'", "the cluster"])
def test_the_header_names_the_cluster_on_one_line_and_re_export_recognises_it(tmp_path, cluster_id):
    out = tmp_path / "m"
    snap = snapshot(tmp_path / "a.json", A, cluster_id)
    assert export(snap, out).exit_code == 0
    header = (out / "defaults.yaml").read_text().splitlines()[1]
    assert header.startswith("# Exported from cluster ")
    assert "\n" not in header
    smaller = snapshot(tmp_path / "a2.json", {e: q for e, q in A.items() if e != Entity.user("alice")},
                       cluster_id)
    forced = export(smaller, out, "--force")
    assert forced.exit_code == 0, forced.stderr
    assert not (out / "users" / "alice.yaml").exists()


@settings(max_examples=200, deadline=None)
@given(first=st.text(max_size=30), second=st.text(max_size=30))
def test_the_header_reads_back_as_the_cluster_it_names_and_no_two_ids_read_the_same(first, second):
    for cluster_id in (first, second):
        [document], _ = export_manifests({}, cluster_id)
        assert exported_from(document.text) == export_source(cluster_id)
        assert document.text.count("\n") == len(document.text.splitlines())  # one line each
    if first != second and first and second:
        assert export_source(first) != export_source(second)


# -- file names from user names ----------------------------------------------------------------------

_LETTERS = st.sampled_from(["a", "Z", "0", "_", ".", "-", "ü", "ß", "漢", "𝐀", "𠀀", "🚀", "👩‍👩‍👧", "/",
                            "\\", ":", "*", "?", "\t", "\n", " ", "\u202e", "\x7f", "'"])
_NAMES = st.one_of(
    st.lists(_LETTERS, min_size=1, max_size=12).map("".join),
    st.text(st.sampled_from(["𝐀", "𠀀", "🚀", "漢", "é", "a"]), min_size=50, max_size=120),
    st.builds(lambda base, n: base * n, st.sampled_from(["𝐀", "漢字", "ab", "🚀"]), st.integers(60, 140)),
    st.text(min_size=1, max_size=80).filter(lambda s: "\x00" not in s),
)


def _differing_only_in_unsafe(names: list[str]) -> list[str]:
    """For each name, siblings that differ only in characters a file name cannot hold."""
    return [name + tail for name in names[:2] for tail in ("/", "\\", ":", "?")]


def _fits(name: str) -> bool:
    return component_problem(name) is None and len(name.encode()) + TEMP_NAME_ROOM <= NAME_MAX


@example(users=["-rf", "a/b", "a_b", "a\\b", "a_b-" + "0" * 8])
@example(users=["𝐀" * 60, "𝐀" * 61, "🚀" * 70, "漢" * 90])
@settings(max_examples=10, deadline=None)
@given(users=st.lists(_NAMES, min_size=1, max_size=6, unique=True))
def test_user_names_become_file_names_that_fit_and_stay_apart(tmp_path_factory, users):
    users = sorted(set(users) | set(_differing_only_in_unsafe(users)))
    state = {Entity.user(u): {"producer_byte_rate": 1024.0 + i} for i, u in enumerate(users)}
    names = {u: split_file(Entity.user(u), SplitBy.USER) for u in users}
    assert len(set(names.values())) == len(users), names  # distinct users never share a file
    assert all(_fits(n.removeprefix("users/")) for n in names.values()), names
    root = tmp_path_factory.mktemp("names")
    snap = snapshot(root / "s.json", state, "c-1")
    out = root / "out"
    result = export(snap, out)
    assert result.exit_code == 0, result.stderr
    written = files_of(out)
    assert {f"{n}" for n in names.values()} <= set(written)
    assert all(_fits(Path(n).name) for n in written)
    assert load_desired([out], ProjectConfig()).quotas == state
    again = export(snap, out)  # stable: the same names and bytes, so nothing to refuse
    assert again.exit_code == 0, again.stderr
    assert files_of(out) == written
    imported = root / "imported"
    write_manifest(imported / "base.yaml", "entities: []\n")
    result = run_cli("import", imported, "--all-unmanaged", "--split-by", "user", "--state", snap)
    assert result.exit_code == 0, result.stderr
    assert {n for n in files_of(imported) if n.startswith("users/")} == \
        {n for n in names.values() if n.startswith("users/")}
    assert load_desired([imported], ProjectConfig()).quotas == state


# -- all or nothing -----------------------------------------------------------------------------------

BIG = {Entity.user_client("zzz", f"client-{i:05d}"): {"producer_byte_rate": 1024.0} for i in range(2000)}
SMALL = {Entity.user(None): {"producer_byte_rate": 1024.0}, Entity.user("alice"): {"producer_byte_rate": 1.0},
         Entity.client("app"): {"request_percentage": 10.0}}


def _limited(size: int) -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))


def _kqplan_limited(*args: str | Path, size: int) -> subprocess.CompletedProcess[str]:
    """kqplan in a process that may write no file over ``size`` bytes (EFBIG, as on a full disk;
    it binds root too, unlike permissions)."""
    exe = Path(sys.executable).with_name("kqplan")
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=120,
                          check=False, preexec_fn=lambda: _limited(size))


def test_export_that_fails_while_writing_leaves_the_previous_export_unchanged(tmp_path):
    out = tmp_path / "m"
    assert export(snapshot(tmp_path / "old.json", SMALL, "c-1"), out).exit_code == 0
    before = files_of(out)
    changed = {e: {k: v * 2 for k, v in q.items()} for e, q in SMALL.items()} | BIG
    snap = snapshot(tmp_path / "new.json", changed, "c-1")
    result = _kqplan_limited("export", "--state", snap, "--out", out, "--split-by", "user", "--force",
                             size=64 * 1024)
    assert result.returncode == 1
    assert "export could not write" in result.stderr
    assert "internal error" not in result.stderr
    assert files_of(out) == before  # nothing renamed, no temporary file left behind
    assert not (out / "users" / "zzz.yaml").exists()


def test_import_that_fails_while_writing_leaves_the_manifests_unchanged(tmp_path):
    manifests = tmp_path / "m"
    write_manifest(manifests / "q.yaml", "entities:\n  - user: alice\n    quotas: {producer_byte_rate: 5}\n")
    before = files_of(manifests)
    snap = snapshot(tmp_path / "new.json", SMALL | BIG, "c-1")
    result = _kqplan_limited("import", manifests, "--all-unmanaged", "--split-by", "user", "--state", snap,
                             size=64 * 1024)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "import could not write" in result.stderr
    assert "internal error" not in result.stderr
    assert files_of(manifests) == before


def test_a_directory_where_an_export_file_goes_is_refused_before_anything_is_written(tmp_path):
    out = tmp_path / "m"
    assert export(snapshot(tmp_path / "old.json", SMALL, "c-1"), out).exit_code == 0
    (out / "users" / "zzz.yaml").mkdir()
    before = files_of(out)
    changed = {e: {k: v * 2 for k, v in q.items()} for e, q in SMALL.items()} | \
        {Entity.user("zzz"): {"producer_byte_rate": 1.0}}
    result = export(snapshot(tmp_path / "new.json", changed, "c-1"), out, "--force")
    assert result.exit_code == 1
    assert f"export cannot write {out / 'users' / 'zzz.yaml'}: it is a directory" in result.stderr
    assert files_of(out) == before
    assert (out / "users" / "zzz.yaml").is_dir()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_a_read_only_directory_partway_leaves_the_previous_export_unchanged(tmp_path):
    out = tmp_path / "m"
    assert export(snapshot(tmp_path / "old.json", SMALL, "c-1"), out).exit_code == 0
    before = files_of(out)
    (out / "users").chmod(0o555)
    try:
        changed = {e: {k: v * 2 for k, v in q.items()} for e, q in SMALL.items()}
        result = export(snapshot(tmp_path / "new.json", changed, "c-1"), out, "--force")
        assert result.exit_code == 1
        assert "export could not write" in result.stderr
        assert files_of(out) == before
    finally:
        (out / "users").chmod(0o755)
