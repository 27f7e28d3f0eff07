"""``kqplan import --drift``: the cluster's values written where the manifests declare them, every
other line kept, and a plan of the result shows no change (snapshot targets: the live ones are in
live_test.py)."""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import pytest

from kqplan.core.errors import KqplanError
from tests.helpers import run_cli

BASE = """\
apiVersion: kqplan/v1
kind: ClientQuotas
profiles:
  gold: {producer_byte_rate: 50MiB, consumer_byte_rate: 100MiB}
entities:
  # the API's own quota
  - user: api
    quotas:
      producer_byte_rate: 10MiB   # agreed with the API team
      consumer_byte_rate: 20971520
  - user: ledger
    profile: gold
  - user: <default>
    quotas: {request_percentage: 50, producer_byte_rate: {per-cluster: 30MiB}}
"""

PROD = """\
apiVersion: kqplan/v1
kind: ClientQuotas
entities:
  - user: api
    override: true
    quotas: {consumer_byte_rate: 40MiB}
"""

INVENTORY = """\
[clusters.prod]
snapshot = "s.json"
brokers = 2
manifests = ["base", "prod"]
"""


def repo(root: Path, entities: list[tuple[dict[str, str | None], dict[str, float]]]) -> Path:
    for name, text in {"base/q.yaml": BASE, "prod/q.yaml": PROD, "kqplan.toml": INVENTORY}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    snapshot(root, entities)
    return root


def snapshot(root: Path, entities: list[tuple[dict[str, str | None], dict[str, float]]]) -> None:
    (root / "s.json").write_text(json.dumps({"format_version": 1, "cluster_id": "prod", "entities": [
        {"entity": e, "quotas": q} for e, q in entities]}), encoding="utf-8")


def changed_lines(root: Path) -> dict[str, list[tuple[str, str]]]:
    """Per manifest, the lines the import changed: (before, after) pairs."""
    out = {}
    for name, before in (("base/q.yaml", BASE), ("prod/q.yaml", PROD)):
        after = (root / name).read_text(encoding="utf-8")
        a, b = before.splitlines(), after.splitlines()
        pairs = []
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b).get_opcodes():
            if tag != "equal":
                pairs.append(("\n".join(a[i1:i2]), "\n".join(b[j1:j2])))
        if pairs:
            out[name] = pairs
    return out


IN_SYNC = [({"user": "api"}, {"producer_byte_rate": 10485760.0, "consumer_byte_rate": 41943040.0}),
           ({"user": "ledger"}, {"producer_byte_rate": 52428800.0, "consumer_byte_rate": 104857600.0}),
           ({"user": None}, {"request_percentage": 50.0, "producer_byte_rate": 15728640.0})]


def test_values_go_where_they_are_declared_in_their_form(tmp_path, monkeypatch):
    repo(tmp_path, [({"user": "api"}, {"producer_byte_rate": 12582912.0, "consumer_byte_rate": 52428800.0,
                                       "request_percentage": 30.0}),
                    IN_SYNC[1],
                    ({"user": None}, {"request_percentage": 60.0, "producer_byte_rate": 15728640.0})])
    monkeypatch.chdir(tmp_path)
    done = run_cli("import", "prod", "--drift", "--cluster", "prod")
    assert done.exit_code == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        "Imported the drift of 2 entities from prod into 2 file(s):",
        "  ~ {user=<default>} request_percentage: 50 -> 60  # base/q.yaml:14:34",
        "  ~ {user=api} consumer_byte_rate: 40 MiB -> 50 MiB  # prod/q.yaml:6:34",
        "  ~ {user=api} producer_byte_rate: 10 MiB -> 12 MiB  # base/q.yaml:9:27",
        "  ~ {user=api} request_percentage: (none) -> 30  # prod/q.yaml:4:5"]
    assert changed_lines(tmp_path) == {
        # the base layer's own keys: units stay units, the comment stays
        "base/q.yaml": [("      producer_byte_rate: 10MiB   # agreed with the API team",
                         "      producer_byte_rate: 12MiB   # agreed with the API team"),
                        ("    quotas: {request_percentage: 50, producer_byte_rate: {per-cluster: 30MiB}}",
                         "    quotas: {request_percentage: 60, producer_byte_rate: {per-cluster: 30MiB}}")],
        # the override supplies consumer_byte_rate, and gets the key the cluster added
        "prod/q.yaml": [("    quotas: {consumer_byte_rate: 40MiB}",
                         "    quotas: {consumer_byte_rate: 50MiB, request_percentage: 30}")]}
    plan = run_cli("plan", "--cluster", "prod", "--detailed-exitcode")
    assert plan.exit_code == 0, plan.stdout
    assert plan.stdout.startswith("No changes.")


def test_budgets_stay_budgets_removals_and_profiles(tmp_path, monkeypatch):
    repo(tmp_path, [({"user": "api"}, {"producer_byte_rate": 10485760.0}),
                    ({"user": "ledger"}, {"producer_byte_rate": 52428800.0}),
                    ({"user": None}, {"request_percentage": 50.0, "producer_byte_rate": 20971520.0})])
    monkeypatch.chdir(tmp_path)
    done = run_cli("import", "prod", "--drift", "--cluster", "prod")
    assert done.exit_code == 0, done.stdout + done.stderr
    note = "  note: {user=ledger}: dropped `profile: gold` (the cluster's values are written out)"
    assert note in done.stdout
    assert changed_lines(tmp_path) == {
        "base/q.yaml": [("    profile: gold", "    quotas: {producer_byte_rate: 50MiB}"),
                        # 20 MiB per broker on 2 brokers: the budget, not a per-broker number
                        ("    quotas: {request_percentage: 50, producer_byte_rate: {per-cluster: 30MiB}}",
                         "    quotas: {request_percentage: 50, producer_byte_rate: {per-cluster: 40MiB}}")],
        # the cluster lacks a key the base sets and the override replaced: the override removes it
        "prod/q.yaml": [("    quotas: {consumer_byte_rate: 40MiB}",
                         "    quotas: {consumer_byte_rate: null}")]}
    assert run_cli("plan", "--cluster", "prod", "--detailed-exitcode").exit_code == 0


def test_what_is_not_a_values_drift_is_left_and_named(tmp_path, monkeypatch):
    extra = [({"user": "intruder"}, {"producer_byte_rate": 1.0})]
    repo(tmp_path, [IN_SYNC[0], IN_SYNC[2], *extra])  # ledger deleted on the cluster
    (tmp_path / "base" / "own.yaml").write_text(
        "apiVersion: kqplan/v1\nkind: ClientQuotas\nownership: {prune: true, scope: [{user: intr*}]}\n",
        encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    done = run_cli("import", "prod", "--drift", "--cluster", "prod")
    assert done.exit_code == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        "No drift to import: the managed entities on prod have the manifests' values.",
        "Left as they are:",
        "  {user=intruder} is on the cluster and would be deleted: `kqplan import --names` adopts it",
        "  {user=ledger} is in the manifests but not on the cluster: remove its entry to accept that"]
    assert changed_lines(tmp_path) == {}


def test_an_expired_override_is_no_drift(tmp_path, monkeypatch):
    repo(tmp_path, IN_SYNC)
    temporary = PROD.replace("override: true", "override: true\n    expires: 2026-06-01")
    (tmp_path / "prod" / "q.yaml").write_text(temporary, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KQPLAN_NOW", "2026-07-01T00:00:00Z")
    done = run_cli("import", "prod", "--drift", "--cluster", "prod")
    assert done.exit_code == 0, done.stdout + done.stderr
    assert "  {user=api} changes because an entry expired: not drift" in done.stdout
    assert "expires: 2026-06-01" in (tmp_path / "prod" / "q.yaml").read_text()


def test_refusals(tmp_path, monkeypatch):
    repo(tmp_path, IN_SYNC)
    monkeypatch.chdir(tmp_path)
    both = run_cli("import", "prod", "--drift", "--all-unmanaged", "--cluster", "prod")
    assert both.exit_code == 1
    assert "--drift imports the values of managed entities" in both.stderr
    elsewhere = run_cli("import", "elsewhere", "--drift", "--cluster", "prod")
    assert elsewhere.exit_code == 1
    assert "elsewhere is not a layer of cluster 'prod'" in elsewhere.stderr
    # a budget the cluster's per-broker value cannot come from is not rewritten as a plain number
    snapshot(tmp_path, [IN_SYNC[0], IN_SYNC[1],
                        ({"user": None}, {"request_percentage": 50.0, "producer_byte_rate": 2.5})])
    odd = run_cli("import", "prod", "--drift", "--cluster", "prod")
    assert odd.exit_code == 1
    assert "is no per-cluster budget divided by 2 broker(s)" in odd.stderr
    assert changed_lines(tmp_path) == {}


def test_the_result_is_checked_by_planning_it_again(tmp_path, monkeypatch):
    """The check after writing is real: manifests that would still change an entity are refused."""
    from kqplan.commands.import_drift import _verify
    from kqplan.config.model import ProjectConfig
    from kqplan.core.entity import Entity
    from kqplan.core.plan import Action, Change, ClusterRef, Plan
    from kqplan.manifest.compile import load_desired

    repo(tmp_path, IN_SYNC)
    monkeypatch.chdir(tmp_path)
    paths = [Path("base"), Path("prod")]
    config = ProjectConfig()
    desired = load_desired(paths, config)
    api = Entity.user("api")
    drifted = [Change(api, Action.UPDATE, {"producer_byte_rate": 1.0}, {"producer_byte_rate": 2.0}, ())]
    plan = Plan((), 0, ClusterRef("prod", "snapshot:s.json", brokers=2), None)
    in_sync = {e: q for e, q in ((Entity.of(list(k.items())), v) for k, v in IN_SYNC)}
    assert _verify(paths, config, desired, in_sync, plan=plan, drifted=drifted) == 0
    elsewhere = {**in_sync, api: {"producer_byte_rate": 1.0}}
    with pytest.raises(KqplanError, match=r"after the import, the plan would still change \{user=api\}"):
        _verify(paths, config, desired, elsewhere, plan=plan, drifted=drifted)


def test_only_the_drifted_lines_change_whatever_the_dump_would_respell(tmp_path, monkeypatch):
    """The round-trip dump writes `[{user: "*"}]` as `[user: "*"]` and moves a comment: lines
    outside the drifted entries stay byte for byte."""
    text = ('apiVersion: kqplan/v1\nkind: ClientQuotas\nownership: {prune: true, scope: [{user: "*"}]}\n'
            "released: [{user: legacy}]   # not ours any more\nentities:\n"
            "  - {user: <default>, quotas: {producer_byte_rate: 10MiB}}\n"
            "  - {user: <default>, client-id: bulk, quotas: {producer_byte_rate: 60MiB}}"
            "   # raised for bulk\n")
    (tmp_path / "q.yaml").write_text(text, encoding="utf-8")
    snapshot(tmp_path, [({"user": None}, {"producer_byte_rate": 10485760.0}),
                        ({"user": None, "client-id": "bulk"}, {"producer_byte_rate": 41943040.0}),
                        ({"user": "legacy"}, {"producer_byte_rate": 1024.0})])
    monkeypatch.chdir(tmp_path)
    done = run_cli("import", ".", "--drift", "--state", "s.json")
    assert done.exit_code == 0, done.stdout + done.stderr
    after = (tmp_path / "q.yaml").read_text(encoding="utf-8")
    changed = [(a, b) for a, b in zip(text.splitlines(), after.splitlines(), strict=True) if a != b]
    entry = "  - {user: <default>, client-id: bulk, quotas: {producer_byte_rate: %s}}"
    assert changed == [(entry % "60MiB" + "   # raised for bulk", entry % "40MiB" + "   # raised for bulk")]
    assert run_cli("plan", ".", "--state", "s.json", "--detailed-exitcode").exit_code == 0
