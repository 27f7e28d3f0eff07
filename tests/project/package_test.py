"""The package people install: wheel and sdist build, the wheel installs into a fresh venv and runs."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from kqplan import __version__
from tests.helpers import REPO

pytestmark = pytest.mark.slow


def run(*args: str | Path, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, check=False,
                          timeout=600)


def test_wheel_and_sdist_build_install_and_run(tmp_path):
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

    venv = tmp_path / "venv"
    assert run(sys.executable, "-m", "venv", venv).returncode == 0
    installed = run(venv / "bin" / "pip", "install", "--quiet", wheel)
    assert installed.returncode == 0, installed.stderr[-3000:]
    version = run(venv / "bin" / "kqplan", "--version", cwd=tmp_path)
    assert version.stdout == f"kqplan {__version__}\n"
    assert run(venv / "bin" / "python", "-m", "kqplan", "-V", cwd=tmp_path).stdout == version.stdout
    plan = run(venv / "bin" / "kqplan", "plan", REPO / "examples" / "payments", "--sandbox",
               REPO / "examples" / "payments" / "snapshot.json", cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.endswith("Plan: 2 to add, 2 to change, 1 to delete.\n")
    schema = run(venv / "bin" / "kqplan", "schema", "report", cwd=tmp_path)
    assert schema.stdout == (REPO / "schemas" / "report-v1.json").read_text()
