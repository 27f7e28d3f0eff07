"""The checked-in JSON Schema is generated from the models, and examples conform to it."""

from __future__ import annotations

import json

import jsonschema
import pytest
import yaml

from kqplan.manifest.intent import json_schema as tests_schema
from kqplan.manifest.models import json_schema
from tests.helpers import REPO

SCHEMA = REPO / "schemas" / "manifest-v1.json"
TESTS_SCHEMA = REPO / "schemas" / "quota-tests-v1.json"
EXAMPLES = sorted((REPO / "examples").rglob("*.yaml"))


def test_checked_in_schema_is_not_stale():
    assert json.loads(SCHEMA.read_text()) == json_schema(), (
        "schemas/manifest-v1.json is stale: run `kqplan schema > schemas/manifest-v1.json`")
    assert json.loads(TESTS_SCHEMA.read_text()) == tests_schema(), (
        "schemas/quota-tests-v1.json is stale: run `kqplan schema quota-tests > schemas/quota-tests-v1.json`")


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(REPO)))
def test_examples_carry_the_modeline_and_conform(path):
    first = path.read_text().splitlines()[0]
    doc = yaml.safe_load(path.read_text())
    wanted = TESTS_SCHEMA if doc.get("kind") == "QuotaTests" else SCHEMA
    # the schema path is relative to the file: one "../" per directory below the repository root
    relative = "../" * (len(path.relative_to(REPO).parts) - 1) + f"schemas/{wanted.name}"
    assert first == f"# yaml-language-server: $schema={relative}"
    assert (path.parent / relative).resolve() == wanted
    jsonschema.validate(doc, json.loads(wanted.read_text()))


def test_schema_rejects_what_kqplan_rejects_in_shape():
    schema = json.loads(SCHEMA.read_text())
    bad = {"apiVersion": "kqplan/v1", "kind": "ClientQuotas", "entites": []}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"apiVersion": "kqplan/v1", "kind": "ClientQuotas",
                             "entities": [{"user": "a", "quotas": {"producer_byte_rate": "10Mb"}}]},
                            schema)


def test_the_tests_schema_rejects_what_kqplan_rejects_in_shape():
    schema = json.loads(TESTS_SCHEMA.read_text())
    for bad in ({"apiVersion": "kqplan/v1", "kind": "QuotaTests", "tests": []},
                {"apiVersion": "kqplan/v1", "kind": "QuotaTests",
                 "tests": [{"name": "a", "principle": {"user": "a"}, "expect": {"producer_byte_rate": 1}}]},
                {"apiVersion": "kqplan/v1", "kind": "QuotaTests",
                 "tests": [{"name": "a", "principal": {"user": "a"},
                            "expect": {"producer_byte_rate": {"at-mst": 1}}}]}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
