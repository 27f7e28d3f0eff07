"""Layered manifests: later layers override with `override: true` (merge, null removes, all-null deletes),
origin in plan JSON, metadata merged label by label and ignored by the diff; sandbox over TCP."""

from __future__ import annotations

from kqplan.core.entity import Entity
from kqplan.sandbox import Sandbox, SandboxConfig
from tests.helpers import run_cli, write_manifest


def _layers(tmp_path, base: str, over: str):
    write_manifest(tmp_path / "base" / "q.yaml", base)
    write_manifest(tmp_path / "over" / "q.yaml", over)
    return tmp_path / "base", tmp_path / "over"


def test_override_merges_keys_and_null_removes_one(tmp_path):
    base, over = _layers(
        tmp_path,
        "entities:\n  - user: a\n    quotas: {producer_byte_rate: 1MiB, "
        "consumer_byte_rate: 2MiB, request_percentage: 5}\n",
        "entities:\n  - user: a\n    override: true\n"
        "    quotas: {consumer_byte_rate: 3MiB, request_percentage: null}\n",
    )
    with Sandbox.start(SandboxConfig(cluster_id="layers")) as box:
        plan = run_cli("plan", base, over, "--bootstrap-server", box.bootstrap, "--format", "json")
        assert plan.exit_code == 0, plan.stderr
        [change] = plan.json["changes"]
        assert change["after"] == {"producer_byte_rate": 2.0**20, "consumer_byte_rate": 3.0 * 2**20}
        assert change["origin"].startswith(f"{over}/q.yaml")
        assert f"(overrides {base}/q.yaml" in change["origin"]
        assert (
            run_cli("apply", base, over, "--bootstrap-server", box.bootstrap, "--auto-approve").exit_code == 0
        )
        assert box.state[Entity.user("a")] == {
            "producer_byte_rate": 2.0**20,
            "consumer_byte_rate": 3.0 * 2**20,
        }


def test_origin_names_line_and_column_of_both_layers(tmp_path):
    """The brief's format: `overlays/prod/x.yaml:5:5 (overrides base/x.yaml:3:5)`."""
    base, over = _layers(
        tmp_path,
        "entities:\n  - user: a\n    quotas: {producer_byte_rate: 1MiB}\n",
        "entities:\n  - user: a\n    override: true\n    quotas: {producer_byte_rate: 2MiB}\n",
    )
    snap = tmp_path / "s.json"
    snap.write_text('{"format_version": 1, "cluster_id": "x", "entities": []}')
    plan = run_cli("plan", base, over, "--state", snap, "--format", "json")
    assert plan.exit_code == 0, plan.stderr
    assert plan.json["changes"][0]["origin"] == f"{over}/q.yaml:4:5 (overrides {base}/q.yaml:4:5)"


def test_removing_every_key_deletes_the_entity_from_the_cluster(tmp_path):
    base, over = _layers(
        tmp_path,
        "entities:\n  - user: a\n    quotas: {producer_byte_rate: 1MiB}\n"
        "  - user: b\n    quotas: {producer_byte_rate: 1MiB}\n",
        "entities:\n  - user: a\n    override: true\n    quotas: {producer_byte_rate: null}\n",
    )
    seed = {
        Entity.user("a"): {"producer_byte_rate": 2.0**20},
        Entity.user("b"): {"producer_byte_rate": 2.0**20},
    }
    with Sandbox.start(SandboxConfig(cluster_id="layers")) as box:
        box.engine.load(seed)
        plan = run_cli("plan", base, over, "--bootstrap-server", box.bootstrap, "--format", "json")
        assert plan.exit_code == 0, plan.stderr
        assert [(c["display"], c["action"], c["after"]) for c in plan.json["changes"]] == [
            ("{user=a}", "delete", None)
        ]
        assert plan.json["unmanaged"] == []  # the override still lists it: not unmanaged
        applied = run_cli(
            "apply", base, over, "--bootstrap-server", box.bootstrap, "--auto-approve", "--allow-mass-delete"
        )
        assert applied.exit_code == 0, applied.stdout + applied.stderr
        assert Entity.user("a") not in box.state
        assert box.state[Entity.user("b")] == {"producer_byte_rate": 2.0**20}


def test_duplicate_without_override_and_override_without_base(tmp_path):
    base, over = _layers(
        tmp_path,
        "entities:\n  - user: a\n    quotas: {producer_byte_rate: 1}\n",
        "entities:\n  - user: a\n    quotas: {producer_byte_rate: 2}\n"
        "  - user: z\n    override: true\n    quotas: {producer_byte_rate: 2}\n",
    )
    result = run_cli("validate", base, over)
    assert result.exit_code == 1
    assert f"{over}/q.yaml:4:5: error[KQP102] entity {{user=a}} is listed twice" in result.stdout
    assert (
        f"{over}/q.yaml:7:5: error[KQP122] override: true, but no earlier layer lists {{user=z}}"
        in result.stdout
    )


def test_override_within_one_layer_is_still_a_duplicate(tmp_path):
    write_manifest(
        tmp_path / "q.yaml",
        "entities:\n  - user: a\n    quotas: {producer_byte_rate: 1}\n"
        "  - user: a\n    override: true\n    quotas: {producer_byte_rate: 2}\n",
    )
    result = run_cli("validate", tmp_path / "q.yaml")
    assert result.exit_code == 1
    assert "KQP102" in result.stdout


def test_metadata_entity_wins_label_by_label_and_is_ignored_by_the_diff(tmp_path):
    write_manifest(
        tmp_path / "q.yaml",
        "metadata:\n  labels: {team: core, tier: gold}\n  description: doc\n"
        "entities:\n  - user: a\n    metadata: {labels: {tier: silver}}\n"
        "    quotas: {producer_byte_rate: 1MiB}\n",
    )
    snap = tmp_path / "s.json"
    snap.write_text('{"format_version": 1, "cluster_id": "x", "entities": []}')
    plan = run_cli("plan", tmp_path / "q.yaml", "--state", snap, "--format", "json")
    assert plan.exit_code == 0, plan.stderr
    assert plan.json["changes"][0]["metadata"] == {
        "labels": {"team": "core", "tier": "silver"},
        "description": "doc",
    }
    snap.write_text(
        '{"format_version": 1, "cluster_id": "x", "entities": ['
        '{"entity": {"user": "a"}, "quotas": {"producer_byte_rate": 1048576.0}}]}'
    )
    same = run_cli("plan", tmp_path / "q.yaml", "--state", snap, "--detailed-exitcode")
    assert same.exit_code == 0, same.stdout + same.stderr
    assert same.stdout.startswith("No changes.")
