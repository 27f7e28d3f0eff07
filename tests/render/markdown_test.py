"""Plan Markdown as a PR comment: bounded size, summary first, deletes set apart, warnings inside."""

from __future__ import annotations

import json

from kqplan.core.entity import Entity
from kqplan.core.impact import blast_radius
from kqplan.core.ownership import Ownership, ScopePattern
from kqplan.core.plan import ClusterRef, apply_ops, diff
from kqplan.core.principals import Principal
from kqplan.render.markdown import render_markdown
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
        # as source: a backslash before "]" (no link) and "_" (no emphasis); rendered, the same text
        assert "warning[KQP170\\] producer\\_byte\\_rate of {client-id=a} never takes effect" in text
        assert "**Blast radius:** 1 principal changes effective quota" in text
        assert "not managed by these manifests" in text
        assert "`{user=stray}`" in text
        assert "more changes are not shown here** (comment size limit); see every change in the plan " \
               "artifact `plan.json`." in text
        assert text.index("Deletes (30)") < text.index("Adds and changes (3001)")
        assert text.endswith("Plan: 3001 to add, 0 to change, 30 to delete.\n")


def test_a_30000_entity_plan_with_thousands_of_notes_and_principals_stays_under_the_limit():
    from dataclasses import replace

    plan, actual = big_plan(30_000)
    notes = tuple(f"q.yaml:{i}:5: warning[KQP170] producer_byte_rate of {{client-id=c{i}}} never takes effect"
                  for i in range(5000))
    plan = replace(plan, notes=notes, unmanaged=tuple((Entity.user(f"stray{i}"), {"request_percentage": 1.0})
                                                      for i in range(2000)))
    principals = [Principal(f"p{i}", "app") for i in range(3000)] + [Principal("u00001", "app")]
    impact = blast_radius(actual, apply_ops(actual, plan.changes), principals)
    assert len(impact.principals) == 3001
    text = render_markdown(plan, artifact="plan.json", impact=impact)
    assert len(text) <= 60_000
    assert text.startswith("### kqplan: 30001 to add, 0 to change, 30 to delete\n")
    assert "> - q.yaml:0:5: warning[KQP170\\] producer\\_byte\\_rate" in text
    shown = text.count("warning[KQP170\\]")
    assert 100 < shown < 5000
    assert (f"> - … and {5000 - shown} more notes (all of them are in the plan artifact `plan.json`, "
            "`notes`)") in text
    rows = text.count("| `{user=p")  # one changed key each; the table is cut with a count
    assert 100 < rows < 3000
    assert f"… and {3001 - rows} more principals." in text
    assert "2000 entities on the cluster are not managed by these manifests" in text
    assert "- … the plan JSON lists all 2000 (`unmanaged`)" in text
    assert text.count("#### `-`") == 30  # deletes come first and fit
    assert "more changes are not shown here** (comment size limit); see every change in the plan " \
           "artifact `plan.json`." in text
    assert text.endswith("Plan: 30001 to add, 0 to change, 30 to delete.\n")


def test_principals_that_lose_a_limit_come_first():
    actual = {Entity.user("b"): {"producer_byte_rate": 20.0}, Entity.user("z"): {"producer_byte_rate": 10.0}}
    desired = {Entity.user("b"): {"producer_byte_rate": 30.0}}
    own = Ownership.of([(True, [ScopePattern.of({"user": "z"})])])  # {user=z} is pruned: z loses its limit
    plan = diff(desired, actual, own, cluster=ClusterRef("c", "h:1"), fingerprint=None)
    impact = blast_radius(actual, apply_ops(actual, plan.changes), [Principal("b", "x"), Principal("z", "x")])
    text = render_markdown(plan, impact=impact)
    lose = "| `{user=z, client-id=x}` | `producer_byte_rate` | 10 {user=z} | unlimited |"
    gain = "| `{user=b, client-id=x}` | `producer_byte_rate` | 20 {user=b} | 30 {user=b} |"
    assert text.index(lose) < text.index(gain)


def test_plain_text_cannot_open_html_or_mention_anyone():
    plan, _ = big_plan(1)
    from dataclasses import replace

    plan = replace(plan, notes=("{user=</details><img src=x>} by @platform-team & co | x",))
    text = render_markdown(plan)
    assert "> - {user=&lt;/details&gt;&lt;img src=x&gt;} by &#64;platform-team &amp; co \\| x\n" in text
    assert text.count("<details>") == text.count("</details>")


def test_names_with_backticks_and_pipes_are_shown_exactly():
    names = ["a`b", "a'b", "``x", "p|q"]
    plan = diff({Entity.user(n): {"producer_byte_rate": 1.0} for n in names}, {}, Ownership(),
                cluster=ClusterRef("c", "h:1"), fingerprint=None)
    text = render_markdown(plan)
    assert "#### `+` `` {user=a`b} `` (create)" in text
    assert "#### `+` `{user=a'b}` (create)" in text  # another name, and it looks different
    assert "#### `+` ``` {user=``x} ``` (create)" in text
    assert "#### `+` `{user=p|q}` (create)" in text  # no table here: no escape


def test_very_long_names_are_cut_at_the_limit_with_a_notice():
    long = "x" * 5000
    desired = {Entity.user(f"{long}{i}"): {"producer_byte_rate": 1.0} for i in range(40)}
    actual = {Entity.user(f"{long}old{i}"): {"producer_byte_rate": 1.0} for i in range(40)}
    own = Ownership.of([(True, [ScopePattern.of({"user": "x*"})])])
    plan = diff(desired, actual, own, cluster=ClusterRef("c", "h:1"), fingerprint=None)
    text = render_markdown(plan, max_chars=20_000)
    assert len(text) <= 20_000
    assert text.endswith("**This comment was cut at the size limit**; the plan JSON has everything.\n")
    assert text.count("<details>") == text.count("</details>")


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
    # as text, not as an HTML tag GitHub would drop
    assert "> - warning: the change to {user=&lt;default&gt;}" in md.stdout
    gh = run_cli("plan", tmp_path / "q.yaml", "--state", snapshot, "--format", "github")
    assert gh.stdout.splitlines()[0].startswith(f"::notice title=kqplan create,file={tmp_path / 'q.yaml'}")
    assert gh.stdout.endswith("::notice title=kqplan plan::Plan: 1 to add, 0 to change, 0 to delete.\n")
