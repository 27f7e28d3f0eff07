"""The JSON Schemas of kqplan's machine formats hold for real outputs, produced over TCP, and are not
stale: every property a schema declares shows up in those outputs (``additionalProperties: false``
catches the other direction), and the enums are the code's."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import jsonschema
import pytest

from kqplan.core.diagnostics import Severity
from kqplan.core.entity import Entity
from kqplan.core.plan import Action
from kqplan.core.report import Status
from kqplan.sandbox import Fault, Sandbox, SandboxConfig
from tests.helpers import REPO, run_cli, write_manifest

NAMES = ("plan", "report", "errors")


def schema(name: str) -> dict:
    doc = json.loads((REPO / "schemas" / f"{name}-v1.json").read_text())
    jsonschema.Draft202012Validator.check_schema(doc)
    return doc


def seen_properties(root: dict, instance: Any, seen: dict[str, set[str]]) -> None:
    """Record, per object schema (by JSON pointer), which of its properties ``instance`` uses."""

    def walk(node: dict, pointer: str, value: Any) -> None:
        while "$ref" in node:
            pointer = node["$ref"][1:]
            node = root
            for part in pointer.strip("/").split("/"):
                node = node[part]
        for word in ("oneOf", "anyOf"):
            for i, branch in enumerate(node.get(word, ())):
                if jsonschema.Draft202012Validator(branch | {"$defs": root.get("$defs", {})}).is_valid(value):
                    walk(branch, f"{pointer}/{word}/{i}", value)
        if isinstance(value, dict):
            for key, item in value.items():
                if key in node.get("properties", {}):
                    seen[pointer].add(key)
                    walk(node["properties"][key], f"{pointer}/properties/{key}", item)
                elif isinstance(node.get("additionalProperties"), dict):
                    walk(node["additionalProperties"], f"{pointer}/additionalProperties", item)
        elif isinstance(value, list) and isinstance(node.get("items"), dict):
            for item in value:
                walk(node["items"], f"{pointer}/items", item)

    walk(root, "", instance)


def declared_properties(root: dict) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}

    def walk(node: Any, pointer: str) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("properties"), dict):
                found[pointer] = set(node["properties"])
            for key, child in node.items():
                walk(child, f"{pointer}/{key}")
        elif isinstance(node, list):
            for i, child in enumerate(node):
                walk(child, f"{pointer}/{i}")

    walk(root, "")
    return {p: names for p, names in found.items() if not p.endswith("/properties")}


def real_outputs(tmp_path) -> dict[str, list[Any]]:
    """Every machine format, from real runs: plans (stdout and --out), apply reports (a success and
    a per-entity failure) and diagnostics (validate's list and an error object on stderr)."""
    outputs: dict[str, list[Any]] = defaultdict(list)
    seed = {Entity.user("old"): {"producer_byte_rate": 1.0},
            Entity.user("stray"): {"request_percentage": 1.0},
            Entity.user("b"): {"producer_byte_rate": 5.0}}
    with Sandbox.start(SandboxConfig(seed=seed, cluster_id="c")) as box:
        write_manifest(tmp_path / "q.yaml", "ownership: {prune: true, scope: [{user: 'old'}]}\nentities:\n"
                       "  - user: a\n    metadata: {labels: {team: x}, description: the a team}\n"
                       "    quotas: {producer_byte_rate: 1MiB}\n"
                       "  - user: b\n    quotas: {producer_byte_rate: 6}\n"
                       "  - user: <default>\n    quotas: {consumer_byte_rate: 1KiB}\n")
        kq = ["--bootstrap-server", box.bootstrap]
        plan = run_cli("plan", tmp_path / "q.yaml", *kq, "--format", "json", "--out", tmp_path / "p.json")
        assert plan.exit_code == 0, plan.stderr
        outputs["plan"] += [plan.json, json.loads((tmp_path / "p.json").read_text())]
        # with a forecast: a newly throttled bucket, a relieved one and a split measured bucket
        usage_file = tmp_path / "usage.csv"
        usage_file.write_text("cluster,user,client_id,bucket,producer_byte_rate,consumer_byte_rate\n"
                              "c,a,y,,2097152,\nc,b,x,,5.5,\nc,,app,client-id,,5000\n")
        forecast = run_cli("plan", tmp_path / "q.yaml", *kq, "--format", "json", "--usage", usage_file)
        assert forecast.exit_code == 0, forecast.stderr
        usage = forecast.json["usage"]
        assert [len(usage[k]) for k in ("throttled", "relieved", "split_unknown")] == [1, 1, 5], usage
        outputs["plan"].append(forecast.json)
        assert plan.json["unmanaged"]
        assert plan.json["notes"]
        assert {c["action"] for c in plan.json["changes"]} == {"create", "update", "delete"}
        applied = run_cli("apply", "--plan", tmp_path / "p.json", *kq, "--auto-approve", "--format", "json")
        assert applied.exit_code == 0, applied.stderr
        outputs["report"].append(applied.json)

        write_manifest(tmp_path / "q.yaml", "entities:\n  - user: a\n    quotas: {producer_byte_rate: 2}\n")
        box.faults.add(Fault("alter", error_code=42, error_message="no",
                             entities=frozenset({Entity.user("a")})))
        failed = run_cli("apply", tmp_path / "q.yaml", *kq, "--auto-approve", "--format", "json")
        assert failed.exit_code == 1, failed.stderr
        assert any(e["error"] for e in failed.json["entities"])
        outputs["report"].append(failed.json)

    outputs["report"] += enforcement_reports(tmp_path)
    outputs["plan"] += inventory_plans(tmp_path / "inventory")

    bad = tmp_path / "bad"
    write_manifest(bad / "bad.yaml", "entities:\n  - user: a\n    quotas: {producer_byte_rat: 1}\n")
    write_manifest(bad / "dup.yaml", "entities:\n  - user: b\n    quotas: {producer_byte_rate: 1}\n"
                   "  - user: b\n    quotas: {producer_byte_rate: 2}\n")
    diags = run_cli("validate", bad, "--format", "json")
    assert diags.exit_code == 1
    assert any(d["related"] for d in diags.json)
    error = run_cli("plan", bad / "bad.yaml", "--state", tmp_path / "none.json", "--format", "json")
    assert error.exit_code == 1
    outputs["errors"] += [diags.json, json.loads(error.stderr)]
    return outputs


def inventory_plans(root) -> list[Any]:
    """Plans of an inventory cluster (its name), with an expiry that causes a change (expired_at)
    and a blast radius (--principals: impact)."""
    import os
    from unittest import mock

    with Sandbox.start(SandboxConfig(seed={Entity.user("tmp"): {"producer_byte_rate": 1.0},
                                           Entity.user("p"): {"producer_byte_rate": 5.0}},
                                     cluster_id="west-id")) as box:
        write_manifest(root / "west" / "q.yaml", "ownership: {prune: true, scope: [{user: 'tmp'}]}\n"
                       "entities:\n  - user: tmp\n    expires: 2026-06-01\n"
                       "    quotas: {producer_byte_rate: 1}\n"
                       "  - user: p\n    quotas: {producer_byte_rate: 7}\n")
        (root / "kqplan.toml").write_text(f'[clusters.west]\nid = "west-id"\nbootstrap-server = '
                                          f'"{box.bootstrap}"\nmanifests = ["west"]\n')
        (root / "who.csv").write_text("user,client-id\np,app\n")
        with mock.patch.dict(os.environ, {"KQPLAN_NOW": "2026-07-01T00:00Z"}):
            made = run_cli("--config", root / "kqplan.toml", "plan", "--cluster", "west", "--format", "json",
                           "--principals", root / "who.csv")
        assert made.exit_code == 0, made.stderr
        assert (made.json["cluster"]["name"], made.json["expired_at"]) == \
            ("west", {"{user=tmp}": "2026-06-01T00:00:00Z"})
        assert made.json["impact"]["principals"]
        return [made.json]


def enforcement_reports(tmp_path) -> list[Any]:
    """Apply reports with ``enforcement``: a watch that decided (a sandbox whose brokers report sensor
    windows of seconds, a Prometheus reading a steady bucket), and one Prometheus stopped answering."""
    from tests.metrics.server import serve, steady

    small = {"quota.window.num": "2", "quota.window.size.seconds": "1", "metrics.num.samples": "2",
             "metrics.sample.window.ms": "1000"}
    reports = []
    for failing in (False, True):
        seed = {Entity.user("u"): {"producer_byte_rate": 100_000.0}}
        with Sandbox.start(SandboxConfig(seed=seed, broker_configs=small)) as box, \
                serve(steady({"user": "u"}, 50_000.0, fail_samples=failing)) as served:
            manifest = write_manifest(tmp_path / "e" / "q.yaml",
                                      "entities:\n  - user: u\n    quotas: {producer_byte_rate: 25600}\n")
            applied = run_cli("apply", manifest, "--bootstrap-server", box.bootstrap, "--auto-approve",
                              "--format", "json", "--verify-enforcement", "--prometheus", served.url)
        assert applied.exit_code == 1, applied.stderr  # contradicted, or the watch failed
        reports.append(json.loads(applied.stdout))
    assert [r["enforcement"]["status"] for r in reports] == ["verified", "failed"]
    return reports


def test_plan_report_and_errors_match_their_schemas_and_use_every_property(tmp_path):
    outputs = real_outputs(tmp_path)
    for name in NAMES:
        doc = schema(name)
        seen: dict[str, set[str]] = defaultdict(set)
        for instance in outputs[name]:
            jsonschema.validate(instance, doc)
            seen_properties(doc, instance, seen)
        unused = {p: sorted(names - seen[p]) for p, names in declared_properties(doc).items()
                  if names - seen[p]}
        assert not unused, f"schemas/{name}-v1.json declares properties no output has (stale?): {unused}"


def test_the_schemas_enums_are_the_codes():
    plan, report, errors = (schema(n) for n in NAMES)
    assert plan["$defs"]["change"]["properties"]["action"]["enum"] == [a.value for a in Action]
    entity = report["properties"]["entities"]["items"]["properties"]
    assert entity["action"]["enum"] == [a.value for a in Action]
    assert entity["status"]["enum"] == [s.value for s in Status]
    assert errors["$defs"]["diagnostic"]["properties"]["severity"]["enum"] == [s.value for s in Severity]


@pytest.mark.parametrize("name", ["manifest", *NAMES])
def test_kqplan_schema_prints_the_checked_in_schemas(name):
    result = run_cli("schema", name)
    assert result.exit_code == 0
    assert json.loads(result.stdout) == json.loads((REPO / "schemas" / f"{name}-v1.json").read_text())
