"""No dead code (issue 41): every top-level function, class and constant of the package is used
somewhere beyond its own definition — the package, the tests, the benchmarks, or the files that
name Python objects from outside (pyproject's entry points, the Action). A name that is only
defined is code nobody runs; the review of issue 41 found six (DEFAULT_SINCE twice, budget_keys,
describe_series' double, refuse_bucket, cluster_id_for)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUTSIDE = ("pyproject.toml", "action.yml")
"""Files that name Python objects of the package from outside it."""


def _sources() -> dict[Path, str]:
    found = {p: p.read_text() for d in ("kqplan", "tests", "benchmarks") for p in (REPO / d).rglob("*.py")
             if p != Path(__file__).resolve()}
    found.update((REPO / name, (REPO / name).read_text()) for name in OUTSIDE)
    return found


def _defined(tree: ast.Module) -> list[str]:
    names = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if not any(_registers(d) for d in node.decorator_list):
                names.append(node.name)
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            names.append(node.targets[0].id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return [n for n in names if not (n.startswith("__") and n.endswith("__"))]


def _registers(decorator: ast.expr) -> bool:
    """A decorator that registers what it decorates, which is then used by name nowhere: a CLI
    command or callback (``@app.command(...)``, ``@app.callback()``)."""
    call = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(call, ast.Attribute) and call.attr in ("command", "callback")


def unused_names(sources: dict[Path, str], package: Path) -> list[str]:
    """``module: name`` for every top-level name of ``package`` used nowhere but where it is defined."""
    unused = []
    for path in sorted(package.rglob("*.py")):
        for name in _defined(ast.parse(sources[path])):
            word = re.compile(rf"\b{re.escape(name)}\b")
            if len(word.findall(sources[path])) <= 1 and not any(
                    word.search(text) for other, text in sources.items() if other != path):
                unused.append(f"{path.relative_to(package.parent)}: {name}")
    return unused


def test_the_package_defines_nothing_unused() -> None:
    assert unused_names(_sources(), REPO / "kqplan") == []


def test_the_scan_finds_a_name_defined_and_never_used(tmp_path: Path) -> None:
    """The rule fails when it should: a function nobody calls (the issue's budget_keys), beside one
    called in its own module, one called from another module, and a dunder."""
    package = tmp_path / "pkg"
    package.mkdir()
    own, other = package / "m.py", package / "n.py"
    own.write_text("__all__ = []\n\n\ndef used():\n    pass\n\n\ndef budget_keys():\n    pass\n\n\n"
                   "def elsewhere():\n    pass\n\n\n@app.command()\ndef cmd():\n    pass\n\n\n"
                   "@dataclass\nclass Unused:\n    pass\n\n\nX = used()\n")
    other.write_text("from pkg.m import elsewhere\n\nelsewhere()\n")
    sources = {p: p.read_text() for p in (own, other)}
    assert unused_names(sources, package) == ["pkg/m.py: budget_keys", "pkg/m.py: Unused", "pkg/m.py: X"]
