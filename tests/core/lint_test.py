"""validate's warnings: shadowed keys (proved against brute-forced principals) and ``User:``."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kqplan.config.model import ProjectConfig
from kqplan.core.diagnostics import Severity, render_text
from kqplan.core.entity import Entity, Name
from kqplan.core.lint import EMPTY_CLIENT_ID_ONLY, SHADOWED, USER_PREFIX, Shadowing, lint, shadowed_keys
from kqplan.core.resolve import resolve
from kqplan.manifest.compile import load_desired

P = "producer_byte_rate"
C = "consumer_byte_rate"
U, CL, UC = Entity.user, Entity.client, Entity.user_client


def test_client_id_entry_is_shadowed_by_the_default_user() -> None:
    # The AWS MSK IAM trap: every principal has a user, so {user=<default>} wins first.
    state = {CL("app"): {P: 1.0, C: 2.0}, U(None): {P: 5.0}}
    assert shadowed_keys(state) == [Shadowing(CL("app"), P, U(None), False)]


def test_each_shadowing_rule() -> None:
    cases: list[tuple[Entity, Entity]] = [
        (CL("app"), UC(None, "app")),
        (CL("app"), UC(None, None)),
        (CL("app"), U(None)),
        (CL(None), UC(None, None)),
        (CL(None), U(None)),
    ]
    for entry, winner in cases:
        assert shadowed_keys({entry: {P: 1.0}, winner: {P: 2.0}}) == \
            [Shadowing(entry, P, winner, False)], (entry, winner)


def test_most_specific_winner_is_named() -> None:
    state = {CL("app"): {P: 1.0}, UC(None, "app"): {P: 2.0}, U(None): {P: 3.0}}
    found = {s.entity: s.by for s in shadowed_keys(state)}
    assert found == {CL("app"): UC(None, "app")}  # {user=<default>} itself is not shadowed


def test_entries_a_fresh_name_reaches_are_never_shadowed() -> None:
    state = {UC("u", "c"): {P: 1.0}, UC("u", None): {P: 1.0}, UC(None, "c"): {P: 1.0},
             UC(None, None): {C: 1.0}, CL("other"): {P: 1.0}, UC(None, "x"): {C: 1.0},
             CL("x"): {P: 1.0}, U("u"): {C: 1.0}, U(None): {"request_percentage": 1.0},
             CL(None): {"controller_mutation_rate": 1.0}}
    assert shadowed_keys(state) == []


def test_user_levels_are_only_reached_without_a_client_id() -> None:
    # {user=U, client-id=<default>} beats {user=U} for every non-empty client-id (§4.1).
    state = {U("alice"): {P: 1.0}, UC("alice", None): {P: 2.0},
             U(None): {C: 1.0}, UC(None, None): {C: 2.0}}
    assert sorted(shadowed_keys(state), key=lambda s: s.key) == [
        Shadowing(U(None), C, UC(None, None), True),
        Shadowing(U("alice"), P, UC("alice", None), True),
    ]
    assert resolve(state, "alice", "")[P].source == U("alice")


# -- the proof: brute force every principal that could matter ----------------------------------

USERS = ["a", "b"]
CLIENTS = ["x", "y"]
KEYS = [P, C]


def _entities() -> list[Entity]:
    users: list[Name] = [*USERS, None]
    clients: list[Name] = [*CLIENTS, None]
    return ([U(u) for u in users] + [CL(c) for c in clients]
            + [UC(u, c) for u in users for c in clients])


states = st.dictionaries(
    st.sampled_from(_entities()),
    st.dictionaries(st.sampled_from(KEYS), st.just(1.0), min_size=1),
)


def _winners(state: dict[Entity, dict[str, float]]) -> dict[tuple[Entity, str], set[str]]:
    """(entity, key) → the client-ids ("" or "some") of principals for which it wins."""
    # Names outside the state stand for every unconfigured name: the index cannot tell them apart.
    wins: dict[tuple[Entity, str], set[str]] = {}
    for user in [*USERS, "fresh-user"]:
        for client_id in [*CLIENTS, "fresh-client", ""]:
            for item in resolve(state, user, client_id).keys:
                if item.source is not None:
                    wins.setdefault((item.source, item.key), set()).add("" if not client_id else "some")
    return wins


@settings(max_examples=500, deadline=None)
@given(states)
def test_shadowing_is_sound_and_complete(state: dict[Entity, dict[str, float]]) -> None:
    wins = _winners(state)
    reported = {(s.entity, s.key): s for s in shadowed_keys(state)}
    for entity, quotas in state.items():
        for key in quotas:
            won = wins.get((entity, key), set())
            s = reported.get((entity, key))
            if s is None:
                assert "some" in won, f"{key} of {entity} never wins but is not reported"
            elif s.empty_client_id_only:
                assert won == {""}, f"{key} of {entity}: reported empty-only, wins {won}"
                assert key in state[s.by]
            else:
                assert not won, f"{key} of {entity} reported shadowed but wins for {won}"
                assert key in state[s.by]


# -- diagnostics on manifests -------------------------------------------------------------------

MANIFEST = """\
apiVersion: kqplan/v1
kind: ClientQuotas
entities:
  - user: <default>
    quotas: {producer_byte_rate: 1MiB}
  - client-id: batch
    quotas:
      consumer_byte_rate: 2MiB
      producer_byte_rate: 5MiB
  - user: "User:alice"
    quotas: {request_percentage: 10}
"""


def test_lint_diagnostics_point_at_the_key(tmp_path: Path) -> None:
    path = tmp_path / "quotas.yaml"
    path.write_text(MANIFEST)
    desired = load_desired([path], ProjectConfig())
    assert desired.diagnostics == []
    diags = lint(desired)
    assert [d.code for d in diags] == [SHADOWED, USER_PREFIX]
    assert all(d.severity is Severity.WARNING for d in diags)
    assert render_text(diags) == f"""\
{path}:9:7: warning[KQP170] producer_byte_rate of {{client-id=batch}} never takes effect: \
{{user=<default>}} sets it and wins for every principal this entry matches
  = note: {{user=<default>}} is listed at {path}:4:5
  = help: every connection has a user, so {{user=<default>}} is checked first; to limit this \
client-id for every user, set producer_byte_rate on {{user=<default>, client-id=batch}} instead, \
or remove it here
{path}:10:11: warning[KQP172] user 'User:alice' will never match: Kafka compares the principal \
name without the 'User:' prefix
  = help: write `user: alice`"""


def test_empty_client_id_only_warning(tmp_path: Path) -> None:
    path = tmp_path / "q.yaml"
    path.write_text("apiVersion: kqplan/v1\nkind: ClientQuotas\nentities:\n"
                    "  - {user: alice, quotas: {producer_byte_rate: 100}}\n"
                    "  - {user: alice, client-id: <default>, quotas: {producer_byte_rate: 200}}\n")
    diags = lint(load_desired([path], ProjectConfig()))
    assert [(d.code, d.span.line) for d in diags] == [(EMPTY_CLIENT_ID_ONLY, 4)]
    assert diags[0].message == ("producer_byte_rate of {user=alice} applies only to connections "
                                "without a client-id: {user=alice, client-id=<default>} sets it "
                                "for every other client-id")
