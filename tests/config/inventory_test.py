"""The kqplan.toml inventory: [clusters.NAME] targets and layers, --cluster/--config on every command,
the old NAME = "ID" form, located KQP190/KQP141 errors; offline (snapshots) and over TCP (live)."""

from __future__ import annotations

import uuid

from kqplan.core.entity import Entity
from tests.helpers import REPO, mine, run_cli, run_kqplan, write_manifest

FLEET = REPO / "examples" / "fleet"


def test_example_fleet_plans_prod_from_its_snapshot(monkeypatch):
    monkeypatch.chdir(REPO)  # paths under the current directory are shown relative to it
    result = run_cli("--no-color", "--config", FLEET / "kqplan.toml", "plan", "--cluster", "prod")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        "kqplan will perform the following actions on cluster prod (id kqplan-example-fleet-prod, "
        "snapshot:examples/fleet/snapshots/prod.json):\n\n"
        "  ~ {user=orders}  # examples/fleet/overlays/prod/quotas.yaml:10:5 "
        "(overrides examples/fleet/base/quotas.yaml:9:5)\n"
        "      ~ producer_byte_rate = 1048576 (1 MiB) -> 8388608 (8 MiB)\n"
        "      - request_percentage = 10\n\n"
        "1 entity on the cluster is not managed by these manifests (left untouched; adopt with "
        "`kqplan import`):\n  ? {user=legacy-batch}\n\n"
        "Plan: 0 to add, 1 to change, 0 to delete.\n"
    )


def test_example_fleet_plans_staging_with_the_base_and_its_own_layer():
    # --config given to the command instead of the app
    result = run_cli("plan", "--config", FLEET / "kqplan.toml", "--cluster", "staging", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert result.json["cluster"]["id"] == "kqplan-example-fleet-staging"
    assert {c["display"]: (c["action"], c["after"]) for c in result.json["changes"]} == {
        "{user=orders}": ("create", {"producer_byte_rate": 2.0**20, "request_percentage": 10.0}),
        "{user=ledger}": ("create", {"producer_byte_rate": 2.0 * 2**20}),
        "{user=load-tester}": (
            "create",
            {"producer_byte_rate": 16.0 * 2**20, "consumer_byte_rate": 16.0 * 2**20},
        ),
    }
    meta = {c["display"]: c["metadata"] for c in result.json["changes"]}
    assert meta["{user=load-tester}"] == {"labels": {"team": "qa"}, "description": None}
    assert meta["{user=ledger}"] == {
        "labels": {"team": "finance"},
        "description": "the books; deleting its quota would unthrottle it",
    }
    assert result.json["unmanaged"] == []


def test_example_fleet_validates_per_cluster():
    for name in ("prod", "staging"):
        result = run_cli("--config", FLEET / "kqplan.toml", "validate", "--cluster", name)
        assert result.exit_code == 0, (name, result.stdout, result.stderr)


def test_explicit_flags_win_over_the_inventory(tmp_path):
    other = tmp_path / "other.json"
    other.write_text(
        '{"format_version": 1, "cluster_id": "kqplan-example-fleet-prod", "entities": ['
        '{"entity": {"user": "orders"}, "quotas": {"producer_byte_rate": 8388608.0}}]}'
    )
    result = run_cli(
        "--config", FLEET / "kqplan.toml", "plan", "--cluster", "prod", "--state", other, "--format", "json"
    )
    assert result.exit_code == 0, result.stderr
    assert result.json["cluster"]["bootstrap"] == f"snapshot:{other}"
    assert {c["display"]: c["action"] for c in result.json["changes"]} == {"{user=ledger}": "create"}
    only = write_manifest(
        tmp_path / "m" / "q.yaml",
        "metadata: {labels: {team: t}}\nentities:\n"
        "  - user: orders\n    quotas: {producer_byte_rate: 8MiB}\n",
    )
    paths = run_cli(
        "--config",
        FLEET / "kqplan.toml",
        "plan",
        only,
        "--cluster",
        "prod",
        "--state",
        other,
        "--detailed-exitcode",
    )
    assert paths.exit_code == 0, paths.stdout + paths.stderr  # the given path replaces the layers
    assert paths.stdout.startswith("No changes.")


def test_the_old_name_equals_id_form_still_guards(tmp_path):
    (tmp_path / "kqplan.toml").write_text('[clusters]\nprod = "prod-id"\n')
    write_manifest(
        tmp_path / "q.yaml", "cluster: prod\nentities:\n  - user: a\n    quotas: {producer_byte_rate: 1MiB}\n"
    )
    snap = tmp_path / "s.json"
    snap.write_text('{"format_version": 1, "cluster_id": "other-id", "entities": []}')
    assert run_cli("--config", tmp_path / "kqplan.toml", "validate", tmp_path / "q.yaml").exit_code == 0
    wrong = run_cli("--config", tmp_path / "kqplan.toml", "plan", tmp_path / "q.yaml", "--state", snap)
    assert wrong.exit_code == 1
    assert "prod-id" in wrong.stderr
    assert "other-id" in wrong.stderr
    snap.write_text('{"format_version": 1, "cluster_id": "prod-id", "entities": []}')
    right = run_cli("--config", tmp_path / "kqplan.toml", "plan", tmp_path / "q.yaml", "--state", snap)
    assert right.exit_code == 0, right.stderr


def test_unknown_policy_key_is_located_with_did_you_mean(tmp_path):
    (tmp_path / "kqplan.toml").write_text("[policy]\nmax-delete = 3\nmax-delete-percnt = 10\n")
    write_manifest(tmp_path / "q.yaml", "entities: []\n")
    bad = run_cli("--config", tmp_path / "kqplan.toml", "validate", tmp_path / "q.yaml")
    assert bad.exit_code == 1
    assert bad.stderr.startswith(
        "kqplan.toml:3:1: error[KQP190] unknown key 'max-delete-percnt' "
        "in [policy]\n  = help: did you mean 'max-delete-percent'?\n"
    )


def test_wrong_type_in_inventory_is_located(tmp_path):
    (tmp_path / "kqplan.toml").write_text('[clusters.prod]\nid = "p"\nmanifests = "base"\n')
    write_manifest(tmp_path / "q.yaml", "entities: []\n")
    bad = run_cli("--config", tmp_path / "kqplan.toml", "validate", tmp_path / "q.yaml")
    assert bad.exit_code == 1
    assert bad.stderr.startswith("kqplan.toml:3:1: error[KQP190]")


def test_both_bootstrap_and_snapshot_is_an_error(tmp_path):
    (tmp_path / "kqplan.toml").write_text(
        '[clusters.prod]\nbootstrap-server = "h:9092"\nsnapshot = "s.json"\n'
    )
    write_manifest(tmp_path / "q.yaml", "entities: []\n")
    bad = run_cli("--config", tmp_path / "kqplan.toml", "validate", tmp_path / "q.yaml")
    assert bad.exit_code == 1
    assert (
        "\nkqplan.toml:3:1: error[KQP190] cluster 'prod' has both bootstrap-server and snapshot"
        in "\n" + bad.stderr
    )


def test_manifest_guard_naming_no_cluster_is_kqp141_in_validate(tmp_path):
    (tmp_path / "kqplan.toml").write_text('[clusters.prod]\nid = "prod-id"\nsnapshot = "s.json"\n')
    write_manifest(tmp_path / "q.yaml", "cluster: staging\nentities: []\n")
    bad = run_cli("--config", tmp_path / "kqplan.toml", "validate", tmp_path / "q.yaml")
    assert bad.exit_code == 1
    assert "\nq.yaml:3:10: error[KQP141] cluster 'staging' is not in the inventory" in "\n" + bad.stdout
    write_manifest(tmp_path / "q.yaml", "cluster: prod-id\nentities: []\n")  # the id is accepted too
    good = run_cli("--config", tmp_path / "kqplan.toml", "validate", tmp_path / "q.yaml")
    assert good.exit_code == 0, good.stdout + good.stderr


def test_export_with_cluster_reads_the_inventory_target(tmp_path):
    result = run_cli(
        "--config", FLEET / "kqplan.toml", "export", "--cluster", "prod", "--out", tmp_path / "out"
    )
    assert result.exit_code == 0, result.stdout + result.stderr
    text = "".join(p.read_text() for p in sorted((tmp_path / "out").rglob("*.yaml")))
    assert "legacy-batch" in text
    assert "ledger" in text


def test_inventory_apply_and_describe_on_live_targets(live, tmp_path):
    p = f"kqplan-inv7-{uuid.uuid4().hex[:8]}"
    write_manifest(
        tmp_path / "base" / "q.yaml",
        f"entities:\n  - user: {p}-a\n    quotas: {{producer_byte_rate: 1MiB, request_percentage: 10}}\n"
        f"  - user: {p}-b\n    quotas: {{consumer_byte_rate: 1MiB}}\n",
    )
    write_manifest(
        tmp_path / "prod" / "q.yaml",
        f"entities:\n  - user: {p}-a\n    override: true\n    quotas: {{request_percentage: null}}\n",
    )
    write_manifest(tmp_path / "staging" / "q.yaml", "entities: []\n")
    (tmp_path / "kqplan.toml").write_text(
        f'[clusters.prod]\nbootstrap-server = "{live.bootstrap}"\nmanifests = ["base", "prod"]\n'
        f'[clusters.staging]\nbootstrap-server = "{live.bootstrap}"\nmanifests = ["base", "staging"]\n'
    )
    cfg = tmp_path / "kqplan.toml"
    try:
        plan = run_cli("--config", cfg, "plan", "--cluster", "prod", "--format", "json")
        assert plan.exit_code == 0, plan.stderr
        assert {c["display"]: c["after"] for c in plan.json["changes"]} == {
            f"{{user={p}-a}}": {"producer_byte_rate": 2.0**20},
            f"{{user={p}-b}}": {"consumer_byte_rate": 2.0**20},
        }
        applied = run_cli("--config", cfg, "apply", "--cluster", "prod", "--auto-approve")
        assert applied.exit_code == 0, applied.stdout + applied.stderr
        want = {
            Entity.user(f"{p}-a"): {"producer_byte_rate": 2.0**20},
            Entity.user(f"{p}-b"): {"consumer_byte_rate": 2.0**20},
        }
        assert live.until(mine(p), want) == want
        staging = run_cli("--config", cfg, "plan", "--cluster", "staging", "--format", "json")
        assert staging.exit_code == 0, staging.stderr
        assert [(c["display"], c["after"]) for c in staging.json["changes"] if p in c["display"]] == [
            (f"{{user={p}-a}}", {"producer_byte_rate": 2.0**20, "request_percentage": 10.0})
        ]
        described = run_cli(
            "--config", cfg, "describe", "--cluster", "prod", "--names", f"user={p}-b", "--format", "json"
        )
        assert described.exit_code == 0, described.stderr
        assert [d["quotas"] for d in described.json] == [{"consumer_byte_rate": 2.0**20}]
    finally:
        live.remove_all(mine(p))


def test_the_config_is_found_in_the_current_directory_or_above():
    here = FLEET / "overlays" / "prod"
    result = run_kqplan("plan", "--cluster", "staging", "--detailed-exitcode", cwd=here)
    assert result.exit_code == 2, result.stdout + result.stderr
    assert result.stdout.endswith("Plan: 3 to add, 0 to change, 0 to delete.\n")


def test_a_missing_config_file_is_an_error(tmp_path):
    result = run_cli("plan", "--config", tmp_path / "nope.toml", "--cluster", "x")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: cannot read config file {tmp_path}/nope.toml: No such file or "
                                    "directory")
