"""Cluster-wide budgets (``{per-cluster: …}``) in compile (entries, overrides, profiles, problems), in
``kqplan fmt`` (kept, values normalised, ``expires:`` kept in place) and in the JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from kqplan.config.model import ProjectConfig
from kqplan.core.entity import Entity
from kqplan.manifest.compile import load_desired
from kqplan.manifest.fmt import format_text
from tests.helpers import REPO, run_cli, write_manifest

P, C, R = "producer_byte_rate", "consumer_byte_rate", "request_percentage"
MIB = 1024.0 * 1024
A = Entity.user("a")


def compiled(tmp_path: Path, *layers: str):
    paths = [write_manifest(tmp_path / f"l{i}" / "q.yaml", body).parent for i, body in enumerate(layers)]
    return load_desired(paths, ProjectConfig())


def test_budgets_are_kept_apart_from_per_broker_values(tmp_path):
    state = compiled(tmp_path, "entities:\n  - user: a\n    quotas: {producer_byte_rate: "
                     "{per-cluster: 300MiB}, request_percentage: 5}\n"
                     "  - user: b\n    quotas:\n      consumer_byte_rate:\n        per-cluster: 1GiB\n")
    assert state.errors == []
    assert state.quotas == {A: {R: 5.0}, Entity.user("b"): {}}
    assert state.budgets == {A: {P: 300 * MIB}, Entity.user("b"): {C: 1024 * MIB}}


def test_an_override_turns_a_value_into_a_budget_and_back(tmp_path):
    base = ("entities:\n  - user: a\n"
            "    quotas: {producer_byte_rate: 1MiB, consumer_byte_rate: {per-cluster: 6MiB}}\n")
    over = ("entities:\n  - user: a\n    override: true\n"
            "    quotas: {producer_byte_rate: {per-cluster: 3MiB}, consumer_byte_rate: 2MiB}\n")
    state = compiled(tmp_path, base, over)
    assert (state.quotas[A], state.budgets[A]) == ({C: 2 * MIB}, {P: 3 * MIB})
    removed = "entities:\n  - user: a\n    override: true\n    quotas: {consumer_byte_rate: null}\n"
    state = compiled(tmp_path, base, removed)
    assert (state.quotas[A], A in state.budgets) == ({P: MIB}, False)


def test_profiles_may_hold_budgets(tmp_path):
    state = compiled(tmp_path, "profiles:\n"
                     "  big: {producer_byte_rate: {per-cluster: 1GiB}, request_percentage: 9}\n"
                     "entities:\n  - user: a\n    profile: big\n    quotas: {request_percentage: 10}\n")
    assert (state.quotas[A], state.budgets[A]) == ({R: 10.0}, {P: 1024 * MIB})


@pytest.mark.parametrize(("value", "code", "message"), [
    ("{per-clustr: 1MiB}", "KQP117", "has unknown field 'per-clustr'"),
    ("{}", "KQP117", "this one has no value"),
    ("{per-cluster: 1MiB, per-broker: 1}", "KQP117", "has unknown field 'per-broker'"),
    ("{per-cluster: 0}", "KQP112", "must be greater than 0"),
    ("{per-cluster: 10Mb}", "KQP116", "unknown byte unit 'Mb'"),
    ("{per-cluster: 1.5}", "KQP113", "is fractional"),
])
def test_a_bad_budget_is_located(tmp_path, value, code, message):
    state = compiled(tmp_path, f"entities:\n  - user: a\n    quotas: {{producer_byte_rate: {value}}}\n")
    assert [d.code for d in state.errors] == [code]
    assert message in state.errors[0].message
    assert state.errors[0].span.line == 5


def test_fmt_keeps_expires_and_budgets_and_normalises_their_values(tmp_path):
    text = ("apiVersion: kqplan/v1\nkind: ClientQuotas\nentities:\n"
            "  - quotas:\n      producer_byte_rate:\n        per-cluster: 314572800   # the ETL budget\n"
            "      consumer_byte_rate: {per-cluster: 1048576}\n    expires: 2026-12-01\n    protect: true\n"
            "    user: a\n"
            "  - user: b\n    expires: 2026-12-01T10:00Z\n"
            "    quotas: {request_percentage: {per-cluster: 60}}\n")
    assert format_text(text) == (
        "apiVersion: kqplan/v1\nkind: ClientQuotas\nentities:\n"
        "  - user: a\n    protect: true\n    expires: 2026-12-01\n    quotas:\n"
        "      consumer_byte_rate: {per-cluster: 1MiB}\n      producer_byte_rate:\n"
        "        per-cluster: 300MiB      # the ETL budget\n"
        "  - user: b\n    expires: 2026-12-01T10:00Z\n"
        "    quotas: {request_percentage: {per-cluster: 60}}\n")
    assert format_text(format_text(text)) == format_text(text)
    path = tmp_path / "q.yaml"
    path.write_text(text)
    assert run_cli("fmt", path).exit_code == 0
    again = load_desired([path], ProjectConfig(), now=None)
    assert again.budgets[A] == {P: 300 * MIB, C: MIB}
    assert [e.entity for e in again.expiring + again.expired] == [A, Entity.user("b")]


def test_the_json_schema_takes_budgets_and_expires():
    schema = json.loads((REPO / "schemas" / "manifest-v1.json").read_text())
    good = yaml.safe_load("apiVersion: kqplan/v1\nkind: ClientQuotas\nentities:\n  - user: a\n"
                          "    expires: '2026-12-01T10:00+02:00'\n"
                          "    quotas: {producer_byte_rate: {per-cluster: 300MiB}, "
                          "request_percentage: {per-cluster: 50}}\n")
    jsonschema.validate(good, schema)
    for bad in ({"producer_byte_rate": {"per-clustr": "300MiB"}},
                {"request_percentage": {"per-cluster": "1MiB"}}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**good, "entities": [{"user": "a", "quotas": bad}]}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**good, "entities": [{"user": "a", "expires": "next week", "quotas": {R: 1}}]},
                            schema)
