"""Bounded resources: hostile input ends in a located error, never a crash, a hang or a blow-up."""

from __future__ import annotations

import pytest

from kqplan.manifest.loader import MAX_DEPTH, too_deep
from tests.helpers import run_kqplan

HEAD = "apiVersion: kqplan/v1\nkind: ClientQuotas\n"


@pytest.mark.parametrize(("body", "where"), [
    ("entities: " + "[" * 30_000 + "\n", "3:75"),  # crashed the process (exit 139) in pyyaml's composer
    ("entities: " + "{a: " * 30_000 + "\n", None),
    ("entities:\n" + "".join("  " * i + "- \n" for i in range(1, 3000)), "131:1"),
    ("entities:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 3000)), None),
])
def test_deep_nesting_is_a_located_error_not_a_crash(tmp_path, body, where):
    path = tmp_path / "deep.yaml"
    path.write_text(HEAD + body)
    result = run_kqplan("validate", path, timeout=60)
    assert result.exit_code == 1, result.stderr
    assert f"error[KQP001] YAML nests deeper than {MAX_DEPTH} levels" in result.stdout
    if where:
        assert f"{path}:{where}:" in result.stdout


def test_brackets_in_quotes_and_comments_do_not_count():
    text = (HEAD + "entities: []  # " + "[" * 100 + "\n" + "x: '" + "{" * 100 + "'\n"
            + 'y: "' + "[" * 100 + '"\n')
    assert too_deep(text) is None
    assert too_deep(HEAD + "x: " + "[" * 65) is not None
