"""One repository, two clusters: inventory, layers with override, unmanaged drift, the deletion
brake and protect — end to end through the CLI, over TCP against two sandbox brokers."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from kqplan.core.entity import Entity
from kqplan.sandbox import Sandbox, SandboxConfig
from tests.helpers import mine, run_cli, write_manifest

BASE = """\
entities:
  - user: payments-api
    quotas: {producer_byte_rate: 1MiB, request_percentage: 10}
  - user: ledger
    protect: true
    quotas: {producer_byte_rate: 2MiB}
"""
PROD = """\
entities:
  - user: payments-api
    override: true
    metadata: {labels: {team: payments}}
    quotas: {producer_byte_rate: 5MiB, request_percentage: null}
"""


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[tuple[Path, dict[str, Sandbox]]]:
    """kqplan.toml with prod and staging, each a live sandbox; base layer plus a prod override."""
    with ExitStack() as stack:
        boxes = {name: stack.enter_context(Sandbox.start(SandboxConfig(cluster_id=f"{name}-id")))
                 for name in ("prod", "staging")}
        write_manifest(tmp_path / "base" / "quotas.yaml", BASE)
        write_manifest(tmp_path / "overlays" / "prod" / "quotas.yaml", PROD)
        (tmp_path / "overlays" / "staging").mkdir(parents=True)
        write_manifest(tmp_path / "overlays" / "staging" / "extra.yaml",
                       "entities:\n  - user: tester\n    quotas: {consumer_byte_rate: 1MiB}\n")
        (tmp_path / "kqplan.toml").write_text(
            "".join(f'[clusters.{name}]\nid = "{name}-id"\nbootstrap-server = "{box.bootstrap}"\n'
                    f'manifests = ["base", "overlays/{name}"]\n\n' for name, box in boxes.items()))
        yield tmp_path, boxes


def cli(root: Path, *args: str | Path):
    return run_cli("--config", root / "kqplan.toml", *args)


def test_two_clusters_share_a_base_and_prod_overrides_it(fleet):
    root, boxes = fleet
    prod = cli(root, "plan", "--cluster", "prod", "--format", "json")
    assert prod.exit_code == 0, prod.stderr
    changes = {c["display"]: c for c in prod.json["changes"]}
    assert changes["{user=payments-api}"]["after"] == {"producer_byte_rate": 5 * 2**20}
    assert changes["{user=payments-api}"]["origin"] == (
        "overlays/prod/quotas.yaml:4:5 (overrides base/quotas.yaml:4:5)")
    assert changes["{user=payments-api}"]["metadata"] == {"labels": {"team": "payments"}, "description": None}
    assert prod.json["cluster"]["id"] == "prod-id"
    staging = cli(root, "plan", "--cluster", "staging", "--format", "json")
    assert {c["display"]: c["after"] for c in staging.json["changes"]} == {
        "{user=payments-api}": {"producer_byte_rate": 2**20, "request_percentage": 10.0},
        "{user=ledger}": {"producer_byte_rate": 2 * 2**20},
        "{user=tester}": {"consumer_byte_rate": 2**20}}
    applied = cli(root, "apply", "--cluster", "prod", "--auto-approve")
    assert applied.exit_code == 0, applied.stderr
    assert boxes["prod"].state[Entity.user("payments-api")] == {"producer_byte_rate": 5 * 2**20}
    assert Entity.user("tester") not in boxes["prod"].state
    again = cli(root, "plan", "--cluster", "prod", "--detailed-exitcode")
    assert again.exit_code == 0, again.stdout + again.stderr
    assert again.stdout.startswith("No changes.")


def test_the_inventory_id_guards_the_target(fleet):
    root, boxes = fleet
    wrong = cli(root, "plan", "--cluster", "prod", "--bootstrap-server", boxes["staging"].bootstrap)
    assert wrong.exit_code == 1
    assert "[clusters.prod] demands id prod-id" in wrong.stderr
    unknown = cli(root, "plan", "--cluster", "prdo")
    assert unknown.exit_code == 1
    assert "no cluster 'prdo'" in unknown.stderr
    assert "did you mean 'prod'?" in unknown.stderr


def test_an_out_of_band_alter_shows_up_as_unmanaged(fleet):
    root, _boxes = fleet
    assert cli(root, "apply", "--cluster", "prod", "--auto-approve").exit_code == 0
    alter = cli(root, "alter", "--cluster", "prod", "--names", "user=mallory",
                "--add", "producer_byte_rate=1")
    assert alter.exit_code == 0, alter.stderr
    plan = cli(root, "plan", "--cluster", "prod", "--format", "json", "--detailed-exitcode")
    assert plan.exit_code == 0  # nothing the manifests manage changed: terraform's meaning kept
    assert plan.json["unmanaged"] == [{"entity": {"user": "mallory"}, "display": "{user=mallory}",
                                      "quotas": {"producer_byte_rate": 1.0}}]
    strict = cli(root, "plan", "--cluster", "prod", "--fail-on-unmanaged")
    assert strict.exit_code == 1
    assert "1 entity on the cluster is not managed by these manifests" in strict.stderr


def test_mass_deletion_is_braked_and_protect_refuses(fleet, tmp_path):
    root, boxes = fleet
    seed = {Entity.user(f"old-{i}"): {"producer_byte_rate": 1.0} for i in range(12)}
    box = boxes["staging"]
    box.engine.load({**box.state, **seed})
    box._describe_cache.clear()
    write_manifest(root / "overlays" / "staging" / "scope.yaml",
                   "ownership:\n  prune: true\n  scope: [{user: 'old-*'}]\n")
    refused = cli(root, "apply", "--cluster", "staging", "--auto-approve")
    assert refused.exit_code == 1
    assert "the plan deletes 12 entities: more than 10" in refused.stderr
    assert "KQP155" in refused.stderr
    assert all(e in box.state for e in seed)  # nothing was sent
    allowed = cli(root, "apply", "--cluster", "staging", "--auto-approve", "--allow-mass-delete")
    assert allowed.exit_code == 0, allowed.stderr
    assert not any(e in box.state for e in seed)
    # ledger is protected: an override that removes its only key would delete it
    write_manifest(root / "overlays" / "staging" / "drop.yaml",
                   "entities:\n  - user: ledger\n    override: true\n"
                   "    quotas: {producer_byte_rate: null}\n")
    protected = cli(root, "plan", "--cluster", "staging")
    assert protected.exit_code == 1
    assert "deletes 1 protected entity ({user=ledger})" in protected.stderr


def test_policies_are_located_errors(tmp_path):
    write_manifest(tmp_path / "m" / "q.yaml",
                   "entities:\n  - user: a\n    quotas: {producer_byte_rate: 100}\n"
                   "  - user: b\n    metadata: {labels: {team: x}}\n"
                   "    quotas: {producer_byte_rate: 2GiB, consumer_byte_rate: 1MiB}\n")
    (tmp_path / "kqplan.toml").write_text(
        '[policy]\nrequired-keys = ["consumer_byte_rate"]\nrequired-defaults = ["user"]\n'
        'required-labels = ["team"]\n[policy.keys.producer_byte_rate]\nmin = "1KiB"\nmax = "1GiB"\n')
    result = run_cli("--config", tmp_path / "kqplan.toml", "validate", tmp_path / "m")
    assert result.exit_code == 1
    out = "\n" + result.stdout  # each diagnostic begins a line with the path from the root
    assert ("\nm/q.yaml:5:34: error[KQP150] producer_byte_rate = 100 of {user=a} is below the "
            "minimum 1024") in out
    assert ("\nm/q.yaml:8:34: error[KQP151] producer_byte_rate = 2147483648 of {user=b} is above the "
            "maximum") in out
    assert "\nm/q.yaml:4:5: error[KQP152] {user=a} does not set consumer_byte_rate" in out
    assert "\nm/q.yaml:4:5: error[KQP154] {user=a} has no label team" in out
    assert "error[KQP153] no manifest lists {user=<default>}" in out


def test_config_and_guard_mistakes_are_located(tmp_path):
    (tmp_path / "kqplan.toml").write_text('[clusters.prod]\nbootstrap = "x:1"\n')
    write_manifest(tmp_path / "q.yaml", "entities: []\n")
    bad = run_cli("--config", tmp_path / "kqplan.toml", "validate", tmp_path / "q.yaml")
    assert bad.exit_code == 1
    assert bad.stderr.startswith("kqplan.toml:2:1: error[KQP190] unknown key 'bootstrap' in "
                                 "[clusters.prod]\n  = help: did you mean 'bootstrap-server'?\n")
    (tmp_path / "kqplan.toml").write_text('[clusters.prod]\nbootstrap-server = "x:1"\n')
    write_manifest(tmp_path / "q.yaml", "cluster: prdo\nentities: []\n")
    guard = run_cli("--config", tmp_path / "kqplan.toml", "validate", tmp_path / "q.yaml")
    assert guard.exit_code == 1
    assert "\nq.yaml:3:10: error[KQP141] cluster 'prdo' is not in the inventory" in "\n" + guard.stdout


def test_layers_without_override_are_duplicates_and_override_needs_a_base(tmp_path):
    write_manifest(tmp_path / "a" / "q.yaml", "entities:\n  - user: x\n    quotas: {producer_byte_rate: 1}\n")
    write_manifest(tmp_path / "b" / "q.yaml", "entities:\n  - user: x\n    quotas: {producer_byte_rate: 2}\n"
                   "  - user: y\n    override: true\n    quotas: {producer_byte_rate: 2}\n")
    result = run_cli("validate", tmp_path / "a", tmp_path / "b")
    assert result.exit_code == 1
    assert "error[KQP102] entity {user=x} is listed twice" in result.stdout
    assert "= help: to change it in this layer, add `override: true` to this entry" in result.stdout
    assert "error[KQP122] override: true, but no earlier layer lists {user=y}" in result.stdout


def test_alter_is_checked_offline_and_shows_before_after(fleet):
    root, boxes = fleet
    zero = cli(root, "alter", "--cluster", "prod", "--names", "user=zed", "--add", "producer_byte_rate=0")
    assert zero.exit_code == 1
    assert zero.stderr.startswith("--add: error[KQP112] producer_byte_rate: Quota producer_byte_rate must be "
                                  "greater than 0")
    nan = cli(root, "alter", "--cluster", "prod", "--names", "user=zed", "--add", "request_percentage=nan")
    assert nan.exit_code == 1
    assert "KQP115" in nan.stderr
    assert Entity.user("zed") not in boxes["prod"].state  # nothing was sent
    first = cli(root, "alter", "--cluster", "prod", "--names", "user=zed",
                "--add", "producer_byte_rate=1KiB")
    assert first.stdout == "+ {user=zed} (altered)\n    + producer_byte_rate = 1024 (1 KiB)\n"
    second = cli(root, "alter", "--cluster", "prod", "--names", "user=zed",
                 "--add", "producer_byte_rate=2KiB", "--format", "json")
    doc = json.loads(second.stdout)
    assert (doc["before"], doc["after"], doc["ok"]) == ({"producer_byte_rate": 1024.0},
                                                        {"producer_byte_rate": 2048.0}, True)
    missing = cli(root, "describe", "--cluster", "prod", "--names", "user=nobody")
    assert (missing.exit_code, missing.stdout) == (0, "")
    assert missing.stderr.startswith("# cluster prod-id (")  # --cluster prod reached prod
    assert missing.stderr.endswith("\nNo client quotas are configured matching {user=nobody}.\n")


def test_inventory_and_unmanaged_drift_on_live_targets(live, tmp_path):
    """The same story on the sandbox and the real broker: --cluster, apply, out-of-band alter."""
    p = f"kqplan-inv-{uuid.uuid4().hex[:8]}"
    write_manifest(tmp_path / "base" / "q.yaml",
                   f"entities:\n  - user: {p}-a\n    quotas: {{producer_byte_rate: 1MiB}}\n")
    write_manifest(tmp_path / "prod" / "q.yaml", f"entities:\n  - user: {p}-a\n    override: true\n"
                   "    quotas: {consumer_byte_rate: 2MiB}\n")
    (tmp_path / "kqplan.toml").write_text(
        f'[clusters.live]\nbootstrap-server = "{live.bootstrap}"\nmanifests = ["base", "prod"]\n')
    try:
        applied = cli(tmp_path, "apply", "--cluster", "live", "--auto-approve")
        assert applied.exit_code == 0, applied.stdout + applied.stderr
        want = {Entity.user(f"{p}-a"): {"producer_byte_rate": 2.0**20, "consumer_byte_rate": 2.0 * 2**20}}
        assert live.until(mine(p), want) == want
        alter = cli(tmp_path, "alter", "--cluster", "live", "--names", f"user={p}-mallory",
                    "--add", "producer_byte_rate=1")
        assert alter.exit_code == 0, alter.stderr
        live.until(mine(p), {**want, Entity.user(f"{p}-mallory"): {"producer_byte_rate": 1.0}})
        plan = cli(tmp_path, "plan", "--cluster", "live", "--format", "json", "--detailed-exitcode")
        assert plan.exit_code == 0, plan.stderr
        assert {"entity": {"user": f"{p}-mallory"}, "display": f"{{user={p}-mallory}}",
                "quotas": {"producer_byte_rate": 1.0}} in plan.json["unmanaged"]
        assert cli(tmp_path, "plan", "--cluster", "live", "--fail-on-unmanaged").exit_code == 1
    finally:
        live.remove_all(mine(p))


def test_the_apply_hint_after_plan_out_works_as_printed(fleet):
    root, boxes = fleet
    plan_file = root / "prod.json"
    planned = cli(root, "plan", "--cluster", "prod", "--out", plan_file)
    assert planned.exit_code == 0, planned.stderr
    hint = planned.stdout.strip().splitlines()[-1]
    command = hint.split("Apply exactly these changes with: ", 1)[1]
    assert command == f"kqplan --config {root / 'kqplan.toml'} apply --plan {plan_file} --cluster prod"
    applied = run_cli(*command.split()[1:], "--auto-approve")
    assert applied.exit_code == 0, applied.stdout + applied.stderr
    assert boxes["prod"].state[Entity.user("payments-api")] == {"producer_byte_rate": 5 * 2**20}


def test_import_keeps_an_entrys_metadata(fleet):
    root, _boxes = fleet
    assert cli(root, "apply", "--cluster", "prod", "--auto-approve").exit_code == 0
    overlay = root / "overlays" / "prod" / "quotas.yaml"
    before = overlay.read_text()
    assert cli(root, "alter", "--cluster", "prod", "--names", "user=payments-api",
               "--add", "producer_byte_rate=6MiB").exit_code == 0
    imported = cli(root, "import", root / "overlays" / "prod", "--cluster", "prod", "--names",
                   "user=payments-api")
    assert imported.exit_code == 0, imported.stderr
    assert overlay.read_text() == before.replace("producer_byte_rate: 5MiB", "producer_byte_rate: 6MiB")
    assert "metadata: {labels: {team: payments}}" in overlay.read_text()


def test_import_into_an_overlay_overrides_the_base_layer(fleet):
    root, _boxes = fleet
    assert cli(root, "apply", "--cluster", "prod", "--auto-approve").exit_code == 0
    base = (root / "base" / "quotas.yaml").read_text()
    assert cli(root, "alter", "--cluster", "prod", "--names", "user=ledger",
               "--add", "consumer_byte_rate=1MiB").exit_code == 0
    imported = cli(root, "import", root / "overlays" / "prod", "--cluster", "prod", "--names", "user=ledger")
    assert imported.exit_code == 0, imported.stderr
    assert "(override)" in imported.stdout
    assert (root / "base" / "quotas.yaml").read_text() == base  # the shared layer is untouched
    assert cli(root, "plan", "--cluster", "prod").stdout.startswith("No changes.")
    assert cli(root, "plan", "--cluster", "staging", "--format", "json").json["changes"] != []
