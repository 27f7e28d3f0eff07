"""Adoption over the wire: export owns the cluster, refuses to overwrite edits, and import pulls
single entities into the manifests keeping every other byte (sandbox broker, TCP)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kqplan.core.entity import Entity
from kqplan.manifest.export import yaml_value
from kqplan.sandbox import Sandbox, SandboxConfig
from tests.helpers import run_cli

SEED = {
    Entity.user("alice"): {"producer_byte_rate": 1048576.0, "consumer_byte_rate": 2097152.0},
    Entity.user("bob"): {"producer_byte_rate": 1024.0},
    Entity.user_client("jörg/ü", "app"): {"request_percentage": 12.5},
    Entity.user(None): {"producer_byte_rate": 1e15},
}


@pytest.fixture
def box() -> Iterator[Sandbox]:
    with Sandbox.start(SandboxConfig(seed=SEED, cluster_id="adopt-me")) as sandbox:
        yield sandbox


def kq(box: Sandbox, *args: str | Path):
    return run_cli(*args, "--bootstrap-server", box.bootstrap)


def test_exported_manifests_own_the_cluster(box, tmp_path):
    out = tmp_path / "m"
    assert kq(box, "export", "--split-by", "user", "--out", out).exit_code == 0
    ownership = (out / "ownership.yaml").read_text()
    assert "  prune: true\n  scope:\n    - {user: '*'}\n    - {user: <default>}\n" in ownership
    assert "    - {user: '*', client-id: '*'}\n" in ownership
    # letters of any script stay readable; the '/' is replaced, and a hash keeps the name unique
    assert [p.name for p in (out / "users").iterdir() if p.name.startswith("jörg")] == [
        next(p.name for p in (out / "users").iterdir() if p.name.startswith("jörg_ü-"))]
    defaults = (out / "defaults.yaml").read_text()
    assert defaults.splitlines()[0].startswith("# yaml-language-server: $schema=")
    assert "quotas: {producer_byte_rate: 1000TB}" in defaults
    assert kq(box, "plan", out).stdout.startswith("No changes.")
    # an out-of-band entity is now drift inside the owned scope: plan deletes it
    assert kq(box, "alter", "--names", "user=mallory", "--add", "producer_byte_rate=1").exit_code == 0
    plan = kq(box, "plan", out, "--detailed-exitcode")
    assert plan.exit_code == 2
    assert "  - {user=mallory}" in plan.stdout


def test_export_refuses_to_overwrite_edits_and_stale_files(box, tmp_path):
    out = tmp_path / "m"
    assert kq(box, "export", "--split-by", "user", "--out", out).exit_code == 0
    alice = out / "users" / "alice.yaml"
    alice.write_text(alice.read_text().replace("consumer_byte_rate: 2MiB", "consumer_byte_rate: 3MB"))
    refused = kq(box, "export", "--split-by", "user", "--out", out)
    assert refused.exit_code == 1
    assert f"1 file(s) differ from what export would write ({alice})" in refused.stderr
    assert "3MB" in alice.read_text()
    box.engine.load({e: q for e, q in SEED.items() if e != Entity.user("bob")})
    box._describe_cache.clear()
    stale = kq(box, "export", "--split-by", "user", "--out", out)
    assert stale.exit_code == 1
    assert "1 exported file(s) hold entities no longer on the cluster" in stale.stderr
    forced = kq(box, "export", "--split-by", "user", "--out", out, "--force")
    assert forced.exit_code == 0, forced.stderr
    assert not (out / "users" / "bob.yaml").exists()
    assert "2MiB" in alice.read_text()


def test_import_updates_one_entity_and_keeps_every_other_byte(box, tmp_path):
    manifests = tmp_path / "m"
    manifests.mkdir()
    text = ("# Team quotas, reviewed by @platform\n"
            "apiVersion: kqplan/v1\nkind: ClientQuotas\nentities:\n"
            "  # the payments API: raised in INC-42\n"
            "  - user: alice\n"
            "    quotas: {producer_byte_rate: 1MiB, consumer_byte_rate: 2MiB}   # keep this comment\n"
            '  - user: "bob"\n'
            "    quotas:\n"
            "      producer_byte_rate: 1024  # bob's comment\n")
    (manifests / "q.yaml").write_text(text)
    assert kq(box, "alter", "--names", "user=bob", "--add", "producer_byte_rate=4KiB").exit_code == 0
    imported = kq(box, "import", manifests, "--names", "user=bob")
    assert imported.exit_code == 0, imported.stderr
    assert imported.stdout.endswith(f"  ~ {{user=bob}} updated in {manifests / 'q.yaml'}\n")
    assert (manifests / "q.yaml").read_text() == text.replace(
        "producer_byte_rate: 1024  # bob's comment", "producer_byte_rate: 4KiB  # bob's comment")
    everything = kq(box, "import", manifests, "--all-unmanaged", "--split-by", "user")
    assert everything.exit_code == 0, everything.stderr
    assert (manifests / "defaults.yaml").exists()
    assert kq(box, "plan", manifests).stdout.startswith("No changes.")
    missing = kq(box, "import", manifests, "--names", "user=nobody")
    assert missing.exit_code == 1
    assert "not on the cluster: {user=nobody}" in missing.stderr


def test_empty_cluster_exports_a_manifest_that_plans(tmp_path):
    with Sandbox.start(SandboxConfig(cluster_id="empty")) as empty:
        out = kq(empty, "export")
        assert out.exit_code == 0
        assert out.stdout.endswith("entities: []\n")
        (tmp_path / "e.yaml").write_text(out.stdout)
        assert kq(empty, "plan", tmp_path / "e.yaml").stdout.startswith("No changes.")


@pytest.mark.parametrize(("value", "text"), [
    (1e15, "1000TB"), (10485760.0, "10MiB"), (1000000.0, "1MB"), (1024.0, "1KiB"), (1000.0, "1KB"),
    (1235.0, "1235"), (1235.0000001, "1235.0000001"), (3 * 2**40, "3TiB")])
def test_byte_rates_export_in_the_shortest_exact_unit(value, text):
    assert yaml_value("producer_byte_rate", value) == text


def test_apply_json_report_on_stdout_and_a_report_even_with_nothing_to_do(box, tmp_path):
    manifests = tmp_path / "m"
    assert kq(box, "export", "--out", manifests).exit_code == 0
    report = tmp_path / "report.json"
    report.write_text("stale")
    nothing = kq(box, "apply", manifests, "--auto-approve", "--report", report, "--format", "json")
    assert nothing.exit_code == 0, nothing.stderr
    assert nothing.json["entities"] == []
    assert json.loads(report.read_text()) == nothing.json  # the old report does not stand
    (manifests / "quotas.yaml").write_text((manifests / "quotas.yaml").read_text().replace(
        "producer_byte_rate: 1KiB", "producer_byte_rate: 2KiB"))
    changed = kq(box, "apply", manifests, "--auto-approve", "--format", "json")
    assert changed.exit_code == 0, changed.stderr
    assert [(e["display"], e["status"]) for e in changed.json["entities"]] == [("{user=bob}", "applied")]
    assert changed.stderr.startswith("kqplan will perform the following actions")  # the plan: stderr
    prompt = kq(box, "apply", manifests, "--format", "json")
    assert prompt.exit_code == 1
    assert json.loads(prompt.stderr)["error"]["message"].startswith("--format json needs --auto-approve")
    missing_dir = kq(box, "apply", manifests, "--auto-approve", "--report", tmp_path / "no" / "r.json")
    assert missing_dir.exit_code == 0, missing_dir.stderr  # the directory is created, as by mkdir -p
    assert json.loads((tmp_path / "no" / "r.json").read_text())["entities"] == []


def test_invalid_cluster_values_are_reported_and_repaired(tmp_path):
    # what a ZooKeeper-mode cluster stores and KRaft refuses: 0 (throttled to nothing), negative
    seed = {Entity.user("zed"): {"producer_byte_rate": 0.0}, Entity.user("neg"): {"request_percentage": -5.0}}
    with Sandbox.start(SandboxConfig(seed=seed, cluster_id="zk-like")) as box:
        (tmp_path / "q.yaml").write_text("apiVersion: kqplan/v1\nkind: ClientQuotas\nentities:\n"
                                         "  - user: zed\n    quotas: {producer_byte_rate: 1MiB}\n")
        plan = kq(box, "plan", tmp_path / "q.yaml", "--format", "json")
        assert plan.exit_code == 0, plan.stderr
        notes = [n for n in plan.json["notes"] if n.startswith("invalid cluster state")]
        assert notes == [
            "invalid cluster state: {user=neg} request_percentage=-5.0 is refused by Kafka's own rules "
            "(Quota request_percentage must be greater than 0); list the entity in a manifest (or prune it) "
            "to repair it.",
            "invalid cluster state: {user=zed} producer_byte_rate=0.0 is refused by Kafka's own rules "
            "(Quota producer_byte_rate must be greater than 0); this plan repairs it."]
        exported = kq(box, "export")
        assert "  # not exported: {user=zed} producer_byte_rate=0.0" in exported.stdout
        assert "not exported" in exported.stderr
