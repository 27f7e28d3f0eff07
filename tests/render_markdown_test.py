"""Plan Markdown as a PR comment: bounded size, summary first, deletes set apart, warnings inside."""

from __future__ import annotations

import json

from kqplan.entity import Entity
from kqplan.impact import blast_radius
from kqplan.ownership import Ownership, ScopePattern
from kqplan.plan import ClusterRef, apply_ops, diff
from kqplan.principals import Principal
from kqplan.render import render_markdown
from tests.helpers import run_cli, write_manifest


def big_plan(n: int):
    desired = {Entity.user(f"u{i:05d}"): {"producer_byte_rate": 2048.0, "consumer_byte_rate": 4096.0}
               for i in range(n)}
    desired[Entity.user(None)] = {"producer_byte_rate": 1024.0}
    actual = {Entity.user(f"old{i}"): {"producer_byte_rate": 1.0} for i in range(30)}
    actual[Entity.user("stray")] = {"request_percentage": 5.0}
    own = Ownership.of([(True, [ScopePattern.of({"user": "old*"})])])
    return diff(desired, actual, own, cluster=ClusterRef("c", "h:1"), fingerprint=None), actual


def test_a_3000_entity_plan_stays_under_the_limit_with_its_warnings_inside():
    plan, actual = big_plan(3000)
    from dataclasses import replace

    plan = replace(plan, notes=("warning: the change to {user=<default>} (producer_byte_rate) affects every "
                                "principal without a more specific entry for these keys",
                                "q.yaml:3:5: warning[KQP170] producer_byte_rate of {client-id=a} never "
                                "takes effect"))
    impact = blast_radius(actual, apply_ops(actual, plan.changes), [Principal("zz", "app")])
    for n, limit in ((3000, 60_000), (3000, 10_000)):
        text = render_markdown(plan, max_chars=limit, artifact="plan.json", impact=impact)
        assert len(text) <= limit
        assert text.startswith(f"### kqplan: {n + 1} to add, 0 to change, 30 to delete\n")
        assert "| `producer_byte_rate` | 3001 |  | **30** |" in text
        assert "> **30 entities will be deleted:** `{user=old0}`" in text
        assert "affects every principal without a more specific entry" in text
        assert "warning[KQP170]" in text
        assert "**Blast radius:** 1 principal changes effective quota" in text
        assert "not managed by these manifests" in text
        assert "`{user=stray}`" in text
        assert "more changes are not shown here** (comment size limit); see every change in the plan " \
               "artifact `plan.json`." in text
        assert text.index("Deletes (30)") < text.index("Adds and changes (3001)")
        assert text.endswith("Plan: 3001 to add, 0 to change, 30 to delete.\n")


def test_a_small_plan_is_shown_whole():
    plan, _ = big_plan(3)
    text = render_markdown(plan)
    assert "not shown" not in text
    assert text.count("#### `+`") == 4
    assert text.count("#### `-`") == 30


def test_plan_json_carries_the_default_warning_as_a_note(tmp_path):
    write_manifest(tmp_path / "q.yaml",
                   "entities:\n  - user: <default>\n    quotas: {producer_byte_rate: 1}\n")
    snapshot = tmp_path / "s.json"
    snapshot.write_text(json.dumps({"format_version": 1, "cluster_id": "c", "entities": []}))
    result = run_cli("plan", tmp_path / "q.yaml", "--state", snapshot, "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert any("{user=<default>}" in n and "affects every principal" in n for n in result.json["notes"])
    md = run_cli("plan", tmp_path / "q.yaml", "--state", snapshot, "--format", "markdown")
    assert "> - warning: the change to {user=<default>}" in md.stdout
    gh = run_cli("plan", tmp_path / "q.yaml", "--state", snapshot, "--format", "github")
    assert gh.stdout.splitlines()[0].startswith(f"::notice title=kqplan create,file={tmp_path / 'q.yaml'}")
    assert gh.stdout.endswith("::notice title=kqplan plan::Plan: 1 to add, 0 to change, 0 to delete.\n")
