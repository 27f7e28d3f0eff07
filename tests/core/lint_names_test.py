"""Issue 32 §4: names that validate silently but are likely mistakes. Kafka's default entity is
spelled exactly ``<default>`` (``default``, ``<Default>``, ``"<default >"`` are names: KQP173),
and Kafka has no wildcard (``*``, ``.*`` are names: KQP174). Legal names, so warnings, at the
name, with the fix; through ``kqplan validate`` on a manifest file."""

from __future__ import annotations

from pathlib import Path

import pytest

from kqplan.core.lint import DEFAULT_NEAR_MISS, USER_PREFIX, WILDCARD_NAME, name_mistake
from tests.helpers import run_cli, write_manifest

HEAD = 3  # apiVersion, kind, entities: the first entry is on line 4


def one_entry(tmp_path: Path, field: str, written: str) -> Path:
    key = "connection_creation_rate" if field == "ip" else "producer_byte_rate"
    body = f"entities:\n  - {field}: {written}\n    quotas: {{{key}: 5}}\n"
    return write_manifest(tmp_path / "q.yaml", body)


@pytest.mark.parametrize(("field", "written", "code", "shown"), [
    ("user", "default", DEFAULT_NEAR_MISS, "default"),
    ("user", "Default", DEFAULT_NEAR_MISS, "Default"),
    ("user", "<Default>", DEFAULT_NEAR_MISS, "<Default>"),
    ("user", "<DEFAULT>", DEFAULT_NEAR_MISS, "<DEFAULT>"),
    ("user", '"<default >"', DEFAULT_NEAR_MISS, "<default >"),
    ("user", '" <default>"', DEFAULT_NEAR_MISS, " <default>"),
    ("user", '"[default]"', DEFAULT_NEAR_MISS, "[default]"),
    ("user", '"<defualt>"', DEFAULT_NEAR_MISS, "<defualt>"),
    ("user", '"<defaults>"', DEFAULT_NEAR_MISS, "<defaults>"),
    ("client-id", "default", DEFAULT_NEAR_MISS, "default"),
    ("client-id", "<Default>", DEFAULT_NEAR_MISS, "<Default>"),
    ("ip", "default", DEFAULT_NEAR_MISS, "default"),
    ("ip", "<DEFAULT>", DEFAULT_NEAR_MISS, "<DEFAULT>"),
    ("user", '"*"', WILDCARD_NAME, "*"),
    ("user", '".*"', WILDCARD_NAME, ".*"),
    ("client-id", '"*"', WILDCARD_NAME, "*"),
    ("client-id", '"%"', WILDCARD_NAME, "%"),
    ("client-id", '"**"', WILDCARD_NAME, "**"),
    ("client-id", '".+"', WILDCARD_NAME, ".+"),
    ("ip", '"*"', WILDCARD_NAME, "*"),
])
def test_a_likely_mistake_is_a_located_warning_with_the_fix(tmp_path, field, written, code, shown):
    path = one_entry(tmp_path, field, written)
    result = run_cli("validate", path)
    assert result.exit_code == 0, result.stdout  # a warning: legal names in Kafka
    lines = result.stdout.splitlines()
    column = len(f"  - {field}: ") + 1
    every = {"user": "every user", "client-id": "every client-id", "ip": "every address"}[field]
    if code == DEFAULT_NEAR_MISS:
        assert lines[0] == (f"{path}:{HEAD + 1}:{column}: warning[KQP173] {field} '{shown}' is a name, not "
                            f"the default {field}: Kafka's default entity is spelled exactly <default>")
        assert lines[1] == (f"  = help: write `{field}: <default>` for {every} without an entry of its "
                            f"own (keep '{shown}' only if one is really named so)")
    else:
        assert lines[0] == (f"{path}:{HEAD + 1}:{column}: warning[KQP174] {field} '{shown}' is a name, not "
                            f"a wildcard: Kafka has no wildcards in quota entities, this matches only "
                            f"the {field} named '{shown}'")
        assert lines[1] == (f"  = help: write `{field}: <default>` for {every} without an entry of its "
                            f"own, or list each {field} by name")
    assert lines[2:] == ["Found 0 error(s) and 1 warning(s)."]
    strict = run_cli("validate", "--strict", path)
    assert strict.exit_code == 1


@pytest.mark.parametrize(("field", "written"), [
    ("user", "<default>"),  # Kafka's default
    ("user", '"\\\\<default>"'),  # the literal name <default>, escaped on purpose
    ("user", "defaults-team"), ("user", "dave"), ("user", "Default-Service"), ("client-id", "d"),
    ("client-id", '"."'), ("client-id", '".."'), ("client-id", "payments-*"), ("user", '"a*"'),
    ("client-id", '"<none>"'), ("user", '"<all>"'), ("ip", "10.0.0.1"), ("ip", "db.example.com"),
])
def test_ordinary_names_are_quiet(tmp_path, field, written):
    path = one_entry(tmp_path, field, written)
    result = run_cli("validate", path)
    assert result.exit_code == 0
    assert result.stdout == "Valid: 1 entities in 1 file(s).\n"


def test_every_name_of_an_entry_and_every_entry_in_one_run(tmp_path):
    path = write_manifest(tmp_path / "q.yaml", (
        "entities:\n"
        "  - user: default\n"          # 4
        "    client-id: \"*\"\n"       # 5
        "    quotas: {producer_byte_rate: 5}\n"
        "  - user: \"User:judy\"\n"    # 7
        "    quotas: {producer_byte_rate: 5}\n"
        "  - user: <default>\n"        # 9
        "    client-id: <Default>\n"   # 10
        "    quotas: {producer_byte_rate: 5}\n"))
    result = run_cli("--no-color", "validate", path, "--format", "json")
    assert result.exit_code == 0
    found = [(d["code"], d["location"]["row"], d["location"]["column"], d["severity"]) for d in result.json]
    assert found == [("KQP173", 4, 11, "warning"), ("KQP174", 5, 16, "warning"), ("KQP172", 7, 11, "warning"),
                     ("KQP173", 10, 16, "warning")]


def test_plan_shows_the_warning_for_an_entry_it_changes(tmp_path):
    path = one_entry(tmp_path, "client-id", '"*"')
    result = run_cli("plan", path, "--sandbox")
    assert result.exit_code == 0, result.stderr
    assert f"{path}:4:16: warning[KQP174] client-id '*' is a name, not a wildcard" in result.stderr


@pytest.mark.parametrize(("entity_type", "name", "code"), [
    ("user", "User:x", USER_PREFIX), ("client-id", "User:x", None), ("user", "\tdefault ", DEFAULT_NEAR_MISS),
    ("user", "(default)", DEFAULT_NEAR_MISS), ("user", "'default'", DEFAULT_NEAR_MISS),
    ("user", "DEFAULT", DEFAULT_NEAR_MISS), ("user", "<default>", None), ("user", "<>", None),
    ("user", "*.*", WILDCARD_NAME), ("user", " * ", WILDCARD_NAME), ("user", "?", WILDCARD_NAME),
    ("user", "", None), ("user", ".", None), ("group", "*", None), ("group", "default", None),
])
def test_name_mistake(entity_type, name, code):
    found = name_mistake(entity_type, name)
    assert (found[0] if found else None) == code
