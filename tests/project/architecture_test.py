"""The layout rules of docs/architecture.md, read from the code's own imports: every package
imports only what its row of the map allows, no import cycle, at most 12 modules loose in
kqplan/, no module over 500 lines, no function over 80, a docstring on every package."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import REPO

PACKAGE = REPO / "kqplan"

# docs/architecture.md, "The map": what each package (or loose module) may import of kqplan
# besides itself. `kqplan` is the top package's __init__ (the version string).
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "console": set(),
    "perf": set(),
    "deadline": set(),
    "http": set(),
    "wire": set(),
    "files": {"core"},
    "config": {"core", "files"},
    "planfile": {"core", "files"},
    "snapshot": {"core", "files"},
    "manifest": {"core", "config", "files", "perf"},
    "render": {"core", "planfile"},
    "apply": {"core", "console", "deadline"},
    "cluster": {"core", "snapshot", "files", "perf", "deadline", "http", "kqplan", "wire"},
    "sandbox": {"core", "snapshot", "files", "wire"},
    "metrics": {"core", "files", "deadline", "http"},
    "pipeline": {"core", "config", "manifest", "snapshot", "cluster", "sandbox", "files", "console",
                 "perf", "deadline"},
    "fleet": {"core", "config", "manifest", "snapshot", "pipeline", "files", "console", "deadline"},
    "commands": {"core", "config", "manifest", "snapshot", "planfile", "render", "apply", "cluster",
                 "sandbox", "metrics", "pipeline", "fleet", "files", "console", "perf", "deadline"},
    "cli": {"core", "config", "manifest", "snapshot", "planfile", "render", "apply", "cluster", "sandbox",
            "metrics", "pipeline", "fleet", "commands", "files", "console", "perf", "deadline", "kqplan"},
    "__main__": {"cli"},
    "kqplan": set(),
}


def modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


def home(module: str) -> str:
    """The package (or loose module) of ``kqplan``'s that ``module`` belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "kqplan"


def imports(path: Path) -> set[str]:
    """Every kqplan module ``path`` imports, anywhere in it (lazy and TYPE_CHECKING imports too);
    ``from kqplan.x import y`` names ``kqplan.x.y`` when that is a module."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "kqplan")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == "kqplan":
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in MODULES else node.module)
    return found


MODULES = dict(modules())


def graph() -> dict[str, set[str]]:
    return {name: {m for m in imports(path) if m in MODULES and m != name} for name, path in MODULES.items()}


def test_every_package_imports_only_what_the_map_allows():
    wrong = sorted(f"{name} imports {target}" for name, targets in graph().items() for target in targets
                   if home(target) != home(name) and home(target) not in ALLOWED[home(name)])
    assert wrong == []


def test_the_map_lists_every_package_and_loose_module():
    assert {home(name) for name in MODULES} == set(ALLOWED)


def test_no_import_cycle():
    edges = graph()
    # Tarjan's strongly connected components: a component of two or more modules is a cycle
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(edges[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for name in sorted(edges):
        if name not in index:
            visit(name)
    assert cycles == []


def test_no_cycle_between_packages():
    edges = {home(a): set() for a in MODULES}
    for name, targets in graph().items():
        edges[home(name)].update(home(t) for t in targets if home(t) != home(name))
    for start, targets in edges.items():
        seen, todo = set(), list(targets)
        while todo:
            node = todo.pop()
            assert node != start, f"{start} reaches itself through its imports"
            if node not in seen:
                seen.add(node)
                todo.extend(edges[node])


def test_at_most_12_modules_loose_in_kqplan():
    assert len(list(PACKAGE.glob("*.py"))) <= 12


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_over_500_lines_and_no_function_over_80(name):
    text = MODULES[name].read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 500
    long = [f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(ast.parse(text))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.end_lineno is not None and node.end_lineno - node.lineno + 1 > 80]
    assert long == []


@pytest.mark.parametrize("package", sorted(p.parent.relative_to(REPO).as_posix()
                                           for p in PACKAGE.rglob("__init__.py")))
def test_every_package_says_what_it_holds(package):
    assert ast.get_docstring(ast.parse((REPO / package / "__init__.py").read_text(encoding="utf-8")))


def test_the_checks_see_a_forbidden_import(tmp_path):
    """The reading above finds a lazy import, a TYPE_CHECKING one and a submodule named in a
    ``from`` import: a rule it could not see would pass whatever the code does."""
    probe = tmp_path / "probe.py"
    probe.write_text("from typing import TYPE_CHECKING\n"
                     "if TYPE_CHECKING:\n    from kqplan.cli import main\n"
                     "def f():\n    from kqplan.manifest import loader\n    import kqplan.render.text\n")
    assert imports(probe) == {"kqplan.cli.main", "kqplan.manifest.loader", "kqplan.render.text"}
    assert home("kqplan.cli.main") == "cli"
    assert "cli" not in ALLOWED["core"]
