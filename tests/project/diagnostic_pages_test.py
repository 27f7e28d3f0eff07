"""Every diagnostic code has its page (``docs/diagnostics/KQPnnn.md``, the page each diagnostic links
to) and every page a code still in use; the table of docs/diagnostics/index.md links each one; each
page's example really gives the output the page shows; and the site builds with ``mkdocs --strict``.

A page's example is written so that this test can run it:

    File `q.yaml`:

    ```yaml
    ...the file, written to a fresh directory...
    ```

    ```console
    $ kqplan validate q.yaml
    q.yaml:6:7: error[KQP110] unknown quota key 'producer_rate'
    ...
    ```

(a caption the reader sees, not ```` ```yaml title="q.yaml" ````: that needs a plugin the site does
not use, and an HTML comment would hide the file's name).
The ``console`` block runs in that directory: ``$ printf …`` or ``$ truncate …`` lines first (a file
whose bytes a page cannot show), then one ``$ kqplan …`` line, run in this process; the lines of
the page's output that name the page's code (``[KQPnnn]``) must be lines of the real output. The
rest of the output (hints, summaries) may change wording without touching 53 pages.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from kqplan.core.diagnostics import doc_url
from tests.helpers import REPO, run_cli

PAGES = REPO / "docs" / "diagnostics"
CODE = re.compile(r"KQP[0-9]{3}")
FILE = re.compile(r"^File `(?P<name>[\w.\-/]+)`:\n\n```[\w-]*\n(?P<body>.*?)^```$", re.S | re.M)
CONSOLE = re.compile(r"^```console\n(?P<body>.*?)^```$", re.S | re.M)
SETUP_COMMANDS = ("printf", "truncate")
"""What a page may run besides kqplan, to write a file it cannot show (a byte that is not UTF-8)."""


def source_codes() -> set[str]:
    return {code for path in (REPO / "kqplan").rglob("*.py")
            for code in CODE.findall(path.read_text(encoding="utf-8"))}


def page_codes() -> set[str]:
    return {path.stem for path in PAGES.glob("KQP*.md")}


@dataclass(frozen=True)
class Example:
    files: dict[str, str]
    setup: tuple[str, ...]
    command: tuple[str, ...]
    output: tuple[str, ...]


def section(text: str, title: str) -> str:
    found = re.search(rf"^## {title}\n(?P<body>.*?)(?=^## |\Z)", text, re.S | re.M)
    assert found, f"no '## {title}' section"
    return found["body"]


def example(page: Path) -> Example:
    text = section(page.read_text(encoding="utf-8"), "Example")
    files = {m["name"]: m["body"] for m in FILE.finditer(text)}
    assert len(files) == len(re.findall(r"^File `", text, re.M)), f"{page.name}: a File caption not read"
    consoles = CONSOLE.findall(text)
    assert len(consoles) == 1, f"{page.name}: one ```console block in its Example"
    lines = consoles[0].splitlines()
    runs = [i for i, line in enumerate(lines) if line.startswith("$ kqplan ")]
    assert len(runs) == 1, f"{page.name}: one `$ kqplan …` line"
    setup = tuple(line[2:] for line in lines[:runs[0]])
    assert all(line.startswith("$ ") and line.split()[1] in SETUP_COMMANDS for line in lines[:runs[0]]), \
        f"{page.name}: before `$ kqplan`, only {SETUP_COMMANDS} lines"
    return Example(files, setup, tuple(shlex.split(lines[runs[0]][2:])[1:]), tuple(lines[runs[0] + 1:]))


def test_every_code_has_a_page_and_every_page_a_code():
    used, pages = source_codes(), page_codes()
    assert len(used) >= 50
    assert not used - pages, f"codes without a page in docs/diagnostics/: {sorted(used - pages)}"
    assert not pages - used, f"pages of codes no longer used in kqplan/: {sorted(pages - used)}"


@pytest.mark.parametrize("code", sorted(page_codes()))
def test_the_page_says_what_how_and_where(code):
    text = (PAGES / f"{code}.md").read_text(encoding="utf-8")
    assert re.match(rf"# {code}: \S", text), f"{code}.md starts with '# {code}: <short title>'"
    assert re.search(r"^\*\*Severity:\*\* (error|warning)", text, re.M), f"{code}.md: its severity"
    assert re.search(r"^\*\*Reported by:\*\* \S", text, re.M), f"{code}.md: the commands that report it"
    for title in ("What it means", "Example", "How to fix"):
        assert section(text, title).strip(), f"{code}.md: '## {title}' is empty"


def test_the_table_links_every_code_to_its_page():
    table = [line for line in (PAGES / "index.md").read_text(encoding="utf-8").splitlines()
             if line.startswith("| KQP") or line.startswith("| [KQP")]
    linked = set()
    for row in table:
        first = row.split("|")[1]
        links = re.findall(r"\[(KQP[0-9]{3})\]\((KQP[0-9]{3})\.md\)", first)
        assert all(text == target for text, target in links), row
        unlinked = re.sub(r"\[KQP[0-9]{3}\]\(KQP[0-9]{3}\.md\)", "", first)
        assert not CODE.search(unlinked), f"a code not linked: {row}"
        linked.update(text for text, _ in links)
    assert linked == source_codes(), f"table vs codes: {sorted(linked ^ source_codes())}"


@pytest.mark.parametrize("code", sorted(page_codes()))
def test_the_example_gives_the_output_shown(code, tmp_path, monkeypatch):
    shown = example(PAGES / f"{code}.md")
    expected = [line for line in shown.output if f"[{code}]" in line]
    assert expected, f"{code}.md: its example's output shows no [{code}] line"
    for name, body in shown.files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(body, encoding="utf-8")
    for line in shown.setup:
        subprocess.run(line, shell=True, cwd=tmp_path, check=True, timeout=30)
    monkeypatch.chdir(tmp_path)
    result = run_cli(*shown.command)
    assert result.exit_code != 0 or "warning[" in "".join(expected), (code, result)
    got = (result.stdout + result.stderr).splitlines()
    missing = [line for line in expected if line not in got]
    assert not missing, f"{code}.md shows lines kqplan no longer prints: {missing}\nkqplan printed:\n" + \
        "\n".join(got)


def test_doc_url_is_the_page_on_the_site():
    site = re.search(r"^site_url: (\S+)$", (REPO / "mkdocs.yml").read_text(encoding="utf-8"), re.M)
    assert site
    assert doc_url("KQP110") == f"{site[1].rstrip('/')}/diagnostics/KQP110/"
    assert all((PAGES / f"{code}.md").is_file() for code in source_codes())


def test_the_site_builds_strict(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "WARNING" not in proc.stderr, proc.stderr
    for code in sorted(source_codes()):
        assert (tmp_path / "site" / "diagnostics" / code / "index.html").is_file(), code
