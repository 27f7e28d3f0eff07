"""Extras that match the features (issue 43): the base install (`pip install -e .`) has no DuckDB,
pyarrow or pyspark, and every command that needs one names the extra that brings it — never a
traceback or "internal error" — through the one error boundary (kqplan/cli/boundary.py); the
`fleet` extra (DuckDB, pyarrow, matplotlib; no pyspark) runs the README's Observability example
verbatim. The README's main job and five-minute walkthrough need no extra: they run verbatim in the
base install. The install commands CI runs are the README's, and each CI job installs what
collecting its tests imports (test modules, conftests, their plugins and helpers).

The venv tests build a fresh venv (`python -m venv` + `pip install -e .`, packages from the pip cache
or PyPI) once per session, run the base-install checks in it, then install the fleet extra into it:
about 1 minute with a warm pip cache."""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.metadata
import json
import os
import re
import socket
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from kqplan.cli import boundary
from tests.helpers import REPO
from tests.metrics.server import serve, steady
from tests.project.walkthrough_test import (
    as_the_clone,
    assert_the_walkthrough_did_what_the_readme_says,
    run_walkthrough,
)

README = (REPO / "README.md").read_text(encoding="utf-8")
FLEET_INSTALL = ".venv/bin/pip install -e '.[fleet]'"  # as the README's Set up writes it


def _env(venv: Path) -> dict[str, str]:
    """The environment of a user whose shell finds the venv's ``kqplan`` first."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KQPLAN_", "VIRTUAL_ENV", "PYTHONPATH"))}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _run(venv: Path, args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=_env(venv), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, check=False)


def _pip(venv: Path, *args: str) -> None:
    done = _run(venv, [str(venv / "bin" / "pip"), "install", "--quiet", *args], cwd=REPO, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def _imports(venv: Path, module: str) -> bool:
    return _run(venv, [str(venv / "bin" / "python"), "-c", f"import {module}"], cwd=REPO).returncode == 0


@pytest.fixture(scope="session")
def base_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the base install from the clone (the README's first set-up command)."""
    venv = tmp_path_factory.mktemp("extras") / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True,
                          timeout=300, check=False)
    assert made.returncode == 0, made.stderr
    _pip(venv, "-e", ".")
    return venv


@pytest.fixture(scope="session")
def fleet_venv(base_venv: Path) -> Path:
    """The same venv after the README's fleet install (runs after the base-install tests, which
    check that it has not run: this module's order)."""
    assert f"`{FLEET_INSTALL}`" in README, "the README's Set up no longer names the fleet extra's install"
    _pip(base_venv, "-e", ".[fleet]")
    return base_venv


def observability_example() -> tuple[str, list[str]]:
    """The README's Observability example: its commands (``$ `` lines and the heredoc they open)
    as a bash script, and the lines it shows kqplan printing."""
    found = re.search(r"^## Observability\n.*?^```console\n(.*?)^```", README, re.M | re.S)
    assert found is not None, "README.md has no Observability example"
    commands, shown, heredoc = [], [], False
    for line in found.group(1).splitlines():
        if line.startswith("$ "):
            commands.append(line[2:])
            heredoc = "<<'EOF'" in line
        elif heredoc:
            commands.append(line)
            heredoc = line != "EOF"
        else:
            shown.append(line)
    return "\n".join(commands), [line for line in shown if line != "…"]


def _no_traceback(output: str) -> None:
    assert "Traceback" not in output
    assert "internal error" not in output
    assert "ModuleNotFoundError" not in output


# -- the base install: every command that needs an extra names it -------------------------------

@pytest.mark.slow
def test_the_readme_observability_example_names_the_fleet_extra_in_the_base_install(base_venv, tmp_path):
    assert not _imports(base_venv, "duckdb"), "the fleet extra is installed already: run in file order"
    script, _ = observability_example()
    done = _run(base_venv, ["bash", "-c", script], cwd=tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    _no_traceback(output)
    assert "pip install 'kqplan[fleet]'" in done.stderr, output


@pytest.mark.slow
def test_fleet_usage_without_pyarrow_names_the_fleet_extra(base_venv, tmp_path):
    assert not _imports(base_venv, "pyarrow"), "the fleet extra is installed already: run in file order"
    (tmp_path / "kqplan.toml").write_text('[clusters.prod]\nsnapshot = "prod.json"\n')
    with serve(steady({"user": "alice", "client_id": "a1"}, 1000.0)) as prometheus:
        done = _run(base_venv, ["kqplan", "fleet", "usage", "--prometheus", prometheus.url, "--since", "2m",
                                "--out", "out"], cwd=tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    _no_traceback(output)
    assert "'pyarrow'" in done.stderr, output
    assert "pip install 'kqplan[fleet]'" in done.stderr, output
    assert not (tmp_path / "out" / "prod.parquet").exists()


def _free_ports() -> tuple[int, int]:
    """Two ports free now: tests/project/walkthrough_test.py may hold the README's at the same time."""
    with socket.socket() as one, socket.socket() as two:
        one.bind(("127.0.0.1", 0))
        two.bind(("127.0.0.1", 0))
        return one.getsockname()[1], two.getsockname()[1]


def readme_first_set_up() -> tuple[list[str], str]:
    """The README's first set-up command: its install (the commands before the ``kqplan`` one) and
    its main job (from the first ``.venv/bin/kqplan`` on)."""
    block = _setup_blocks(README.split("## Set up", 1)[1].split("\n## ", 1)[0])[0]
    commands = block.split(" && ")
    first = next(i for i, command in enumerate(commands) if command.startswith(".venv/bin/kqplan "))
    return commands[:first], " && ".join(commands[first:])


@pytest.mark.slow
def test_the_readme_s_main_job_and_walkthrough_run_verbatim_in_the_base_install(base_venv, tmp_path):
    """After the README's first set-up command and nothing else (``base_venv`` is that install, the
    venv made by this interpreter rather than ``python3``): its main job as written, then the
    five-minute walkthrough (tests/project/walkthrough_test.py's, but on free ports), from a
    directory laid out as the clone with that venv as its ``.venv``. A step that needs an extra
    fails here, where the dev venv (every extra) would not notice."""
    install, main_job = readme_first_set_up()
    assert install == ["python3 -m venv .venv", ".venv/bin/pip install -e ."], (
        "the README's install is no longer what base_venv builds", install)
    assert not _imports(base_venv, "duckdb"), "the fleet extra is installed already: run in file order"
    clone = as_the_clone(tmp_path / "clone", base_venv)
    done = _run(base_venv, ["bash", "-e", "-c", main_job], cwd=clone)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    _no_traceback(output)
    assert "\nPlan: " in done.stdout, output
    out = run_walkthrough(clone, _env(base_venv), _free_ports())
    _no_traceback(out)
    assert_the_walkthrough_did_what_the_readme_says(out, clone)


# -- the fleet extra: no pyspark, and the README's example runs verbatim --------------------------

@pytest.mark.slow
def test_the_fleet_extra_runs_the_readme_observability_example_verbatim(fleet_venv, tmp_path):
    assert not _imports(fleet_venv, "pyspark"), "the fleet extra must not bring pyspark (491 MB)"
    assert _imports(fleet_venv, "duckdb, pyarrow.parquet, matplotlib")
    script, shown = observability_example()
    done = _run(fleet_venv, ["bash", "-c", script], cwd=tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output  # --fail-on-throttle: the buckets are new
    printed = output.splitlines()
    assert shown, "the README shows no output"
    for line in shown:
        assert line in printed, (line, output)


@pytest.mark.slow
def test_fleet_usage_writes_parquet_with_the_fleet_extra(fleet_venv, tmp_path):
    (tmp_path / "kqplan.toml").write_text('[clusters.prod]\nsnapshot = "prod.json"\n')
    with serve(steady({"user": "alice", "client_id": "a1"}, 1000.0)) as prometheus:
        done = _run(fleet_venv, ["kqplan", "fleet", "usage", "--prometheus", prometheus.url, "--since", "2m",
                                 "--out", "out"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "out" / "prod.parquet").stat().st_size > 0


# -- the one boundary ------------------------------------------------------------------------------

@pytest.mark.parametrize(("module", "extra"), sorted(boundary.EXTRAS.items()))
def test_a_missing_optional_module_is_an_error_naming_its_extra(monkeypatch, capsys, module, extra):
    monkeypatch.setitem(sys.modules, module, None)  # as if its extra were not installed
    assert boundary.run(lambda: bool(importlib.import_module(module))) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"Error: this command needs the Python module '{module}', which is not installed")
    assert f"= help: pip install 'kqplan[{extra}]'" in err
    _no_traceback(err)
    assert boundary.run(lambda: bool(importlib.import_module(module)), json_errors=True) == 1
    error = json.loads(capsys.readouterr().err)["error"]
    assert error["hint"].startswith(f"pip install 'kqplan[{extra}]'")


def test_a_missing_module_of_kqplan_itself_is_still_a_bug(capsys):
    assert boundary.run(lambda: bool(importlib.import_module("kqplan.no_such_module"))) == 1
    assert "internal error: ModuleNotFoundError" in capsys.readouterr().err


class _Unsayable(Exception):
    """An error whose text cannot be read, as a Py4JJavaError's whose JVM has exited."""

    def __str__(self) -> str:
        raise ConnectionRefusedError(111, "Connection refused")


def _raise_unsayable() -> int:
    raise _Unsayable


def test_a_bug_whose_text_cannot_be_read_is_still_said_without_a_traceback(capsys):
    assert boundary.run(_raise_unsayable) == 1
    err = capsys.readouterr().err
    assert err.startswith("kqplan: internal error: _Unsayable: \n"), err
    assert "Traceback" not in err


def test_every_extra_the_boundary_names_exists_and_spark_brings_fleet():
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(boundary.EXTRAS.values()) <= set(extras)
    assert "kqplan[fleet]" in extras["spark"]
    assert not any(r.startswith("pyspark") for r in extras["fleet"])


# -- CI installs what the README says and what its tests import -------------------------------------

def _setup_blocks(text: str) -> list[str]:
    return re.findall(r"^```sh\n(.*?)\n```", text, re.M | re.S)


def test_ci_run_is_the_readme_s_test_command_and_uses_sudo_only_when_not_root():
    readme = _setup_blocks(README.split("## Set up", 1)[1].split("\n## ", 1)[0])
    assert len(readme) == 2, readme
    command = (REPO / ".ci" / "run").read_text().rstrip("\n").splitlines()[-1]
    assert command == readme[1]
    getting_started = (REPO / "docs" / "getting-started.md").read_text()
    assert _setup_blocks(getting_started)[:2] == readme
    # GitHub's runner is not root (apt-get needs sudo there); CI here is root, without sudo
    assert command.startswith('SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo; ')
    with_sudo = re.findall(r"\$SUDO (?:env DEBIAN_FRONTEND=\S+ )?apt-get", command)
    assert command.count("apt-get") == len(with_sudo) == 2


def _jobs() -> dict[str, dict[str, object]]:
    return yaml.safe_load((REPO / ".github" / "workflows" / "ci.yml").read_text())["jobs"]


def _extras_closure(names: set[str]) -> set[str]:
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    found, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name not in found:
            found.add(name)
            for requirement in declared[name]:  # a self-reference: "kqplan[fleet]"
                listed = re.match(r"kqplan\[([\w,]+)\]", requirement)
                todo += listed.group(1).split(",") if listed else []
    return found


PYTHON_FILES = ("test_*.py", "*_test.py")  # pytest's default python_files: pyproject.toml sets none


def _module_name(path: Path, root: Path) -> list[str]:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


@functools.cache
def _files_of(dotted: str, root: Path) -> list[Path] | None:
    """The files of the repository at ``root`` that importing ``dotted`` runs (its packages'
    ``__init__.py`` and its own file), or None for a module from elsewhere (the standard library,
    a distribution)."""
    parts = dotted.split(".")
    if not ((root / parts[0] / "__init__.py").is_file() or (root / f"{parts[0]}.py").is_file()):
        return None
    files, here = [], root
    for part in parts:
        here = here / part
        if (here / "__init__.py").is_file():
            files.append(here / "__init__.py")
        elif here.with_suffix(".py").is_file():
            files.append(here.with_suffix(".py"))
            break
        elif not here.is_dir():  # a name the package defines, not a module
            break
    return files


def _run_on_import(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements that run when a module is imported: at its top and in its ``if``
    (not ``if TYPE_CHECKING:``), ``with`` and class bodies, and in a ``try`` unless it catches the
    import's failure (an optional module); not in functions."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            if "TYPE_CHECKING" not in ast.unparse(node.test):
                yield from _run_on_import(node.body)
            yield from _run_on_import(node.orelse)
        elif isinstance(node, ast.Try | ast.TryStar):
            caught = [ast.unparse(h.type) if h.type else "BaseException" for h in node.handlers]
            if not any(re.search(r"\b(ImportError|ModuleNotFoundError|Exception|BaseException)\b", c)
                       for c in caught):
                yield from _run_on_import(node.body)
            for handler in node.handlers:
                yield from _run_on_import(handler.body)
            yield from _run_on_import(node.orelse + node.finalbody)
        elif isinstance(node, ast.With | ast.ClassDef):
            yield from _run_on_import(node.body)


@functools.cache
def _collected_imports(root: Path) -> tuple[dict[str, set[str]], set[str]]:
    """What collecting ``root/tests`` imports from outside the repository — pytest imports every test
    module and conftest.py whatever ``-m`` then selects, the plugins a conftest names
    (``pytest_plugins``), and every module of the repository they import at their top (helpers,
    fixtures, ``kqplan``, ``benchmarks``), followed: each top-level module, with the files importing
    it; and the repository's files collection imports."""
    tests = root / "tests"
    todo = [path for pattern in (*PYTHON_FILES, "conftest.py") for path in tests.rglob(pattern)]
    seen: set[Path] = set()
    found: dict[str, set[str]] = {}
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        name = _module_name(path, root)
        package = name if path.name == "__init__.py" else name[:-1]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = [".".join(name)]  # and so its packages' __init__.py
        for node in _run_on_import(tree.body):
            if isinstance(node, ast.Import):
                imported += [alias.name for alias in node.names]
                continue
            base = node.module or ""
            if node.level:
                base = ".".join([*package[:len(package) - node.level + 1], *filter(None, [node.module])])
            imported += [base, *(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")]
        for statement in tree.body:  # pytest_plugins = ["tests.kafka.plugin", ...]
            if isinstance(statement, ast.Assign) and "pytest_plugins" in map(ast.unparse, statement.targets):
                imported += [p.value for p in ast.walk(statement.value)
                             if isinstance(p, ast.Constant) and isinstance(p.value, str)]
        for module in imported:
            files = _files_of(module, root)
            if files is not None:
                todo += files
            elif module.partition(".")[0] not in sys.stdlib_module_names:
                found.setdefault(module.partition(".")[0], set()).add(str(path.relative_to(root)))
    return found, {str(path.relative_to(root)) for path in seen}


def _distributions(requirements: list[str]) -> set[str]:
    """The distributions (canonical names) pip installs for ``requirements``: their dependencies
    followed, with the extras asked of them, as this venv's metadata says (the dev venv: every extra)."""
    found: set[str] = set()
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [Requirement(text) for text in requirements]
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        if (name, frozenset(requirement.extras)) in seen:
            continue
        seen.add((name, frozenset(requirement.extras)))
        found.add(name)
        try:
            requires = importlib.metadata.distribution(name).requires or []
        except importlib.metadata.PackageNotFoundError:
            continue  # not for this platform
        for text in requires:
            inner = Requirement(text)
            if inner.marker is None or any(inner.marker.evaluate({"extra": extra})
                                           for extra in ("", *requirement.extras)):
                todo.append(inner)
    return found


def _installed_with(extras: set[str]) -> set[str]:
    """The distributions ``pip install -e '.[EXTRAS]'`` installs."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = project["optional-dependencies"]
    return _distributions([*project["dependencies"],
                           *(text for extra in _extras_closure(extras) for text in declared[extra]
                             if canonicalize_name(Requirement(text).name) != "kqplan")])


def test_collection_imports_are_found_in_helpers_plugins_and_packages_not_in_functions(tmp_path):
    """The reading of what collection imports, on a probe tree: a helper a test imports (relatively
    too), a conftest's plugin and a package's ``__init__.py`` count; a TYPE_CHECKING import, an
    optional one (``except ImportError``), one in a function and a module nothing imports do not."""
    files = {
        "tests/__init__.py": "",
        "tests/conftest.py": 'pytest_plugins = ["tests.plug"]\n',
        "tests/plug.py": "import pyspark.sql\n",
        "tests/helper.py": ("from typing import TYPE_CHECKING\nimport pyarrow.parquet as pq\n"
                            "if TYPE_CHECKING:\n    import duckdb\n"
                            "try:\n    import gssapi\nexcept ImportError:\n    gssapi = None\n"
                            "def later():\n    import matplotlib\n"),
        "tests/sub/__init__.py": "import yaml\n",
        "tests/sub/a_test.py": "from .. import helper\nfrom tests.sub import b\n",
        "tests/sub/b.py": "import jks\n",
        "tests/unused.py": "import deepdiff\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    found, read = _collected_imports(tmp_path)
    assert found == {"pyspark": {"tests/plug.py"}, "pyarrow": {"tests/helper.py"},
                     "yaml": {"tests/sub/__init__.py"}, "jks": {"tests/sub/b.py"}}
    assert "tests/unused.py" not in read
    # in the repository: the helpers, the broker's plugin and oracle, kqplan's and benchmarks' modules
    _, read = _collected_imports(REPO)
    assert {"tests/helpers.py", "tests/kafka/plugin.py", "tests/kafka/oracle.py", "tests/metrics/server.py",
            "kqplan/cli/boundary.py", "benchmarks/generate.py"} <= read


def test_the_external_kafka_job_installs_what_collecting_the_tests_imports():
    """pytest imports every test module, conftest.py and the modules they import before ``-m
    real_kafka`` selects: each module from a distribution that collection imports (from any of
    those files) must be one the job's ``pip install -e '.[EXTRAS]'`` brings, directly or as a
    dependency; a missing one is named with its file, its distribution and the extras that bring it."""
    steps = _jobs()["external-kafka"]["steps"]
    install = next(s["run"] for s in steps if "pip install" in s.get("run", ""))
    found = re.search(r"pip install -e '\.\[([\w,]+)\]'", install)
    assert found is not None, install
    asked = set(found.group(1).split(","))
    installed = _installed_with(asked)
    assert "spark" not in _extras_closure(asked)  # no real_kafka test needs pyspark (491 MB)
    assert "pyspark" not in installed
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    providers = importlib.metadata.packages_distributions()
    imported, _ = _collected_imports(REPO)
    assert {"pytest", "yaml", "pyarrow"} <= set(imported)  # the reading finds them
    missing = []
    for module, paths in sorted(imported.items()):
        distributions = {canonicalize_name(d) for d in providers.get(module, [])}
        if distributions & installed:
            continue
        extras = sorted(e for e in declared if distributions & _installed_with({e}))
        for path in sorted(paths):
            missing.append(f"{path}: {module} (distribution {', '.join(sorted(distributions)) or '?'}; "
                           f"extra {', '.join(extras) or 'none'})")
    assert missing == []


def test_the_jobs_time_limits_leave_headroom():
    jobs = _jobs()
    assert jobs["test"]["timeout-minutes"] >= 60  # the suite: ~40 min on 2 cores (issue 43)
    assert jobs["external-kafka"]["timeout-minutes"] >= 45
    assert any(s.get("run") == ".ci/run" for s in jobs["test"]["steps"])


# -- the GitHub Action installs the extra its inputs need -------------------------------------------

def _action_install(tmp_path: Path, **inputs: str) -> list[str]:
    """The action's "Install kqplan" step, in bash as the runner runs it, with ``python`` and
    ``kqplan`` on PATH replaced by scripts that record their arguments: what it asks pip for."""
    action = yaml.safe_load((REPO / "action.yml").read_text())
    step = next(s for s in action["runs"]["steps"] if s.get("name") == "Install kqplan")
    values = {name: spec.get("default", "") for name, spec in action["inputs"].items()} | inputs
    shims = tmp_path / "shims"
    shims.mkdir()
    for name in ("python", "kqplan"):
        (shims / name).write_text(f'#!/bin/sh\necho "{name} $*" >> "{tmp_path / "asked"}"\n')
        (shims / name).chmod(0o755)
    env = {"PATH": f"{shims}{os.pathsep}{os.environ['PATH']}"}
    for name, expr in step["env"].items():
        found = re.fullmatch(r"\$\{\{ (?:inputs\.([a-z-]+)|github\.action_path) \}\}", expr)
        assert found is not None, expr
        env[name] = values[found[1]] if found[1] else str(REPO)
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return (tmp_path / "asked").read_text().splitlines()


@pytest.mark.parametrize(("inputs", "requirement"), [
    ({}, f"{REPO}"),
    ({"usage": "usage/prod.parquet"}, f"{REPO}[fleet]"),
    ({"source": "git+https://github.com/o/kqplan@v1"}, "kqplan @ git+https://github.com/o/kqplan@v1"),
    ({"source": "git+https://github.com/o/kqplan@v1", "usage": "usage"},
     "kqplan[fleet] @ git+https://github.com/o/kqplan@v1"),
    ({"source": "dist/kqplan-1-py3-none-any.whl", "usage": "usage"}, "dist/kqplan-1-py3-none-any.whl[fleet]"),
    ({"source": "https://example.com/kqplan-1-py3-none-any.whl", "usage": "usage"},
     "kqplan[fleet] @ https://example.com/kqplan-1-py3-none-any.whl"),
])
def test_the_action_installs_the_fleet_extra_when_it_is_given_usage(tmp_path, inputs, requirement):
    assert _action_install(tmp_path, **inputs) == [f"python -m pip install --quiet {requirement}",
                                                   "kqplan --version"]


@pytest.mark.parametrize(("source", "said"), [
    ("kqplan", "never a name from a package index"), ("kqplan==0.3.0", "never a name from a package index"),
    ("kqplan>=0.3", "never a name from a package index"), ("http://example.com/k.whl", "https only"),
    ("git+http://example.com/kqplan@v1", "https only")])
def test_the_action_never_installs_kqplan_from_a_package_index(tmp_path, source, said):
    """A bare name or version would be looked up on PyPI, where kqplan is not: whoever registered
    the name would run in a job holding the cluster's credentials; a plain-http source could be
    swapped on the way."""
    with pytest.raises(AssertionError, match=said):
        _action_install(tmp_path, source=source)
