"""kqplan.toml's safe-rollout settings: ``[policy] expiry-warning``, ``max-expiry``,
``protected-principals`` and ``[clusters.NAME] brokers``; read alike by the plain check and the
schema, every problem located (KQP190) in the same run as the others."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kqplan.config.reader import check_config, plain_document
from kqplan.config.schema import validate_document
from kqplan.core.diagnostics import DiagnosticsError, render_text
from kqplan.core.policy import DEFAULT_EXPIRY_WARNING, ProtectedPrincipal


def read(tmp_path: Path, text: str):
    path = tmp_path / "kqplan.toml"
    path.write_text(text)
    return check_config(path)


def test_the_settings_and_their_defaults(tmp_path):
    config, problems = read(tmp_path, '[clusters.prod]\nsnapshot = "s.json"\nbrokers = 6\n[policy]\n'
                            'max-expiry = "30d"\nexpiry-warning = "36h"\nprotected-principals = '
                            '[{user = "__strimzi-topic-operator"}, {user = "canary", client-id = "probe"}]\n')
    assert problems == []
    assert config.clusters["prod"].brokers == 6
    assert config.policy.max_expiry == timedelta(days=30)
    assert config.policy.expiry_warning == timedelta(hours=36)
    assert config.policy.protected_principals == (ProtectedPrincipal("__strimzi-topic-operator"),
                                                  ProtectedPrincipal("canary", "probe"))
    plain, _ = read(tmp_path, "")
    assert (plain.policy.expiry_warning, plain.policy.max_expiry) == (DEFAULT_EXPIRY_WARNING, None)
    assert plain.policy.protected_principals == ()


def test_every_problem_is_located_in_one_run(tmp_path):
    _, problems = read(tmp_path, '[clusters.prod]\nsnapshot = "s.json"\nbrokers = 0\n[policy]\n'
                       'max-expiry = "a month"\nexpiry-warning = 7\n'
                       'protected-principals = [{user = ""}, {client-id = "x"}, '
                       '{user = "u", clientid = "c"}]\n')
    assert render_text(problems).replace(f"{tmp_path}/", "") == "\n".join([
        "kqplan.toml:3:1: error[KQP190] clusters.prod.brokers: must be a whole number of brokers, 1 or more, "
        "not 0",
        "kqplan.toml:5:1: error[KQP190] policy.max-expiry: 'a month' is not a duration",
        "  = help: write a number and a unit: ms, s, m (or min), h, d or w, e.g. 30s, 2m or 500ms; 1.5h, 7d "
        "or 2w",
        "kqplan.toml:6:1: error[KQP190] policy.expiry-warning: must be a duration in quotes, such as \"7d\" "
        "(ms, s, m, h, d or w), not 7",
        "kqplan.toml:7:1: error[KQP190] policy.protected-principals[1]: must be a table such as "
        "{user = \"canary\"}, with an optional client-id, not a table",
        "kqplan.toml:7:1: error[KQP190] unknown key 'clientid' in [policy.protected-principals[2]]",
        "  = help: did you mean 'client-id'?",
        "kqplan.toml:7:1: error[KQP190] policy.protected-principals[0]: an empty user",
        "  = help: name the principal as Kafka sees it: user = \"NAME\" (without User:), and a client-id "
        "only to protect that one client (without it, every client-id of the user is protected)",
    ])


principals = st.lists(st.one_of(
    st.fixed_dictionaries({"user": st.text(max_size=4)}, optional={"client-id": st.text(max_size=4)}),
    st.dictionaries(st.sampled_from(["user", "client-id", "client_id", "typo"]),
                    st.one_of(st.text(max_size=3), st.integers(), st.booleans()), max_size=3),
    st.text(max_size=3)), max_size=3)
spans = st.one_of(st.sampled_from(["7d", "30d", "1h", "x", ""]), st.integers(-1, 9), st.booleans(), st.none())
documents = st.fixed_dictionaries({}, optional={
    "policy": st.fixed_dictionaries({}, optional={
        "expiry-warning": spans, "max-expiry": spans,
        "protected-principals": st.one_of(principals, st.text())}),
    "clusters": st.dictionaries(st.sampled_from(["a", "b"]), st.fixed_dictionaries({}, optional={
        "snapshot": st.just("s.json"), "brokers": st.one_of(st.integers(-1, 9), st.text(max_size=2),
                                                            st.booleans(), st.floats(0, 9))}), max_size=2)})


@settings(max_examples=400, deadline=None)
@given(documents)
def test_the_plain_check_and_the_schema_agree_on_the_new_settings(raw):
    raw = {k: {kk: vv for kk, vv in v.items() if vv is not None} if k == "policy" else v
           for k, v in raw.items()}
    plain = plain_document(raw)
    try:
        schema = validate_document(Path("kqplan.toml"), "", raw)
    except DiagnosticsError:
        assert plain is None, raw
        return
    assert plain is None or plain == schema, raw


@pytest.mark.parametrize("raw", [
    {"policy": {"protected-principals": [{"user": "a"}, {"user": "b", "client-id": "c"}]}},
    {"policy": {"max-expiry": "30d", "expiry-warning": "1d"}},
    {"clusters": {"a": {"snapshot": "s.json", "brokers": 3}}},
])
def test_ordinary_settings_take_the_plain_path(raw):
    assert plain_document(raw) is not None
    assert plain_document(raw) == validate_document(Path("kqplan.toml"), "", raw)
