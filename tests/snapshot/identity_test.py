"""Snapshots record the Kafka version and metadata mode kqplan saw (issue 18): export and fleet
snapshot write them, and a plan from a ZooKeeper cluster's snapshot follows ZooKeeper's rules
offline; snapshots without them (older kqplan) still read."""

from __future__ import annotations

import json
from pathlib import Path

from kqplan.core.entity import Entity
from kqplan.sandbox import Flavor, Sandbox, SandboxConfig
from tests.helpers import run_cli, write_manifest

FRACTION = """\
entities:
  - user: zed
    quotas: {producer_byte_rate: 1235.0000001}
"""


def test_export_records_version_and_mode_and_plan_follows_them(tmp_path: Path) -> None:
    with Sandbox.start(SandboxConfig(cluster_id="zk-1", flavor=Flavor.ZK)) as zk:
        zk.engine.load({Entity.user("alice"): {"producer_byte_rate": 1024.0}})
        snapshot = tmp_path / "zk.json"
        done = run_cli("export", "--format", "json", "--out", snapshot, "--bootstrap-server", zk.bootstrap)
        assert done.exit_code == 0, done.stdout + done.stderr
    doc = json.loads(snapshot.read_text())
    assert (doc["cluster_id"], doc["kafka_version"], doc["mode"]) == ("zk-1", ">=3.9", "zookeeper")
    manifest = write_manifest(tmp_path / "m" / "q.yaml", FRACTION)
    plan = run_cli("plan", manifest, "--state", snapshot)
    assert plan.exit_code == 1
    assert "KQP145" in plan.stderr
    assert "ZooKeeper-mode broker stores 1235.0000001 as 1235" in plan.stderr
    json_plan = run_cli("plan", write_manifest(tmp_path / "ok" / "q.yaml", FRACTION.replace(".0000001", "")),
                        "--state", snapshot, "--format", "json")
    assert json_plan.exit_code == 0, json_plan.stdout + json_plan.stderr
    assert json_plan.json["cluster"] == {"id": "zk-1", "bootstrap": f"snapshot:{snapshot}",
                                         "version": ">=3.9", "mode": "zookeeper"}


def test_snapshots_without_version_still_read_and_keep_kraft_rules(tmp_path: Path) -> None:
    snapshot = tmp_path / "old.json"
    snapshot.write_text(json.dumps({"format_version": 1, "cluster_id": "old", "entities": []}))
    manifest = write_manifest(tmp_path / "m" / "q.yaml", FRACTION)
    plan = run_cli("plan", manifest, "--state", snapshot, "--format", "json")
    assert plan.exit_code == 0, plan.stdout + plan.stderr  # KRaft tolerates a fraction up to 1e-6
    assert plan.json["cluster"]["mode"] is None


def test_fleet_snapshot_records_what_it_saw(tmp_path: Path) -> None:
    with Sandbox.start(SandboxConfig(cluster_id="k-1")) as kraft:
        (tmp_path / "kqplan.toml").write_text(f'[clusters.a]\nbootstrap-server = "{kraft.bootstrap}"\n')
        done = run_cli("--config", tmp_path / "kqplan.toml", "fleet", "snapshot", "--out", tmp_path / "out")
        assert done.exit_code == 0, done.stdout + done.stderr
    doc = json.loads((tmp_path / "out" / "a.json").read_text())
    assert (doc["cluster_id"], doc["kafka_version"], doc["mode"]) == ("k-1", ">=4.3", "kraft")


def test_the_sandboxs_state_file_records_its_flavour(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    with Sandbox.start(SandboxConfig(flavor=Flavor.ZK, state_file=state)) as zk:
        done = run_cli("alter", "--bootstrap-server", zk.bootstrap, "--names", "user=a",
                       "--add", "producer_byte_rate=1024")
        assert done.exit_code == 0, done.stdout + done.stderr
    doc = json.loads(state.read_text())
    assert (doc["kafka_version"], doc["mode"]) == ("3.9", "zookeeper")
    plan = run_cli("plan", write_manifest(tmp_path / "m" / "q.yaml", FRACTION), "--state", state)
    assert plan.exit_code == 1  # a plan from it follows ZooKeeper's rules offline
    assert "KQP145" in plan.stderr
