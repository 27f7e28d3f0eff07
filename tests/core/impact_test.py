"""Blast radius of a plan, default-entity warnings, and the principals file reader."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kqplan.core.diagnostics import DiagnosticsError
from kqplan.core.entity import Entity
from kqplan.core.errors import KqplanError
from kqplan.core.impact import DefaultWarning, KeyImpact, Side, blast_radius, default_warnings
from kqplan.core.ownership import Ownership
from kqplan.core.plan import ClusterRef, diff
from kqplan.core.principals import Principal, parse_principals
from kqplan.pipeline.inputs import read_principals
from kqplan.render.impact import impact_to_json, render_impact_text

P = "producer_byte_rate"
C = "consumer_byte_rate"
U, CL, UC = Entity.user, Entity.client, Entity.user_client

BEFORE = {U(None): {P: 1000.0, C: 500.0}, U("alice"): {P: 4000.0, C: 100.0}, CL("app"): {C: 9.0}}
AFTER = {U(None): {P: 2000.0}, U("alice"): {P: 4000.0, C: 100.0}, CL("app"): {C: 9.0}}
PRINCIPALS = [Principal("alice", "app"), Principal("bob", "app"), Principal("carol", ""),
              Principal("bob", "app")]


def test_blast_radius_lists_changed_principals_and_counts_lost_limits() -> None:
    impact = blast_radius(BEFORE, AFTER, PRINCIPALS)
    assert impact.summary.line == ("2 principals change effective quota (of 3 checked); "
                                   "1 loses a limit; 0 gain a limit.")
    assert [p.principal for p in impact.principals] == [Principal("bob", "app"),
                                                        Principal("carol", "")]
    bob, carol = impact.principals
    # bob's consumer limit falls through from {user=<default>} to {client-id=app}.
    assert bob.keys == (
        KeyImpact(P, Side(1000.0, U(None)), Side(2000.0, U(None))),
        KeyImpact(C, Side(500.0, U(None)), Side(9.0, CL("app"))),
    )
    # carol sends no client-id: {client-id=app} can never apply, so she loses the limit.
    assert carol.keys[1] == KeyImpact(C, Side(500.0, U(None)), Side(None, None))
    assert carol.loses_limit
    assert not bob.loses_limit


def test_gaining_a_limit_and_source_only_changes() -> None:
    before = {U(None): {P: 5.0}}
    after = {U(None): {P: 5.0}, U("dave"): {P: 5.0}, CL(None): {C: 1.0}}
    impact = blast_radius(before, after, [Principal("dave", "x"), Principal("erin", "x")])
    assert impact.summary.line == ("2 principals change effective quota (of 2 checked); "
                                   "0 lose a limit; 2 gain a limit.")
    dave = impact.principals[0]
    assert dave.keys[0] == KeyImpact(P, Side(5.0, U(None)), Side(5.0, U("dave")))
    assert dave.keys[0].marker == "~"


def test_unchanged_and_nan_values_do_not_count() -> None:
    state = {U(None): {"request_percentage": math.nan}}
    impact = blast_radius(state, dict(state), [Principal("a", "b")])
    assert impact.principals == ()
    assert impact.summary.changed == 0
    assert impact.summary.line.startswith("0 principals change effective quota (of 1 checked)")


def test_render_text_and_json() -> None:
    impact = blast_radius(BEFORE, AFTER, PRINCIPALS)
    assert render_impact_text(impact, limit=1) == """\
Blast radius: 2 principals change effective quota (of 3 checked); 1 loses a limit; 0 gain a limit.
  {user=bob, client-id=app}
      ~ producer_byte_rate = 1000 {user=<default>} -> 2000 {user=<default>}
      ~ consumer_byte_rate = 500 {user=<default>} -> 9 {client-id=app}
  … and 1 more (use --format json for every principal)
"""
    doc = impact_to_json(impact)
    assert doc["summary"] == {"checked": 3, "changed": 2, "lose_limit": 1, "gain_limit": 0}
    assert doc["principals"][1] == {
        "entity": {"user": "carol", "client-id": ""},
        "keys": {P: {"before": {"value": 1000.0, "source": {"user": None}},
                     "after": {"value": 2000.0, "source": {"user": None}}},
                 C: {"before": {"value": 500.0, "source": {"user": None}},
                     "after": {"value": None, "source": None}}}}


def test_default_warnings_name_the_entity_and_keys() -> None:
    plan = diff({U(None): {P: 2.0}, U("a"): {P: 1.0}, Entity.ip(None): {"connection_creation_rate": 3}},
                {U(None): {P: 1.0, C: 1.0}}, Ownership(), cluster=ClusterRef(None, "snap"),
                fingerprint=None)
    warnings = default_warnings(plan)
    assert warnings == [DefaultWarning(Entity.ip(None), ("connection_creation_rate",)),
                        DefaultWarning(U(None), (C, P))]
    assert [w.message for w in warnings] == [
        "warning: the change to {ip=<default>} (connection_creation_rate) affects every address "
        "without its own {ip=...} entry; pass --principals FILE to see who",
        "warning: the change to {user=<default>} (consumer_byte_rate, producer_byte_rate) affects "
        "every principal without a more specific entry for these keys; pass --principals FILE "
        "to see who",
    ]


# -- principals files ---------------------------------------------------------------------------

def test_csv_with_and_without_header(tmp_path: Path) -> None:
    path = tmp_path / "p.csv"
    path.write_text('\ufeffuser,client-id\nalice,app\n"a,b",\n\nalice,app\n<default>,x\n')
    assert read_principals(path) == [Principal("alice", "app"), Principal("a,b", ""),
                                     Principal("<default>", "x")]
    assert parse_principals("bob,c1\n", source="x") == [Principal("bob", "c1")]


def test_json_lines(tmp_path: Path) -> None:
    text = '{"user": "alice", "client-id": "app", "count": 3}\n\n{"user": "bob", "client-id": ""}\n'
    assert parse_principals(text, source="p.jsonl") == [Principal("alice", "app"),
                                                        Principal("bob", "")]


def test_errors_name_file_line_and_rule() -> None:
    with pytest.raises(DiagnosticsError) as err:
        parse_principals("user,client-id\nalice\n,app\nok,fine\na,b,c\n", source="p.csv")
    assert str(err.value) == """\
p.csv:2:1: error[KQP180] expected 2 columns (user,client-id), found 1
  = help: quote names that contain commas: "a,b",app
p.csv:3:1: error[KQP180] user is empty or not a string
  = help: every connection has a principal name (ANONYMOUS without authentication)
p.csv:5:1: error[KQP180] expected 2 columns (user,client-id), found 3
  = help: quote names that contain commas: "a,b",app
Found 3 error(s)."""
    with pytest.raises(DiagnosticsError) as err:
        parse_principals('{"user": "a", "client_id": "x"}\n{"user": "a", "client-id": null}\n[1]\n{x',
                         source="p.jsonl")
    assert [(d.span.line, d.message, d.hint) for d in err.value.diagnostics] == [
        (1, 'missing "client-id"', 'did you mean "client-id" for "client_id"?'),
        (2, "client-id is not a string", 'write "" for a client that sends no client-id'),
        (3, "not a JSON object", 'one object per line: {"user": "alice", "client-id": "app"}'),
        (4, "not JSON: Expecting property name enclosed in double quotes",
         'one object per line: {"user": "alice", "client-id": "app"}'),
    ]


def test_unreadable_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(KqplanError, match="cannot read principals file"):
        read_principals(tmp_path / "missing.csv")
    (tmp_path / "empty.csv").write_text("user,client-id\n")
    with pytest.raises(KqplanError, match="no principals found"):
        read_principals(tmp_path / "empty.csv")
    (tmp_path / "bin.csv").write_bytes(b"\xff\xfe")
    with pytest.raises(KqplanError, match="not UTF-8"):
        read_principals(tmp_path / "bin.csv")
