"""Safe rollout end to end, over TCP against the sandbox: temporary quotas (``expires:``) revert by
themselves and make a saved plan stale, budgets are divided by the broker count the cluster
reports (``SandboxConfig(brokers=N)``), protected principals stop a plan (KQP157); in plan text,
Markdown and JSON."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kqplan.core.entity import Entity
from kqplan.sandbox import Sandbox, SandboxConfig
from tests.helpers import run_cli, write_manifest

MIB = 1024.0 * 1024
P = "producer_byte_rate"
BASE = "entities:\n  - user: pay\n    quotas: {producer_byte_rate: 10MiB}\n"
RAISE = ("entities:\n  - user: pay\n    override: true\n    expires: 2026-12-01\n"
         "    quotas: {producer_byte_rate: 50MiB}\n")


@pytest.fixture
def box() -> Iterator[Sandbox]:
    with Sandbox.start(SandboxConfig(cluster_id="c", brokers=3)) as sandbox:
        yield sandbox


def layers(tmp_path: Path) -> list[Path]:
    write_manifest(tmp_path / "base" / "q.yaml", BASE)
    write_manifest(tmp_path / "over" / "q.yaml", RAISE)
    return [tmp_path / "base", tmp_path / "over"]


def plan(box: Sandbox, *args: str | Path):
    return run_cli("plan", *args, "--bootstrap-server", box.bootstrap)


def test_a_temporary_raise_applies_then_reverts_by_itself(tmp_path, box, monkeypatch):
    paths = layers(tmp_path)
    monkeypatch.setenv("KQPLAN_NOW", "2026-11-30T12:00Z")
    raised = run_cli("apply", *paths, "--bootstrap-server", box.bootstrap, "--auto-approve")
    assert raised.exit_code == 0, raised.stderr
    assert "# over/q.yaml" not in raised.stdout  # paths outside the current directory are absolute
    assert f"; expires 2026-12-01T00:00Z\n      + {P} = 52428800 (50 MiB)\n" in raised.stdout
    assert box.state[Entity.user("pay")] == {P: 50 * MIB}

    monkeypatch.setenv("KQPLAN_NOW", "2026-12-01")  # exactly at the expiry: expired
    text = plan(box, *paths, "--detailed-exitcode")
    assert text.exit_code == 2, text.stderr
    assert (f"  ~ {{user=pay}}  # {paths[0] / 'q.yaml'}:4:5; override expired 2026-12-01T00:00Z "
            f"({paths[1] / 'q.yaml'}:4:5)\n      ~ {P} = 52428800 (50 MiB) -> 10485760 (10 MiB)\n"
            ) in text.stdout
    doc = plan(box, *paths, "--format", "json").json
    assert (doc["now"], doc["valid_until"]) == ("2026-12-01T00:00:00Z", None)
    why = f"override expired 2026-12-01T00:00Z ({paths[1] / 'q.yaml'}:4:5)"
    assert doc["expired"] == {"{user=pay}": [why]}
    assert doc["expiring"] == {}
    markdown = plan(box, *paths, "--format", "markdown").stdout
    assert "— override expired 2026-12-01T00:00Z" in markdown
    reverted = run_cli("apply", *paths, "--bootstrap-server", box.bootstrap, "--auto-approve")
    assert reverted.exit_code == 0, reverted.stderr
    assert box.state[Entity.user("pay")] == {P: 10 * MIB}


@pytest.mark.parametrize("prune", [True, False])
def test_an_expired_entity_is_deleted_under_prune_and_left_alone_without(tmp_path, prune, monkeypatch):
    scope = "ownership: {prune: true, scope: [{user: 'tmp-*'}]}\n" if prune else ""
    path = write_manifest(tmp_path / "q.yaml", scope + "entities:\n  - user: tmp-load\n"
                          "    expires: 2026-12-01T10:00+02:00\n    quotas: {producer_byte_rate: 1MiB}\n")
    seed = {Entity.user("tmp-load"): {P: MIB}}
    monkeypatch.setenv("KQPLAN_NOW", "2026-12-01T08:00Z")
    with Sandbox.start(SandboxConfig(seed=seed, cluster_id="c")) as sandbox:
        result = plan(sandbox, path)
        assert result.exit_code == 0, result.stderr
        if prune:
            assert f"  - {{user=tmp-load}}  # expired 2026-12-01T08:00Z ({path}:5:5)\n" in result.stdout
            assert "Plan: 0 to add, 0 to change, 1 to delete." in result.stdout
        else:
            assert "No changes." in result.stdout
            assert (f"{{user=tmp-load}}: the entry at {path}:4:5 expired 2026-12-01T08:00Z and no longer "
                    "applies; remove it from the manifests. It is left on the cluster (no ownership scope "
                    "with prune covers it).") in result.stdout
            assert "  ? {user=tmp-load}" in result.stdout
        monkeypatch.setenv("KQPLAN_NOW", "2026-12-01T07:59:59Z")  # a second before: in effect
        assert "No changes." in plan(sandbox, path).stdout


def test_a_saved_plan_is_stale_once_an_entry_of_it_expired(tmp_path, box, monkeypatch):
    paths = layers(tmp_path)
    monkeypatch.setenv("KQPLAN_NOW", "2026-11-30T23:00Z")
    out = tmp_path / "plan.json"
    assert plan(box, *paths, "--out", out).exit_code == 0
    assert json.loads(out.read_text())["valid_until"] == "2026-12-01T00:00:00Z"
    monkeypatch.setenv("KQPLAN_NOW", "2026-12-01T00:00Z")
    stale = run_cli("apply", "--plan", out, "--bootstrap-server", box.bootstrap, "--auto-approve")
    assert (stale.exit_code, stale.stderr) == (1, (
        "Error: plan is stale: an entry of it expired at 2026-12-01T00:00Z (the plan was made at "
        "2026-11-30T23:00Z); nothing was changed\n  = help: make a new plan (`kqplan plan --out FILE`): "
        "expired entries are left out of it (an override falls back to the layer beneath)\n"))
    assert box.state == {}
    monkeypatch.setenv("KQPLAN_NOW", "2026-11-30T23:59:59Z")
    again = run_cli("apply", "--plan", out, "--bootstrap-server", box.bootstrap, "--auto-approve")
    assert again.exit_code == 0


def test_validate_refuses_expired_entries_and_warns_of_the_ones_expiring_soon(tmp_path, monkeypatch):
    paths = layers(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KQPLAN_NOW", "2026-11-25")
    soon = run_cli("validate", "base", "over")
    assert soon.exit_code == 0
    assert ("over/q.yaml:6:14: warning[KQP161] the override of {user=pay} expires 2026-12-01T00:00Z, "
            "within 7d (the default [policy] expiry-warning; set it in kqplan.toml to change it); from then "
            "on {user=pay} falls back to the layer beneath"
            ) in soon.stdout
    monkeypatch.setenv("KQPLAN_NOW", "2026-12-02")
    gone = run_cli("validate", "base", "over")
    assert gone.exit_code == 1
    assert gone.stdout.startswith("over/q.yaml:6:14: error[KQP158] the override of {user=pay} expired "
                                  "2026-12-01T00:00Z and no longer applies: {user=pay} falls back to the "
                                  "layer beneath\n")
    (tmp_path / "kqplan.toml").write_text('[policy]\nmax-expiry = "3d"\nexpiry-warning = "1d"\n')
    monkeypatch.setenv("KQPLAN_NOW", "2026-11-25")
    far = run_cli("validate", "base", "over")
    assert far.exit_code == 1
    assert "error[KQP159] {user=pay} expires 2026-12-01T00:00Z, further ahead than 3d" in far.stdout
    assert paths


DEFAULT_WARNING = "the default [policy] expiry-warning; set it in kqplan.toml to change it"


@pytest.mark.parametrize(("config", "named"), [
    (None, DEFAULT_WARNING), ("", DEFAULT_WARNING), ('[clusters]\n', DEFAULT_WARNING),
    ('[policy]\nmax-expiry = "90d"\n', DEFAULT_WARNING),
    ('[policy]\nexpiry-warning = "7d"\n', "[policy] expiry-warning in kqplan.toml"),
], ids=["no-kqplan-toml", "empty-kqplan-toml", "no-policy-table", "policy-without-it", "set-to-7d"])
def test_kqp161_names_the_default_unless_kqplan_toml_sets_it(tmp_path, monkeypatch, config, named):
    """KQP161 blamed ``[policy] expiry-warning in kqplan.toml`` for the 7-day default too: with no
    kqplan.toml, one without ``[policy]``, or a ``[policy]`` without the setting. Only a kqplan.toml
    that sets it (to 7d as well) is named as where it is set."""
    layers(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KQPLAN_NOW", "2026-11-25")
    if config is not None:
        (tmp_path / "kqplan.toml").write_text(config)
    soon = run_cli("validate", "base", "over")
    assert soon.exit_code == 0, soon.stdout + soon.stderr
    assert (f"warning[KQP161] the override of {{user=pay}} expires 2026-12-01T00:00Z, within 7d ({named}); "
            "from then on {user=pay} falls back to the layer beneath") in soon.stdout


def test_a_bad_clock_is_an_error_not_a_traceback(tmp_path, box, monkeypatch):
    paths = layers(tmp_path)
    monkeypatch.setenv("KQPLAN_NOW", "next tuesday")
    result = plan(box, *paths)
    assert (result.exit_code, result.stderr) == (1, (
        "Error: KQPLAN_NOW: 'next tuesday' is not a date or an ISO 8601 datetime\n  = help: set it to e.g. "
        "2026-12-01 or 2026-12-01T18:00Z, or unset it to use the system clock\n"))


# -- budgets -------------------------------------------------------------------------------------------

BUDGET = ("entities:\n  - user: etl\n    quotas:\n      producer_byte_rate: {per-cluster: 300MiB}\n"
          "      request_percentage: {per-cluster: 100}\n      consumer_byte_rate: 1MiB\n")


def test_a_budget_is_divided_by_the_brokers_the_cluster_reports(tmp_path, box):
    path = write_manifest(tmp_path / "q.yaml", BUDGET)
    text = plan(box, path)
    assert text.exit_code == 0, text.stderr
    assert (f"      + {P} = 104857600 (100 MiB)  # 300 MiB per cluster ÷ 3 brokers = 100 MiB per broker\n"
            "      + request_percentage = 33.333333333333336  # 100 per cluster ÷ 3 brokers = "
            "33.333333333333336 per broker\n") in text.stdout
    assert "      + consumer_byte_rate = 1048576 (1 MiB)\n" in text.stdout
    assert ("2 quota values are cluster-wide budgets, divided by 3 brokers (rounded down for whole-number "
            "keys); a change in the broker count changes the plan.") in text.stdout
    doc = plan(box, path, "--format", "json").json
    assert doc["cluster"]["brokers"] == 3
    assert doc["budgets"] == {"{user=etl}": {P: 300 * MIB, "request_percentage": 100.0}}
    assert set(doc["changes"][0]) == {"entity", "display", "action", "before", "after", "ops", "origin",
                                      "metadata"}  # a change as DESIGN §3.3 shows it
    assert doc["changes"][0]["after"][P] == 100 * MIB
    assert doc["now"] is None  # no entry expires: the plan does not depend on the clock
    markdown = plan(box, path, "--format", "markdown").stdout
    assert "| 104857600 (100 MiB) (300 MiB per cluster ÷ 3 brokers = 100 MiB per broker) |" in markdown
    applied = run_cli("apply", path, "--bootstrap-server", box.bootstrap, "--auto-approve")
    assert applied.exit_code == 0, applied.stderr
    assert box.state[Entity.user("etl")][P] == 100 * MIB


def test_a_new_broker_count_is_drift_and_makes_a_saved_plan_stale(tmp_path, box):
    path = write_manifest(tmp_path / "q.yaml", BUDGET)
    assert run_cli("apply", path, "--bootstrap-server", box.bootstrap, "--auto-approve").exit_code == 0
    out = tmp_path / "plan.json"
    with Sandbox.start(SandboxConfig(cluster_id="c", brokers=4, seed=box.state)) as grown:
        drift = plan(grown, path, "--detailed-exitcode", "--out", out)
        assert drift.exit_code == 2, drift.stderr
        assert (f"      ~ {P} = 104857600 (100 MiB) -> 78643200 (75 MiB)  # 300 MiB per cluster ÷ 4 brokers "
                "= 75 MiB per broker\n") in drift.stdout
    stale = run_cli("apply", "--plan", out, "--bootstrap-server", box.bootstrap, "--auto-approve")
    assert stale.exit_code == 1
    assert stale.stderr.startswith("Error: plan is stale: it divides cluster-wide budgets by 4 brokers, but "
                                   "the cluster now has 3; nothing was changed\n")


def test_a_snapshot_needs_the_inventorys_broker_count(tmp_path):
    write_manifest(tmp_path / "m" / "q.yaml", BUDGET)
    (tmp_path / "s.json").write_text('{"format_version": 1, "cluster_id": "c", "entities": []}')
    unknown = run_cli("plan", tmp_path / "m", "--state", tmp_path / "s.json")
    assert unknown.exit_code == 1
    assert "does not say how many brokers the cluster has" in unknown.stderr
    assert "set brokers = N under [clusters.NAME]" in unknown.stderr
    (tmp_path / "kqplan.toml").write_text(
        '[clusters.c]\nsnapshot = "s.json"\nmanifests = ["m"]\nbrokers = 6\n')
    known = run_cli("--config", tmp_path / "kqplan.toml", "plan", "--cluster", "c", "--format", "json")
    assert known.exit_code == 0, known.stderr
    assert known.json["changes"][0]["after"][P] == float(int(300 * MIB) // 6)  # 52428800: exact here


# -- protected principals ------------------------------------------------------------------------------

def test_a_plan_that_lowers_a_protected_principal_is_refused(tmp_path, monkeypatch):
    (tmp_path / "kqplan.toml").write_text(
        '[policy]\nprotected-principals = [{user = "canary", client-id = "probe"}, {user = "op"}]\n')
    write_manifest(tmp_path / "q.yaml", "entities:\n  - user: <default>\n"
                          "    quotas: {producer_byte_rate: 1MiB}\n  - user: canary\n"
                          "    quotas: {producer_byte_rate: 50MiB}\n")
    seed = {Entity.user(None): {P: 10 * MIB}}
    monkeypatch.chdir(tmp_path)
    with Sandbox.start(SandboxConfig(seed=seed, cluster_id="c")) as sandbox:
        refused = run_cli("plan", "q.yaml", "--bootstrap-server", sandbox.bootstrap)
        assert refused.exit_code == 1
        assert "Plan: 1 to add, 1 to change, 0 to delete." in refused.stdout  # the plan is shown first
        assert refused.stderr.endswith(
            "q.yaml:4:5: error[KQP157] protected principal {user=op} (every client-id) would get a new or "
            "lower quota through {user=<default>}: producer_byte_rate 10 MiB -> 1 MiB (lowered) ([policy] "
            "protected-principals in kqplan.toml)\n"
            "  = help: give {user=op} an entity of its own that keeps its current values (it wins over "
            "{user=<default>}), or remove the principal from [policy] protected-principals\n"
            "Found 1 error(s).\n")
        as_json = run_cli("plan", "q.yaml", "--bootstrap-server", sandbox.bootstrap, "--format", "json")
        assert json.loads(as_json.stderr)["error"]["diagnostics"][0]["code"] == "KQP157"
        saved = run_cli("plan", "q.yaml", "--bootstrap-server", sandbox.bootstrap, "--out", "p.json")
        assert saved.exit_code == 1
        assert not (tmp_path / "p.json").exists()  # a refused plan is not saved
        applied = run_cli("apply", "q.yaml", "--bootstrap-server", sandbox.bootstrap, "--auto-approve")
        assert applied.exit_code == 1
        assert "KQP157" in applied.stderr
        assert sandbox.state == seed
        write_manifest(tmp_path / "q.yaml",
                       "entities:\n  - user: <default>\n    quotas: {producer_byte_rate: 20MiB}\n")
        raised = run_cli("plan", "q.yaml", "--bootstrap-server", sandbox.bootstrap)
        assert raised.exit_code == 0  # raising a protected principal's limit: fine


# -- the saved plan ------------------------------------------------------------------------------------

def test_the_rollout_fields_survive_a_saved_plan_and_older_plans_still_read(tmp_path, box, monkeypatch):
    from kqplan.planfile.codec import _body, digest, dumps_plan, loads_plan

    write_manifest(tmp_path / "base" / "q.yaml", BASE)
    write_manifest(tmp_path / "over" / "q.yaml", RAISE.replace("10MiB", "50MiB") + BUDGET.replace(
        "entities:\n", ""))
    monkeypatch.setenv("KQPLAN_NOW", "2026-11-30T12:00Z")
    out = tmp_path / "plan.json"
    assert plan(box, tmp_path / "base", tmp_path / "over", "--out", out).exit_code == 0
    saved = loads_plan(out.read_text(), source="plan.json")
    assert dumps_plan(saved) == out.read_text()
    assert (saved.cluster.brokers, saved.valid_until.isoformat()) == (3, "2026-12-01T00:00:00+00:00")
    assert [c.per_cluster for c in saved.changes] == [{P: 300 * MIB, "request_percentage": 100.0}, None]
    assert saved.changes[1].expires is not None
    shown = run_cli("show", out)
    assert "300 MiB per cluster ÷ 3 brokers = 100 MiB per broker" in shown.stdout

    # a plan file saved before safe rollout: no now, valid_until, brokers or change fields
    doc = json.loads(out.read_text())
    assert doc["expiring"] == {"{user=pay}": "2026-12-01T00:00:00Z"}
    for key in ("now", "valid_until", "expiring", "expired", "budgets", "digest"):
        doc.pop(key)
    doc["cluster"].pop("brokers")
    doc["digest"] = digest(doc)
    legacy = loads_plan(json.dumps(doc), source="old.json")
    assert legacy.legacy
    assert {**_body(legacy), "digest": doc["digest"]} == doc
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    assert loads_plan(old.read_text(), source="old.json").legacy
    applied = run_cli("apply", "--plan", old, "--bootstrap-server", box.bootstrap, "--auto-approve")
    assert applied.exit_code == 0, applied.stderr
    doc["now"] = None  # a hand-added field changes the digest
    with pytest.raises(Exception, match="edited after it was made"):
        loads_plan(json.dumps(doc), source="old.json")


def test_a_saved_plan_is_judged_against_protected_principals_when_applied(tmp_path, monkeypatch):
    """The policy may be tightened after a plan was saved: apply --plan judges it again."""
    write_manifest(tmp_path / "q.yaml", "entities:\n  - user: <default>\n"
                          "    quotas: {producer_byte_rate: 1MiB}\n")
    seed = {Entity.user(None): {P: 10 * MIB}}
    monkeypatch.chdir(tmp_path)
    with Sandbox.start(SandboxConfig(seed=seed, cluster_id="c")) as sandbox:
        saved = run_cli("plan", "q.yaml", "--bootstrap-server", sandbox.bootstrap, "--out", "p.json")
        assert saved.exit_code == 0, saved.stderr
        (tmp_path / "kqplan.toml").write_text('[policy]\nprotected-principals = [{user = "op"}]\n')
        applied = run_cli("apply", "--plan", "p.json", "--bootstrap-server", sandbox.bootstrap,
                          "--auto-approve")
        assert applied.exit_code == 1
        assert ("error[KQP157] protected principal {user=op} (every client-id) would get a new or lower "
                "quota through {user=<default>}: producer_byte_rate 10 MiB -> 1 MiB (lowered)"
                ) in applied.stderr
        assert sandbox.state == seed
        assert sandbox.requests_of(49) == []  # nothing sent, not even validateOnly
