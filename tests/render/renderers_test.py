"""Renderers: whole-string text output, Markdown, and agreement of all three with the JSON."""

from __future__ import annotations

import json

import pytest

from kqplan.config.find import find_config
from kqplan.core.plan import ClusterRef, diff
from kqplan.core.state import fingerprint
from kqplan.manifest.compile import load_desired
from kqplan.render.json import render_json
from kqplan.render.markdown import render_markdown
from kqplan.render.text import render_text, show_value
from kqplan.snapshot.file import read_snapshot
from tests.helpers import REPO, entity

EXAMPLE = REPO / "examples" / "payments"


@pytest.fixture
def example_plan(monkeypatch):
    monkeypatch.chdir(REPO)
    desired = load_desired([EXAMPLE.relative_to(REPO)], find_config(EXAMPLE))
    actual, cid = read_snapshot((EXAMPLE / "snapshot.json").relative_to(REPO))
    return diff(desired.quotas, actual, desired.ownership, cluster=ClusterRef(cid, "snapshot:s.json"),
                fingerprint=fingerprint(actual))


def test_text_is_terraform_like(example_plan):
    assert render_text(example_plan) == """\
kqplan will perform the following actions on cluster kqplan-example-prod-eu (snapshot:s.json):

  + {ip=10.0.0.7}
      + connection_creation_rate = 50

  ~ {user=payments-api, client-id=batch-loader}
      - request_percentage = 10

  ~ {user=payments-api}
      ~ producer_byte_rate = 20971520 (20 MiB) -> 52428800 (50 MiB)
      + request_percentage = 25

  + {user=payments-ledger}
      + consumer_byte_rate = 20971520 (20 MiB)
      + producer_byte_rate = 10485760 (10 MiB)

  - {user=payments-old-batch}
      - producer_byte_rate = 1048576 (1 MiB)

1 entity on the cluster is not managed by these manifests (left untouched; adopt with `kqplan import`):
  ? {user=analytics}

Plan: 2 to add, 2 to change, 1 to delete.
"""


def test_text_colours_markers_and_names_origins(example_plan):
    from dataclasses import replace

    first = replace(example_plan.changes[0], origin="overlays/prod/q.yaml (overrides base/q.yaml)")
    plan = replace(example_plan, changes=(first, *example_plan.changes[1:]),
                   cluster=replace(example_plan.cluster, version="4.3", mode="kraft"))
    text = render_text(plan, color=True)
    assert text.splitlines()[0] == ("kqplan will perform the following actions on cluster "
                                    "kqplan-example-prod-eu (snapshot:s.json), Kafka 4.3 (kraft):")
    assert "  \x1b[32m+\x1b[0m {ip=10.0.0.7}  # overlays/prod/q.yaml (overrides base/q.yaml)\n" in text
    assert "      \x1b[31m-\x1b[0m producer_byte_rate = 1048576 (1 MiB)\n" in text
    assert "\x1b[" not in render_text(plan)


def test_text_and_markdown_agree_with_json(example_plan):
    doc = json.loads(render_json(example_plan))
    text, md = render_text(example_plan), render_markdown(example_plan)
    s = doc["summary"]
    line = f"Plan: {s['add']} to add, {s['change']} to change, {s['delete']} to delete."
    assert text.rstrip().endswith(line)
    assert md.rstrip().endswith(line)
    for change in doc["changes"]:
        marker = {"create": "+", "update": "~", "delete": "-"}[change["action"]]
        assert f"  {marker} {change['display']}\n" in text
        assert f"#### `{marker}` `{change['display']}` ({change['action']})" in md
        for op in change["ops"]:
            assert f"`{op['key']}`" in md
            assert f" {op['key']} = " in text
    assert "<details><summary>" in md
    assert "</details>" in md


def test_json_is_design_3_3(example_plan):
    doc = json.loads(render_json(example_plan))
    assert doc["format_version"] == 1
    assert doc["cluster"] == {"id": "kqplan-example-prod-eu", "bootstrap": "snapshot:s.json",
                              "version": None, "mode": None}
    assert doc["summary"] == {"add": 2, "change": 2, "delete": 1, "unchanged": 2}
    first = doc["changes"][0]
    assert set(first) == {"entity", "display", "action", "before", "after", "ops", "origin", "metadata"}
    assert first == {"entity": {"ip": "10.0.0.7"}, "display": "{ip=10.0.0.7}", "action": "create",
                     "before": None, "after": {"connection_creation_rate": 50.0},
                     "ops": [{"key": "connection_creation_rate", "value": 50.0, "remove": False}],
                     "origin": None, "metadata": None}


def test_no_changes():
    e = entity(user="a")
    plan = diff({e: {"producer_byte_rate": 1.0}}, {e: {"producer_byte_rate": 1.0}},
                __import__("kqplan.core.ownership").core.ownership.Ownership(),
                cluster=ClusterRef("c", "snapshot:x"), fingerprint="f")
    assert render_text(plan) == ("No changes. The cluster matches the manifests. "
                                 "(1 entity checked on cluster c (snapshot:x))\n")
    assert render_markdown(plan).startswith("### kqplan: no changes\n")


@pytest.mark.parametrize(("key", "value", "shown"), [
    ("producer_byte_rate", 1048576.0, "1048576 (1 MiB)"),
    ("producer_byte_rate", 1536.0, "1536 (1.5 KiB)"),
    ("producer_byte_rate", 1000000.0, "1000000 (≈976.56 KiB)"),
    ("producer_byte_rate", 512.0, "512"),
    ("request_percentage", 12.5, "12.5"),
    ("request_percentage", 200.0, "200"),
    ("producer_byte_rate", 1235.0000001, "1235.0000001 (≈1.21 KiB)"),
])
def test_values_show_raw_numbers_with_units(key, value, shown):
    assert show_value(key, value) == shown


def test_apply_report_colours_markers_and_failures(example_plan):
    from kqplan.core.report import ApplyReport, Outcome, Status
    from kqplan.render.apply import render_apply

    first, second = example_plan.changes[:2]
    report = ApplyReport(example_plan.cluster, (Outcome(first, Status.APPLIED),
                                                Outcome(second, Status.FAILED, 42, "no")),
                         preflight_failed=False, batches=1, requests={"alter": 1})
    plain = render_apply(report)
    assert plain == ("  + {ip=10.0.0.7}: applied\n"
                     "  ~ {user=payments-api, client-id=batch-loader}: failed: INVALID_REQUEST: no\n"
                     "Apply incomplete: 1 of 2 entities applied; 1 failed. Run apply again to converge.\n")
    coloured = render_apply(report, color=True)
    assert coloured.splitlines()[0] == "  \x1b[32m+\x1b[0m {ip=10.0.0.7}: applied"
    assert coloured.splitlines()[1].startswith(
        "  \x1b[33m~\x1b[0m {user=payments-api, client-id=batch-loader}: \x1b[31mfailed\x1b[0m")
