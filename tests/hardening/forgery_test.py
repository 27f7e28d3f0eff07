"""Plan output cannot be forged by entity names: what a reviewer reads is what will be sent."""

from __future__ import annotations

import json

import pytest

from kqplan.core.entity import Entity
from kqplan.core.ownership import Ownership
from kqplan.core.plan import ClusterRef, diff
from kqplan.render.github import render_plan_github
from kqplan.render.markdown import render_markdown
from kqplan.render.text import render_text
from tests.helpers import run_cli, write_manifest

FORGED = "bob\n      + producer_byte_rate = 1\n\n  + {user=mallory"


@pytest.mark.parametrize("name", [FORGED, "a\x1b[2J\x1b[31mred", "evil\u202etxt.exe", "cr\rover",
                                  "zw\u200bsp"])
def test_names_are_escaped_in_every_rendering(name):
    plan = diff({Entity.user(name): {"producer_byte_rate": 1.0}}, {}, Ownership(),
                cluster=ClusterRef("c", "x"), fingerprint=None)
    for text in (render_text(plan), render_markdown(plan), render_plan_github(plan)):
        assert name not in text
        assert not any(ch in text for ch in "\x1b\r\u202e\u200b")
    lines = render_text(plan).splitlines()
    assert [line for line in lines if line.startswith("  +")] == [f"  + {Entity.user(name).display}"]


def test_validate_refuses_invisible_characters_written_raw_in_names(tmp_path):
    path = write_manifest(tmp_path / "q.yaml", 'entities:\n  - user: "a\u202eb"\n'
                          "    quotas: {producer_byte_rate: 1}\n")
    result = run_cli("validate", path)
    assert result.exit_code == 1
    assert (f"{path}:4:11: error[KQP106] user name contains U+202E, a control or invisible character "
            "(shown as \\u202e), written raw in the file") in result.stdout
    # written as a visible escape, the reviewer sees it: accepted, and plans show it escaped
    write_manifest(path, 'entities:\n  - user: "a\\u202eb"\n    quotas: {producer_byte_rate: 1}\n')
    assert run_cli("validate", path).exit_code == 0


def test_the_json_plan_keeps_the_exact_name_for_machines(tmp_path):
    snapshot = tmp_path / "s.json"
    snapshot.write_text(json.dumps({"format_version": 1, "cluster_id": "c", "entities": [
        {"entity": {"user": "x\ny"}, "quotas": {"producer_byte_rate": 1.0}}]}))
    write_manifest(tmp_path / "q.yaml", "ownership: {prune: true, scope: [{user: 'x*'}]}\nentities: []\n")
    doc = run_cli("plan", tmp_path / "q.yaml", "--state", snapshot, "--format", "json").json
    assert doc["changes"][0]["entity"] == {"user": "x\ny"}
    assert doc["changes"][0]["display"] == "{user=x\\ny}"


@pytest.mark.parametrize("name", ["a\u202eb", "zw\u200bsp", "del\x7f", "c1\x85x", "esc\x1b[31m", "tab\tx",
                                  "astral\U000e0001"])
def test_export_writes_invisible_characters_as_escapes_that_read_back(name):
    import yaml_rs

    from kqplan.manifest.export import yaml_string

    written = yaml_string(name)
    assert written.isprintable()
    assert yaml_rs.loads(f"k: {written}\n") == {"k": name}
