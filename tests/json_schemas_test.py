"""The JSON Schemas of kqplan's machine formats hold for real outputs, produced over TCP."""

from __future__ import annotations

import json

import jsonschema
import pytest

from kqplan.entity import Entity
from kqplan.sandbox import Sandbox, SandboxConfig
from tests.helpers import REPO, run_cli, write_manifest


def schema(name: str) -> dict:
    doc = json.loads((REPO / "schemas" / f"{name}-v1.json").read_text())
    jsonschema.Draft202012Validator.check_schema(doc)
    return doc


def test_plan_report_and_errors_match_their_schemas(tmp_path):
    seed = {Entity.user("old"): {"producer_byte_rate": 1.0},
            Entity.user("stray"): {"request_percentage": 1.0}}
    with Sandbox.start(SandboxConfig(seed=seed, cluster_id="c")) as box:
        write_manifest(tmp_path / "q.yaml", "ownership: {prune: true, scope: [{user: 'old'}]}\nentities:\n"
                       "  - user: a\n    metadata: {labels: {team: x}}\n"
                       "    quotas: {producer_byte_rate: 1MiB}\n"
                       "  - user: <default>\n    quotas: {consumer_byte_rate: 1KiB}\n")
        kq = ["--bootstrap-server", box.bootstrap]
        plan = run_cli("plan", tmp_path / "q.yaml", *kq, "--format", "json", "--out", tmp_path / "p.json")
        assert plan.exit_code == 0, plan.stderr
        jsonschema.validate(plan.json, schema("plan"))
        jsonschema.validate(json.loads((tmp_path / "p.json").read_text()), schema("plan"))
        assert plan.json["unmanaged"]
        assert plan.json["notes"]
        applied = run_cli("apply", "--plan", tmp_path / "p.json", *kq, "--auto-approve", "--format", "json")
        assert applied.exit_code == 0, applied.stderr
        jsonschema.validate(applied.json, schema("report"))
    (tmp_path / "bad.yaml").write_text("apiVersion: kqplan/v1\nkind: ClientQuotas\nentities:\n  - user: a\n"
                                       "    quotas: {producer_byte_rat: 1}\n")
    diags = run_cli("validate", tmp_path / "bad.yaml", "--format", "json")
    assert diags.exit_code == 1
    jsonschema.validate(diags.json, schema("errors"))
    error = run_cli("plan", tmp_path / "bad.yaml", "--state", tmp_path / "none.json", "--format", "json")
    assert error.exit_code == 1
    jsonschema.validate(json.loads(error.stderr), schema("errors"))


@pytest.mark.parametrize("name", ["manifest", "plan", "report", "errors"])
def test_kqplan_schema_prints_the_checked_in_schemas(name):
    result = run_cli("schema", name)
    assert result.exit_code == 0
    assert json.loads(result.stdout) == json.loads((REPO / "schemas" / f"{name}-v1.json").read_text())
