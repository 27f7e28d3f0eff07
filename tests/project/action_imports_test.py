"""What the GitHub Action's scripts import of kqplan exists: ``action.yml`` runs ``python -c`` lines
that no scan of the package sees (``markdown_block`` was once removed as unused, which broke the PR
comment's blocks)."""

from __future__ import annotations

import importlib
import re

import pytest

from tests.helpers import REPO

IMPORTS = re.compile(r"from (kqplan(?:\.\w+)+) import (\w+)")
FOUND = sorted(set(IMPORTS.findall((REPO / "action.yml").read_text())))


def test_the_action_imports_something_of_kqplan():
    assert ("kqplan.render.escape", "markdown_block") in FOUND


@pytest.mark.parametrize(("module", "name"), FOUND)
def test_every_name_the_action_imports_exists(module, name):
    assert hasattr(importlib.import_module(module), name), f"action.yml imports {name} from {module}"
