"""export → plan is "No changes": names that YAML would misread, defaults, exact values."""

from __future__ import annotations

import math

import yaml_rs
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kqplan.config.model import ProjectConfig
from kqplan.core.entity import Entity
from kqplan.manifest.compile import load_desired
from kqplan.manifest.export import SplitBy, export, yaml_string
from kqplan.snapshot.file import write_snapshot
from tests.helpers import run_cli

TRICKY = ["<default>", "\\x", "user with spaces", "jörg-ünïcödé", "1e3", "0o17", "true", "null",
          "~", "- dash", "a: colon", "#hash", "'quote'", '"dq"', "tab\there", "User:alice", "01.02",
          "x" * 300, "emoji 🚀", "[brackets]", "{brace}", "*star", "&amp", "!bang", "%pct", "@at"]

STATE = {
    Entity.user(None): {"producer_byte_rate": 1048576.0},
    Entity.user_client(None, None): {"consumer_byte_rate": 3000.0},
    Entity.client(None): {"request_percentage": 200.0},
    Entity.ip(None): {"connection_creation_rate": 20.0},
    Entity.ip("1.2.3.4"): {"connection_creation_rate": 10.0},
    Entity.ip("2001:db8::1"): {"connection_creation_rate": 10.0},
    Entity.user("1235"): {"producer_byte_rate": 1235.0000001, "controller_mutation_rate": 0.1},
    **{Entity.user_client(n, n): {"request_percentage": 12.5} for n in TRICKY},
    **{Entity.user(n): {"consumer_byte_rate": 52428800.0} for n in TRICKY},
}


def test_yaml_string_reads_back_as_the_same_string():
    for name in TRICKY:
        assert yaml_rs.loads(f"k: {yaml_string(name)}\n") == {"k": name}, name


def test_export_round_trip_through_plan(tmp_path):
    snap = tmp_path / "snap.json"
    write_snapshot(snap, STATE, "c-1")
    for split in ("none", "user"):
        out = tmp_path / f"out-{split}"
        result = run_cli("export", "--state", snap, "--out", out, "--split-by", split)
        assert result.exit_code == 0, result.stderr
        plan = run_cli("plan", out, "--state", snap, "--detailed-exitcode")
        assert plan.exit_code == 0, plan.stdout + plan.stderr
        assert plan.stdout.startswith("No changes.")
        desired = load_desired([out], ProjectConfig())
        assert desired.quotas == STATE  # exact doubles, names and defaults


def test_split_by_user_puts_each_user_in_its_own_file():
    files, skipped = export(STATE, "c-1", split_by=SplitBy.USER)
    names = [f.name for f in files]
    assert "defaults.yaml" in names
    assert "no-user.yaml" in names  # client-only and ip entities
    assert "users/user_with_spaces-" in " ".join(names)
    assert len(names) == len(set(names))
    assert not skipped


def test_values_a_manifest_cannot_hold_are_reported_not_silently_dropped():
    state = {Entity.user("a"): {"request_percentage": math.nan, "producer_byte_rate": 1.0},
             Entity.user("b"): {"producer_byte_rate": -5.0}}
    files, skipped = export(state, None)
    assert [(s.entity.display, s.key) for s in skipped] == [
        ("{user=a}", "request_percentage"), ("{user=b}", "producer_byte_rate")]
    assert "user: b" not in files[0].text  # nothing left to express for b


@example(names=["A\n"])  # a plain-scalar regex ending in $ once let the newline through
@settings(max_examples=50, deadline=None)
@given(names=st.lists(st.text(min_size=1, max_size=20).filter(lambda s: "\x00" not in s),
                      min_size=1, max_size=8, unique=True))
def test_any_printable_or_not_name_round_trips(tmp_path_factory, names):
    state = {Entity.user(n): {"producer_byte_rate": 1024.0} for n in names}
    [f], _ = export(state, None)
    path = tmp_path_factory.mktemp("e") / "q.yaml"
    path.write_text(f.text, encoding="utf-8")
    desired = load_desired([path], ProjectConfig())
    assert not desired.errors, desired.diagnostics
    assert desired.quotas == state
