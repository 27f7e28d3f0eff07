"""The README names the promises of "What kqplan guarantees" that issue 41 added, and the page
states them: a saved plan cannot be edited or back-dated, and every ``--report`` (fleet apply's
too) describes its own run."""

from __future__ import annotations

import re

from tests.helpers import REPO


def _text(name: str) -> str:
    return re.sub(r"\s+", " ", (REPO / name).read_text(encoding="utf-8"))


def test_the_readme_names_the_round_three_promises_beside_the_guarantees_link() -> None:
    readme = _text("README.md")
    found = re.search(r"\[guarantees\]\(docs/guarantees\.md\) \(([^)]*)\)", readme)
    assert found is not None, "the README's documentation list links the guarantees with what they promise"
    promises = found.group(1)
    assert "a saved plan cannot be edited or back-dated" in promises
    assert "every `--report`, fleet apply's too, describes its own run" in promises


def test_the_guarantees_page_states_both_promises() -> None:
    page = _text("docs/guarantees.md")
    assert "**A saved plan cannot be back-dated.**" in page
    assert "a hand edit is refused, and so is a plan whose digest was deleted" in page
    assert "`fleet apply --report` has the same life cycle" in page
    assert "never an earlier run's" in page
