"""Every bad manifest exits 1 with a located, coded message and never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import REPO, run_cli, run_kqplan, write_manifest

BAD = REPO / "tests" / "manifest" / "bad"
EXPECTED = [line.split() for line in (BAD / "EXPECTED").read_text().splitlines() if line.strip()]


def test_corpus_is_big_and_fully_specified():
    files = sorted(p.name for p in BAD.glob("*.yaml"))
    assert len(files) >= 40
    assert sorted(name for name, _, _ in EXPECTED) == files


@pytest.mark.parametrize(("name", "code", "where"), EXPECTED, ids=[e[0] for e in EXPECTED])
def test_bad_manifest(name, code, where, monkeypatch):
    monkeypatch.chdir(REPO)
    path = f"tests/manifest/bad/{name}"
    result = run_cli("validate", path)
    assert result.exit_code == 1, result.stdout
    location = path if where == "0:0" else f"{path}:{where}"
    assert f"{location}: error[{code}] " in result.stdout
    assert "Traceback" not in result.stdout + result.stderr


def test_whole_corpus_in_a_subprocess_has_no_traceback():
    result = run_kqplan("validate", *sorted(BAD.glob("*.yaml")))
    assert result.exit_code == 1
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stdout.count("error[KQP") >= len(EXPECTED)
    assert result.stdout.rstrip().endswith("warning(s).")


def test_not_utf8(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"apiVersion: kqplan/v1\nkind: ClientQuotas\nentities:\n  - user: j\xf6rg\n")
    result = run_cli("validate", path)
    assert result.exit_code == 1
    assert f"{path}:4:12: error[KQP002] file is not valid UTF-8 (byte 0xf6)" in result.stdout


def test_utf8_bom_is_fine(tmp_path):
    path = tmp_path / "bom.yaml"
    path.write_bytes("\ufeffapiVersion: kqplan/v1\nkind: ClientQuotas\nentities:\n  - user: jörg\n"
                     "    quotas: {producer_byte_rate: 1}\n".encode())
    assert run_cli("validate", path).exit_code == 0


def test_empty_file(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("")
    result = run_cli("validate", path)
    assert result.exit_code == 1
    assert f"{path}: error[KQP003] manifest is empty" in result.stdout


def test_huge_file_is_refused_before_reading(tmp_path, monkeypatch):
    (tmp_path / "kqplan.toml").write_text("[limits]\nmax-file-mib = 1\n")
    big = write_manifest(tmp_path / "big.yaml", "entities:\n" + "#" * (2 * 1024 * 1024) + "\n")
    monkeypatch.chdir(tmp_path)
    result = run_cli("validate", big.name)
    assert result.exit_code == 1
    assert "big.yaml: error[KQP004] file is 2.0 MiB, over the 1 MiB limit" in result.stdout
    assert "max-file-mib" in result.stdout


def test_missing_path_and_empty_directory(tmp_path):
    (tmp_path / "empty").mkdir()
    result = run_cli("validate", tmp_path / "nope.yaml", tmp_path / "empty")
    assert result.exit_code == 1
    assert f"{tmp_path / 'nope.yaml'}: error[KQP008] no such file or directory" in result.stdout
    assert f"{tmp_path / 'empty'}: error[KQP008] directory contains no *.yaml" in result.stdout


def test_duplicate_entity_across_files_names_both_places(tmp_path):
    write_manifest(tmp_path / "a.yaml", "entities:\n  - user: alice\n    quotas: {producer_byte_rate: 1}\n")
    write_manifest(tmp_path / "sub" / "b.yml",
                   "entities:\n  - client-id: x\n    quotas: {producer_byte_rate: 1}\n"
                   "  - user: alice\n    quotas: {consumer_byte_rate: 2}\n")
    result = run_cli("validate", tmp_path)
    assert result.exit_code == 1
    assert result.stdout == (
        f"{tmp_path}/sub/b.yml:6:5: error[KQP102] entity {{user=alice}} is listed twice\n"
        f"  = note: first listed at {tmp_path}/a.yaml:4:5\n"
        "  = help: merge the two entries into one\n"
        "Found 1 error(s) and 0 warning(s).\n")


def test_duplicate_profile_and_conflicting_guards_across_files(tmp_path):
    write_manifest(tmp_path / "a.yaml", "cluster: one\nprofiles:\n  gold: {producer_byte_rate: 1}\n")
    write_manifest(tmp_path / "b.yaml", "cluster: two\nprofiles:\n  gold: {producer_byte_rate: 2}\n")
    out = run_cli("validate", tmp_path).stdout
    assert f"{tmp_path}/b.yaml:5:3: error[KQP121] profile 'gold' is defined twice" in out
    assert f"  = note: first defined at {tmp_path}/a.yaml:5:3" in out
    assert f"{tmp_path}/b.yaml:3:10: error[KQP140] cluster guard 'two' conflicts with 'one'" in out


def test_every_problem_in_a_file_is_reported(tmp_path):
    path = write_manifest(tmp_path / "many.yaml", (
        "entities:\n"
        "  - user: a\n    quotas: {producer_rate: 1}\n"
        "  - user: b\n    quotas: {consumer_byte_rate: 0}\n"
        "  - ip: 1.2.3.4\n    user: c\n    quotas: {connection_creation_rate: 1}\n"))
    result = run_cli("validate", path)
    codes = [line.split("[")[1].split("]")[0] for line in result.stdout.splitlines() if "error[" in line]
    assert codes == ["KQP110", "KQP112", "KQP103"]


@pytest.mark.parametrize("fmt", ["json", "github"])
def test_machine_formats_carry_the_location(fmt, monkeypatch):
    monkeypatch.chdir(REPO)
    result = run_cli("validate", "--format", fmt, "tests/manifest/bad/quota_key_typo.yaml")
    assert result.exit_code == 1
    if fmt == "json":
        [diag] = result.json
        assert diag["code"] == "KQP110"
        assert diag["filename"] == "tests/manifest/bad/quota_key_typo.yaml"
        assert diag["location"] == {"row": 6, "column": 7}
        assert diag["hint"] == "did you mean 'producer_byte_rate'?"
        assert diag["url"] == "https://kqplan.dev/diagnostics/KQP110/"
    else:
        assert result.stdout.strip() == (
            "::error title=kqplan KQP110,file=tests/manifest/bad/quota_key_typo.yaml,line=6,col=7::"
            "unknown quota key 'producer_rate' (help: did you mean 'producer_byte_rate'?) "
            "(see https://kqplan.dev/diagnostics/KQP110/)")


def test_paths_can_be_relative_to_anywhere(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_manifest(tmp_path / "m.yaml", "entities:\n  - user: a\n    quotas: {producer_byte_rate: 1}\n")
    assert run_cli("validate", "m.yaml").stdout == "Valid: 1 entities in 1 file(s).\n"
