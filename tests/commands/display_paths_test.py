"""Paths shown for layers from kqplan.toml are relative to the current directory (the repository
root in CI), as explicit paths are: plan text, the Markdown PR comment, JSON origins and
``validate --format github`` annotations (which attach to the diff only with such a path).
The config resolves layers against its own directory; they used to be shown absolute
(``/home/runner/work/…`` in every comment)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kqplan.sandbox import Sandbox, SandboxConfig
from tests.helpers import run_cli, write_manifest

BASE = "entities:\n  - user: shown-a\n    quotas: {producer_byte_rate: 1MiB}\n"
PROD = "entities:\n  - user: shown-a\n    override: true\n    quotas: {producer_byte_rate: 2MiB}\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A repository whose kqplan.toml names relative layers and a sandbox; the current directory
    is its root, as in CI."""
    with Sandbox.start(SandboxConfig(port=0)) as sandbox:
        write_manifest(tmp_path / "base" / "q.yaml", BASE)
        write_manifest(tmp_path / "overlays" / "prod" / "q.yaml", PROD)
        (tmp_path / "kqplan.toml").write_text(f'[clusters.prod]\nbootstrap-server = "{sandbox.bootstrap}"\n'
                                              'manifests = ["base", "overlays/prod"]\n')
        monkeypatch.chdir(tmp_path)
        yield tmp_path


ORIGIN = "overlays/prod/q.yaml:4:5 (overrides base/q.yaml:4:5)"


def test_plan_text_markdown_and_json_show_layers_relative_to_the_current_directory(project: Path):
    text = run_cli("plan", "--cluster", "prod")
    markdown = run_cli("plan", "--cluster", "prod", "--format", "markdown")
    as_json = run_cli("plan", "--cluster", "prod", "--format", "json")
    for result in (text, markdown, as_json):
        assert result.exit_code == 0, result.stderr
        assert str(project) not in result.stdout + result.stderr
    assert f"  + {{user=shown-a}}  # {ORIGIN}\n" in text.stdout
    assert f"— from `{ORIGIN}`" in markdown.stdout
    assert [c["origin"] for c in as_json.json["changes"]] == [ORIGIN]


def test_validate_annotations_and_diagnostics_name_the_file_from_the_repository_root(project: Path):
    write_manifest(project / "base" / "q.yaml", BASE.replace("producer_byte_rate", "producer_rate"))
    github = run_cli("validate", "--cluster", "prod", "--format", "github")
    text = run_cli("validate", "--cluster", "prod")
    assert (github.exit_code, text.exit_code) == (1, 1)
    # the entity's base entry is gone, so the overlay's override is an error of its own (KQP122)
    assert [line.split("::")[1] for line in github.stdout.splitlines()] == [
        "error title=kqplan KQP110,file=base/q.yaml,line=5,col=14",
        "error title=kqplan KQP122,file=overlays/prod/q.yaml,line=5,col=5"]
    assert text.stdout.startswith("base/q.yaml:5:14: error[KQP110] unknown quota key 'producer_rate'")
    assert str(project) not in github.stdout + github.stderr + text.stdout + text.stderr


def test_a_saved_plan_records_the_relative_origin(project: Path):
    saved = run_cli("plan", "--cluster", "prod", "--out", "plan.json")
    assert saved.exit_code == 0, saved.stderr
    assert str(project) not in (project / "plan.json").read_text()
    assert f'"origin": "{ORIGIN}"' in (project / "plan.json").read_text()


def test_from_a_subdirectory_paths_are_from_the_repository_root(project: Path,
                                                                monkeypatch: pytest.MonkeyPatch):
    """Issue 43: whatever the current directory, paths are shown from the repository root (here the
    directory of kqplan.toml): what GitHub attaches to the diff. Never ``../``."""
    monkeypatch.chdir(project / "overlays")
    result = run_cli("plan", "--cluster", "prod", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert [c["origin"] for c in result.json["changes"]] == [ORIGIN]
    write_manifest(project / "base" / "q.yaml", BASE.replace("producer_byte_rate", "producer_rate"))
    github = run_cli("validate", "--cluster", "prod", "--format", "github")
    assert github.stdout.splitlines()[0].split("::")[1] == \
        "error title=kqplan KQP110,file=base/q.yaml,line=5,col=14"


def test_from_outside_the_repository_paths_are_from_its_root(project: Path, tmp_path_factory,
                                                             monkeypatch: pytest.MonkeyPatch):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    monkeypatch.chdir(elsewhere)
    result = run_cli("--config", project / "kqplan.toml", "plan", "--cluster", "prod", "--format", "markdown")
    assert result.exit_code == 0, result.stderr
    assert f"— from `{ORIGIN}`" in result.stdout
    assert str(project) not in result.stdout


def test_the_git_work_tree_is_the_root_when_kqplan_toml_is_deeper(project: Path, monkeypatch):
    """kqplan.toml in a subfolder of a git repository: paths from the work tree's top."""
    import shutil
    import subprocess

    deeper = project / "quotas"
    deeper.mkdir()
    for name in ("base", "overlays", "kqplan.toml"):
        shutil.move(project / name, deeper / name)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    monkeypatch.chdir(deeper / "overlays" / "prod")
    result = run_cli("plan", "--cluster", "prod", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert [c["origin"] for c in result.json["changes"]] == [
        "quotas/overlays/prod/q.yaml:4:5 (overrides quotas/base/q.yaml:4:5)"]
    given = run_cli("plan", "../../base", "--cluster", "prod", "--format", "json")
    assert [c["origin"] for c in given.json["changes"]] == ["quotas/base/q.yaml:4:5"]


def test_explicit_paths_are_shown_from_the_root_too(project: Path):
    absolute = run_cli("plan", project / "base", "--cluster", "prod", "--format", "json")
    relative = run_cli("plan", "base", "--cluster", "prod", "--format", "json")
    assert [c["origin"] for c in absolute.json["changes"]] == ["base/q.yaml:4:5"]
    assert [c["origin"] for c in relative.json["changes"]] == ["base/q.yaml:4:5"]


def test_a_problem_located_on_kqplan_toml_is_shown_from_the_root_too(project: Path, tmp_path_factory,
                                                                      monkeypatch: pytest.MonkeyPatch):
    toml = project / "kqplan.toml"
    toml.write_text(toml.read_text() + '[policy]\nrequired-defaults = ["user"]\n')
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))
    result = run_cli("--config", toml, "validate", "--cluster", "prod")
    assert result.exit_code == 1
    assert result.stdout.startswith("kqplan.toml: error[KQP153] no manifest lists {user=<default>}"), \
        result.stdout


def test_a_deleted_current_directory_is_no_crash(tmp_path_factory, monkeypatch: pytest.MonkeyPatch):
    """The current directory removed under kqplan (a CI step's workspace cleaned): paths given
    absolute still work, shown as given."""
    from tests.helpers import REPO

    gone = tmp_path_factory.mktemp("gone")
    monkeypatch.chdir(gone)
    gone.rmdir()
    result = run_cli("validate", REPO / "examples" / "payments")
    assert (result.exit_code, result.stdout) == (0, "Valid: 6 entities in 2 file(s).\n"), result.stderr
    assert run_cli("--version").exit_code == 0


def test_a_new_command_in_the_same_process_forgets_the_last_ones_root(project: Path, tmp_path_factory,
                                                                      monkeypatch: pytest.MonkeyPatch):
    """The CLI's main resets the root (kqplan.files is not imported at start-up for it): a second
    in-process command that reads no kqplan.toml shows paths from its own directory's work tree,
    not from the first command's repository."""
    from kqplan.cli.main import main
    from kqplan.files import display_path

    assert run_cli("plan", "--cluster", "prod", "--format", "json").exit_code == 0  # root: project
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    monkeypatch.chdir(elsewhere)
    with pytest.raises(SystemExit):
        main(["--version"])
    assert display_path(elsewhere / "q.yaml") == "q.yaml"
