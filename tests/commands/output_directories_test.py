"""An output file whose directory does not exist yet is written there, the directories created as
``mkdir -p`` would (``terraform plan -out`` does the same): ``plan --out``, ``export --format json
--out``, ``apply --report``, every file :func:`kqplan.files.write_all` writes. They used to be
refused ("directory new/dir does not exist … create it first"). Nothing is created by the check
made before the work, so a command that fails before its output leaves no directory behind; every
other refusal of an output path stays."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from kqplan.core.entity import Entity
from kqplan.core.errors import KqplanError
from kqplan.files import _umask, check_writable, write_all, write_atomically
from kqplan.snapshot.file import write_snapshot
from tests.helpers import Result, run_cli, write_manifest

STATE = {Entity.user("alice"): {"producer_byte_rate": 1024.0}}
BOB = "entities:\n  - user: bob\n    quotas: {producer_byte_rate: 1KiB}\n"


def seed(root: Path, body: str = BOB) -> tuple[Path, Path]:
    """A snapshot (the cluster ``c-1`` with alice) and a manifest (adding bob)."""
    snap = root / "s.json"
    write_snapshot(snap, STATE, "c-1")
    return snap, write_manifest(root / "m" / "q.yaml", body)


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result.stdout + result.stderr
    return result


def listing(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


# -- the commands -----------------------------------------------------------------------------------

def test_plan_out_creates_the_missing_directories(tmp_path, monkeypatch):
    snap, manifest = seed(tmp_path)
    monkeypatch.chdir(tmp_path)
    ok(run_cli("plan", manifest, "--sandbox", snap, "--out", Path("new/dir/p.json")))
    saved = json.loads((tmp_path / "new" / "dir" / "p.json").read_text())
    assert [c["display"] for c in saved["changes"]] == ["{user=bob}"]
    for made in (tmp_path / "new", tmp_path / "new" / "dir"):  # as mkdir -p makes them
        assert stat.S_IMODE(made.stat().st_mode) == 0o777 & ~_umask()
    ok(run_cli("apply", "--plan", tmp_path / "new" / "dir" / "p.json", "--sandbox", snap, "--auto-approve"))


def test_export_json_out_creates_the_missing_directories(tmp_path):
    snap, _ = seed(tmp_path)
    out = tmp_path / "nd2" / "b" / "s.json"
    result = ok(run_cli("export", "--state", snap, "--format", "json", "--out", out))
    assert json.loads(out.read_text())["cluster_id"] == "c-1"
    assert "Wrote a snapshot of 1 entities to" in result.stderr


def test_apply_report_creates_the_missing_directories(tmp_path):
    snap, manifest = seed(tmp_path)
    report = tmp_path / "reports" / "prod" / "r.json"
    ok(run_cli("apply", manifest, "--sandbox", snap, "--auto-approve", "--report", report))
    assert json.loads(report.read_text())["ok"] is True


def test_a_plan_that_fails_before_its_output_creates_no_directory(tmp_path):
    snap, manifest = seed(tmp_path, "entities:\n  - user: bob\n    quotas: {producer_byte_rate: lots}\n")
    before = listing(tmp_path)
    result = run_cli("plan", manifest, "--sandbox", snap, "--out", tmp_path / "new" / "dir" / "p.json")
    assert result.exit_code == 1, result.stdout + result.stderr
    assert listing(tmp_path) == before


def test_a_plan_out_under_a_file_is_still_refused_before_the_plan(tmp_path):
    snap, manifest = seed(tmp_path)
    (tmp_path / "afile").write_text("x")
    before = listing(tmp_path)
    out = tmp_path / "afile" / "new" / "p.json"
    result = run_cli("plan", manifest, "--sandbox", snap, "--out", out)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: cannot write the plan file {out}: a part of its directory is "
                                    "not a directory"), result.stderr
    assert "Plan:" not in result.stdout
    assert listing(tmp_path) == before


# -- the check and the writer -----------------------------------------------------------------------

def refusal(path: Path) -> str:
    with pytest.raises(KqplanError) as refused:
        check_writable(path, "the report")
    return refused.value.message


def test_the_check_accepts_missing_directories_and_creates_nothing(tmp_path):
    before = listing(tmp_path)
    check_writable(tmp_path / "a" / "b" / "c" / "r.json", "the report")
    assert listing(tmp_path) == before


def test_the_other_refusals_stay(tmp_path):
    (tmp_path / "afile").write_text("x")
    assert refusal(tmp_path / "afile" / "r.json").endswith("a part of its directory is not a directory")
    assert refusal(tmp_path / "afile" / "a" / "r.json").endswith("a part of its directory is not a directory")
    (tmp_path / "loop").symlink_to("loop")
    assert "is a symbolic link that loops" in refusal(tmp_path / "loop" / "a" / "r.json")
    (tmp_path / "dangling").symlink_to("nowhere")
    assert refusal(tmp_path / "dangling" / "a" / "r.json").endswith(
        f"{tmp_path / 'dangling'} is a symbolic link to a directory that does not exist")
    assert refusal(tmp_path / ("é" * 128) / "r.json").endswith("a directory name in it is over 255 bytes")
    assert refusal(tmp_path / "a" / ("é" * 128 + ".json")).endswith("the file name is over 255 bytes")
    (tmp_path / "adir").mkdir()
    assert refusal(tmp_path / "adir").endswith("it is a directory")
    link = tmp_path / "dl"  # a symbolic link's directory is not made: it is where the link points
    link.symlink_to(Path("nodir") / "p.json")
    assert f"directory {tmp_path / 'nodir'} does not exist" in refusal(link)
    with pytest.raises(KqplanError):
        write_atomically(link, "{}\n")
    assert not (tmp_path / "nodir").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_a_missing_directory_under_a_read_only_one_is_refused(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        assert refusal(locked / "a" / "r.json").endswith(f"directory {locked} is not writable")
    finally:
        locked.chmod(0o700)


def test_a_set_that_fails_removes_the_directories_it_created(tmp_path):
    (tmp_path / "afile").write_text("x")
    before = listing(tmp_path)
    with pytest.raises(KqplanError, match="afile is not a directory"):
        write_all({tmp_path / "new" / "a" / "f.json": "{}", tmp_path / "afile" / "b" / "g.json": "{}"})
    assert listing(tmp_path) == before


def test_a_set_is_written_into_the_directories_it_creates(tmp_path):
    (tmp_path / "old").mkdir()
    write_all({tmp_path / "new" / "a" / "f.json": "{}", tmp_path / "new" / "b" / "g.json": "[]",
               tmp_path / "old" / "h.json": "1"})
    assert listing(tmp_path) == {"old", "old/h.json", "new", "new/a", "new/a/f.json", "new/b", "new/b/g.json"}
