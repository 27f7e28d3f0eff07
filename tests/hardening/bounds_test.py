"""Bounded resources: hostile input ends in a located error, never a crash, a hang or a blow-up."""

from __future__ import annotations

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from kqplan.manifest import parse
from kqplan.manifest.parse import MAX_DEPTH, too_deep
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


# Flow nesting judged in C (parse._flow_shallow) must answer as the token-by-token scan does.
_PIECES = ["[", "]", "{", "}", "'", '"', "#", " #", "\n", " ", "a", "\\", "\\\"", "- ", "x: ", "'a]'",
           "# }\n"]


@settings(max_examples=2000, deadline=None)
@given(pieces=st.lists(st.sampled_from(_PIECES), max_size=40), limit=st.integers(1, 4))
def test_flow_depth_in_c_answers_as_the_token_scan(pieces: list[str], limit: int) -> None:
    text = "".join(pieces)
    fast = too_deep(text, limit)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(parse, "_flow_shallow", lambda _text, _limit: False)
        assert fast == too_deep(text, limit)
    event(f"shallow by the C check: {parse._flow_shallow(text, limit)}")


def test_flow_depth_in_c_is_taken_and_sees_quotes_before_the_cut() -> None:
    shallow = "a: {b: [c]}\n" * 10 + "# '{{{{\n" + "d: {e: 1}\n" * 10
    assert parse._flow_shallow(shallow, 2)
    assert not parse._flow_shallow(shallow.replace("[c]", "[[c]]"), 2)
    assert too_deep(shallow.replace("[c]", "[[c]]"), 2) == shallow.index("[c]") + 1
    # brackets in quotes and comments balance the raw text at depth 1; YAML's nest 2 deep
    for hidden in ("a: [ ']' [ ] '[' ]\n", "a: [ # ]\n [ ] # [\n ]\n"):
        assert too_deep(hidden, 1) == hidden.index("[ ]"), hidden
        assert too_deep(hidden, 2) is None
