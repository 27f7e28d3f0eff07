"""kqplan fmt: canonical, idempotent, comments kept, and never a change of meaning."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kqplan.config.model import ProjectConfig
from kqplan.core.entity import Entity
from kqplan.manifest.compile import load_desired
from kqplan.manifest.export import export
from kqplan.manifest.fmt import format_text
from tests.helpers import run_cli
from tests.manifest.export_test import TRICKY

names = st.sampled_from([*TRICKY, None, "plain"])
values = st.sampled_from([1.0, 1000.0, 1024.0, 1048576.0, 1e15, 1235.0000001, 3000.0])
states = st.dictionaries(st.builds(Entity.user, names), st.fixed_dictionaries(
    {"producer_byte_rate": values}, optional={"consumer_byte_rate": values}), min_size=1, max_size=8)


@settings(max_examples=40, deadline=None)
@given(states, st.booleans())
def test_fmt_never_changes_meaning_and_is_idempotent(tmp_path_factory, state, scramble):
    text = export(state, "c")[0][0].text
    if scramble:  # a hand-written spelling: keys out of order, numbers instead of units
        text = text.replace("apiVersion: kqplan/v1\nkind: ClientQuotas\n",
                            "kind: ClientQuotas\napiVersion: kqplan/v1\n").replace("1MiB", "1048576")
    path = tmp_path_factory.mktemp("fmt") / "q.yaml"
    path.write_text(text)
    before = load_desired([path], ProjectConfig()).quotas
    formatted = format_text(text)
    path.write_text(formatted)
    assert load_desired([path], ProjectConfig()).quotas == before
    assert format_text(formatted) == formatted


def test_fmt_canonical_form_keeps_comments(tmp_path):
    path = tmp_path / "q.yaml"
    path.write_text("# header\nkind: ClientQuotas\napiVersion: kqplan/v1\nentities:\n"
                    "  - quotas: {producer_byte_rate: 1048576, consumer_byte_rate: \"1024KiB\"}  # keep\n"
                    '    user: "bob"\n  # between\n  - client-id: app\n    user: "true"\n    quotas:\n'
                    "      request_percentage: 25   # pct\n      producer_byte_rate: 1000\n")
    check = run_cli("fmt", "--check", path)
    assert (check.exit_code, check.stdout) == (1, f"{path}\n")
    assert run_cli("fmt", path).exit_code == 0
    assert path.read_text() == (
        "# header\napiVersion: kqplan/v1\nkind: ClientQuotas\nentities:\n"
        "  - user: bob\n    quotas: {consumer_byte_rate: 1MiB, producer_byte_rate: 1MiB} # keep\n"
        "  # between\n  - user: 'true'\n    client-id: app\n    quotas:\n"
        "      producer_byte_rate: 1KB\n      request_percentage: 25   # pct\n")
    assert run_cli("fmt", "--check", path).exit_code == 0
    diff = run_cli("fmt", "--diff", "--check", tmp_path)
    assert diff.stdout == ""
