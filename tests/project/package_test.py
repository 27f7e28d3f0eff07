"""The package people install: wheel and sdist build; the wheel, built as docs/getting-started.md says,
installs into a fresh venv and runs; and every kqplan version the docs, examples and workflows
install or pin is the package's own (issue 43: kqplan is not on a package index, one version)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from kqplan import __version__
from tests.helpers import REPO


def run(*args: str | Path, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, check=False,
                          timeout=600)


@pytest.mark.slow
def test_wheel_and_sdist_build(tmp_path):
    built = run(sys.executable, "-m", "build", "--outdir", tmp_path / "dist", REPO)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    wheel = next((tmp_path / "dist").glob("kqplan-*.whl"))
    assert wheel.name == f"kqplan-{__version__}-py3-none-any.whl"  # the version comes from one place
    sdist = tmp_path / "dist" / f"kqplan-{__version__}.tar.gz"
    with tarfile.open(sdist) as tar:
        in_sdist = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    assert {"LICENSE", "CHANGELOG.md", "README.md", "action.yml", "schemas/plan-v1.json"} <= in_sdist
    assert not any(n.startswith((".venv/", ".git/")) for n in in_sdist)
    names = set(zipfile.ZipFile(wheel).namelist())
    assert f"kqplan-{__version__}.dist-info/licenses/LICENSE" in names
    assert {f"kqplan/schemas/{n}-v1.json" for n in ("manifest", "plan", "report", "errors")} <= names
    metadata = zipfile.ZipFile(wheel).read(f"kqplan-{__version__}.dist-info/METADATA").decode()
    assert "License-Expression: Apache-2.0" in metadata
    assert "Project-URL: Changelog" in metadata
    assert "Classifier: Typing :: Typed" in metadata
    fleet = {line.split(";")[0] for line in metadata.splitlines() if line.endswith("extra == 'fleet'")}
    assert fleet == {f"Requires-Dist: {r}" for r in ("duckdb>=1.2", "pyarrow>=14", "matplotlib>=3.8")}
    spark = {line.split(";")[0] for line in metadata.splitlines() if line.endswith("extra == 'spark'")}
    assert spark > fleet  # spark is kqplan[fleet] and pyspark (issue 43)


def _documented_wheel_route() -> str:
    """docs/getting-started.md's wheel route: its block with ``pip wheel``, but the clone."""
    text = (REPO / "docs" / "getting-started.md").read_text()
    install = text.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    block = next(b for b in re.findall(r"^```sh\n(.*?)^```", install, re.M | re.S) if "pip wheel" in b)
    lines = block.splitlines()
    assert lines[0].startswith("git clone --branch ")
    return "\n".join(lines[1:])


@pytest.mark.slow
def test_the_documented_wheel_route_installs_and_runs(tmp_path):
    """docs/getting-started.md's wheel route, run as written in a copy of the clone (the files git
    knows) with a fresh venv's python3 and pip first on PATH; then the wheel's kqplan runs outside it."""
    clone = tmp_path / "kqplan"
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (REPO / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, clone / name)
    venv = tmp_path / "venv"
    assert run(sys.executable, "-m", "venv", venv).returncode == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KQPLAN_", "VIRTUAL_ENV"))}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    routed = subprocess.run(["bash", "-eo", "pipefail", "-c", _documented_wheel_route()], cwd=clone,
                            env=env, capture_output=True, text=True, timeout=900, check=False,
                            stdin=subprocess.DEVNULL)
    assert routed.returncode == 0, routed.stdout[-3000:] + routed.stderr[-3000:]
    assert [p.name for p in (clone / "dist").iterdir()] == [f"kqplan-{__version__}-py3-none-any.whl"]

    version = run(venv / "bin" / "kqplan", "--version", cwd=tmp_path)
    assert version.stdout == f"kqplan {__version__}\n"
    assert run(venv / "bin" / "python", "-m", "kqplan", "-V", cwd=tmp_path).stdout == version.stdout
    plan = run(venv / "bin" / "kqplan", "plan", REPO / "examples" / "payments", "--sandbox",
               REPO / "examples" / "payments" / "snapshot.json", cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.endswith("Plan: 2 to add, 2 to change, 1 to delete.\n")
    schema = run(venv / "bin" / "kqplan", "schema", "report", cwd=tmp_path)
    assert schema.stdout == (REPO / "schemas" / "report-v1.json").read_text()


VERSION = r"(\d+(?:\.\d+)+(?:(?:a|b|rc|\.dev|\.post)\d+)?)"
KQPLAN_VERSIONS = [
    re.compile(rf"kqplan(?:\.git)?@v?{VERSION}"),  # the Action by tag, pip's git+https://…/kqplan@vX
    re.compile(rf"kqplan(?:\[[\w,]+\])?=={VERSION}"),  # a pin
    re.compile(rf"kqplan-{VERSION}(?:-py3|\.tar\.gz)"),  # a wheel or sdist's name
    re.compile(rf"kqplan/archive/refs/tags/v{VERSION}"),  # the tag's archive
    re.compile(rf"--branch v{VERSION} \S*kqplan"),  # a clone of the tag
    re.compile(rf"kqplan\S*\s+#?\s*rev:\s*v?{VERSION}"),  # pre-commit's repo and rev
    re.compile(rf"KQPLAN_VERSION:\s*[\"']?v?{VERSION}"),  # the GitLab example's variable
]


def _documents() -> list[Path]:
    """What users copy from: the docs, the examples, the README, the Action, the project's workflows
    and its pre-commit hooks."""
    found = [REPO / "README.md", REPO / "action.yml", REPO / ".pre-commit-hooks.yaml"]
    for folder in ("docs", "examples", ".github"):
        found += sorted(p for p in (REPO / folder).rglob("*") if p.is_file()
                        and p.suffix in {".md", ".yml", ".yaml", ".toml", ".txt", ".sh"})
    return found


def test_every_kqplan_version_in_the_docs_examples_and_workflows_is_the_package_s():
    found: dict[str, list[str]] = {}
    for path in _documents():
        text = path.read_text(encoding="utf-8")
        for pattern in KQPLAN_VERSIONS:
            for match in pattern.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                found.setdefault(match.group(1), []).append(f"{path.relative_to(REPO)}:{line}")
    # the patterns find what they are for: the Action by tag, a git install, the wheel, GitLab's variable
    everywhere = [where for places in found.values() for where in places]
    for where in ("examples/github/plan-on-pr.yml", "examples/github/rollout-on-merge.yml",
                  "examples/gitlab/.gitlab-ci.yml", "docs/getting-started.md", "docs/ci.md"):
        assert any(w.startswith(where + ":") for w in everywhere), (where, found)
    assert {v: w for v, w in found.items() if v != __version__} == {}


def test_the_changelog_s_newest_release_is_the_package_s_version():
    """The docs pin ``v{__version__}``: the CHANGELOG's newest release section is that version, and
    no section above it names another (an "Unreleased (0.3.0)" over a package still at 0.2.0 had
    the docs pin a release that lacked what they described)."""
    headings = re.findall(r"^## (.+)$", (REPO / "CHANGELOG.md").read_text(encoding="utf-8"), re.M)
    released = [h for h in headings if re.match(r"\d+\.\d+\.\d+\b", h)]
    assert released, "no release section in CHANGELOG.md"
    assert released[0].split()[0] == __version__, (released[0], __version__)
    above = headings[:headings.index(released[0])]
    assert all(h.startswith("Unreleased") and not re.search(r"\d+\.\d+", h) for h in above), above
