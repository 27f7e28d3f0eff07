"""Install routes that exist (issue 43 §6): kqplan is not on a package index, so nothing a user copies
from — the README, docs/, examples/, action.yml — installs or runs it by name from one: no ``pip
install kqplan``, ``pip install kqplan==X``, ``pipx install kqplan``, ``uv tool install kqplan``,
``uvx kqplan``. The routes that work name where kqplan comes from: a path (the clone, a wheel), a
URL (the tag's archive), ``git+…@TAG``, a ``kqplan[EXTRA] @ URL`` direct reference, or
``--find-links``/``--index-url``. ``pip install 'kqplan[EXTRA]'`` without a version stays: it adds
an extra to the kqplan already installed (pip takes kqplan from what is installed)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.helpers import REPO

COMMAND = re.compile(
    r"(?P<tool>\bpipx\s+install|\buv\s+tool\s+install|\brunpip\s+\S+\s+install|\bpip3?\s+install"
    r"|\bpipx\s+run|\buv\s+tool\s+run|\buvx)\b(?P<args>[^\n`]*)")
"""An installer (pip in any form: ``python -m pip``, ``uv pip``, ``pipx runpip NAME``; pipx, uv's
tools) or a runner that installs (``pipx run``, ``uvx``), and what follows it on the line."""
NAMED = re.compile(r"kqplan(?![\w.-])", re.I)
"""A requirement that starts with the name (PEP 508: a name then extras, a version or ``@ URL``)."""
ADDS_AN_EXTRA = re.compile(r"kqplan\[[\w,\s-]+\]", re.I)
SOURCES = ("-f", "--find-links", "-i", "--index-url", "--spec", "--from")
"""Options that say where a package by name comes from (``pipx run --spec``, ``uvx --from``)."""
WITH_A_VALUE = {*SOURCES, "-r", "--requirement", "-c", "--constraint", "--extra-index-url", "-t", "--target",
                "--prefix", "--root", "--python", "--pip-args", "--index", "--with", "-w", "-e", "--editable"}


def _arguments(text: str) -> list[str]:
    """The words of a shell command up to its end (``&&``, ``;``, ``|``, a redirection, a comment)."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words = []
    try:
        for word in lexer:
            if word and set(word) <= set("();<>|&"):
                break
            words.append(word)
    except ValueError:  # an unbalanced quote: prose around an inline command
        words = text.replace("'", " ").replace('"', " ").split()
    return words


def index_routes(text: str) -> list[tuple[int, str]]:
    """The commands in ``text`` that would take kqplan from a package index: (line, command)."""
    text = re.sub(r"\\\n\s*", " ", text)  # a continued shell line is one command
    found = []
    for command in COMMAND.finditer(text):
        tool, words = command["tool"].split()[0], _arguments(command["args"])
        if any(w in SOURCES or w.startswith(tuple(f"{s}=" for s in SOURCES if s.startswith("--")))
               for w in words):
            continue
        positional, skip = [], False
        for word in words:
            if skip:
                skip = False
            elif word.startswith("-"):
                skip = word in WITH_A_VALUE
            else:
                positional.append(word)
        runner = tool == "uvx" or command["tool"].split()[-1] == "run"  # its first word is the package
        for i, word in enumerate(positional[:1] if runner else positional):
            if not NAMED.match(word) or "@" in word or positional[i + 1:i + 2] == ["@"]:
                continue  # a path, a URL, git+…, another package, or kqplan[…] @ URL
            pip = tool in ("pip", "pip3", "runpip")
            if pip and ADDS_AN_EXTRA.fullmatch(word):
                continue  # an extra for the kqplan installed
            found.append((text.count("\n", 0, command.start()) + 1, command.group(0).strip()))
    return found


@pytest.mark.parametrize("command", [
    "pip install kqplan",
    "pip install -U kqplan",
    "pip3 install --upgrade 'kqplan>=0.2'",
    "pip install kqplan==0.2.0",
    "`pip install kqplan==0.2.0` in prose",
    'python -m pip install --quiet "kqplan[fleet]==0.2.0"',
    'python -m pip install --quiet "kqplan$extra==$VERSION"',
    "uv pip install KQPlan",
    "pipx install kqplan",
    "pipx install 'kqplan[fleet]'",
    "uv tool install kqplan",
    "uvx kqplan plan quotas",
    "pipx run kqplan plan quotas",
    "- run: pip install \\\n    kqplan==0.3.0",
])
def test_a_route_from_a_package_index_is_found(command):
    assert [line for line, _ in index_routes(f"text\n{command}\n")] == [2]


@pytest.mark.parametrize("command", [
    "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/kqplan plan examples/payments",
    ".venv/bin/pip install -e '.[fleet]'",
    "pipx install 'git+https://github.com/OWNER/kqplan@v0.2.0'",
    'pip install "git+https://github.com/OWNER/kqplan@v0.2.0"',
    "`pip install 'kqplan[fleet] @ git+https://github.com/OWNER/kqplan@v0.2.0'`",
    "pip install kqplan[fleet] @ git+https://github.com/OWNER/kqplan@v0.2.0",
    "pip install https://github.com/OWNER/kqplan/archive/refs/tags/v0.2.0.tar.gz",
    "pip install dist/kqplan-0.2.0-py3-none-any.whl",
    "pip install --no-index --find-links dist kqplan",
    "pip install 'kqplan[fleet]'",
    "pipx runpip kqplan install 'kqplan[fleet]'",
    "uvx --from git+https://github.com/OWNER/kqplan@v0.2.0 kqplan plan",
    "pip install kqplan-helpers",
    "pipx install kqplan-plugins",
    "`pip install …`",
])
def test_a_route_that_names_where_kqplan_comes_from_is_not(command):
    assert index_routes(f"text\n{command}\n") == []


def _documents() -> list[Path]:
    """What users copy install commands from."""
    found = [REPO / "README.md", REPO / "action.yml"]
    found += sorted((REPO / "docs").rglob("*.md"))
    found += sorted(p for p in (REPO / "examples").rglob("*") if p.is_file() and p.suffix != ".json")
    return found


def test_no_document_installs_kqplan_from_a_package_index():
    documents = _documents()
    assert {REPO / "docs" / "ci.md", REPO / "examples" / "github" / "plan-on-pr.yml",
            REPO / "examples" / "gitlab" / ".gitlab-ci.yml"} <= set(documents)
    found = [f"{path.relative_to(REPO)}:{line}: {command}" for path in documents
             for line, command in index_routes(path.read_text(encoding="utf-8"))]
    assert found == []
