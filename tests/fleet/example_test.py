"""The shipped ``examples/fleet`` passes every command the documentation shows for it (issue 32: it
failed ``fleet rightsize`` against its own ``required-labels`` policy). The commands are read from
README.md and the docs (``cd examples/fleet && kqplan …``) and from the example's own README.md (its ``sh``
block), so they cannot drift from what is tested; each runs in a copy of the example."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

from tests.helpers import REPO, run_cli

EXAMPLE = REPO / "examples" / "fleet"


def documented() -> list[list[str]]:
    """Every ``kqplan`` command shown for the example, as arguments, in the order shown."""
    docs = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    found = [shlex.split(m[1]) for doc in docs
             for m in re.finditer(r"`cd examples/fleet && kqplan ([^`]+)`", doc.read_text(encoding="utf-8"))]
    text = (EXAMPLE / "README.md").read_text(encoding="utf-8")
    for block in re.findall(r"^```sh\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL):
        found += [shlex.split(line.removeprefix("kqplan ")) for line in block.splitlines()
                  if line.startswith("kqplan ")]
    return found


def test_the_documentation_shows_the_example_s_commands():
    commands = documented()
    assert ["plan", "--cluster", "prod"] in commands  # docs/inventory.md's own line
    assert {c[1] for c in commands if c[0] == "fleet"} >= {"plan", "snapshot", "impact", "rightsize"}


def test_every_documented_command_exits_0(tmp_path, monkeypatch):
    copy = tmp_path / "fleet"
    shutil.copytree(EXAMPLE, copy)
    monkeypatch.chdir(copy)
    for args in documented():  # in order: a later command may read what an earlier one wrote
        result = run_cli(*args)
        assert result.exit_code == 0, f"kqplan {shlex.join(args)}:\n{result.stdout}{result.stderr}"
        assert "Traceback" not in result.stderr


@pytest.mark.parametrize("labelled", [False, True])
def test_rightsize_of_the_example_says_which_label_its_policy_wants(tmp_path, monkeypatch, labelled):
    copy = tmp_path / "fleet"
    shutil.copytree(EXAMPLE, copy)
    monkeypatch.chdir(copy)
    result = run_cli("fleet", "rightsize", "--usage", "usage", "--out", "out",
                     *(["--label", "team=platform"] if labelled else []))
    assert result.exit_code == (0 if labelled else 1), result.stderr
    hint = ("[policy] required-labels asks every entry for team: run fleet rightsize again with "
            "--label team=VALUE")
    assert (hint in result.stderr) is not labelled
    if not labelled:
        assert Path("out/prod/rightsize.yaml").exists()  # written for review, and said to be invalid
