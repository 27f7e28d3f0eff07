"""Unmanaged drift: cluster entities no manifest lists and no ownership scope covers are listed in plan
(text and JSON), never changed; --fail-on-unmanaged / allow-unmanaged = false fail the plan; sandbox and
the real broker."""

from __future__ import annotations

import uuid

from kqplan.core.entity import Entity
from kqplan.sandbox import Sandbox, SandboxConfig
from tests.helpers import mine, run_cli, write_manifest


def test_out_of_band_alter_is_unmanaged_on_live_targets(live, tmp_path):
    p = f"kqplan-unm-{uuid.uuid4().hex[:8]}"
    q = write_manifest(
        tmp_path / "q.yaml", f"entities:\n  - user: {p}-a\n    quotas: {{producer_byte_rate: 1MiB}}\n"
    )
    (tmp_path / "kqplan.toml").write_text(
        f'[clusters.x]\nbootstrap-server = "{live.bootstrap}"\nmanifests = ["q.yaml"]\n'
    )
    cfg = tmp_path / "kqplan.toml"
    try:
        assert run_cli("--config", cfg, "apply", "--cluster", "x", "--auto-approve").exit_code == 0
        want = {Entity.user(f"{p}-a"): {"producer_byte_rate": 2.0**20}}
        assert live.until(mine(p), want) == want
        alter = run_cli(
            "alter",
            "--bootstrap-server",
            live.bootstrap,
            "--names",
            f"user={p}-m,client-id=c",
            "--add",
            "consumer_byte_rate=5",
        )
        assert alter.exit_code == 0, alter.stderr
        live.until(
            mine(p), {**want, Entity.of({"user": f"{p}-m", "client-id": "c"}): {"consumer_byte_rate": 5.0}}
        )
        plan = run_cli(
            "plan", q, "--bootstrap-server", live.bootstrap, "--format", "json", "--detailed-exitcode"
        )
        assert plan.exit_code == 0, plan.stdout + plan.stderr
        assert plan.json["changes"] == []
        assert {
            "entity": {"user": f"{p}-m", "client-id": "c"},
            "display": f"{{user={p}-m, client-id=c}}",
            "quotas": {"consumer_byte_rate": 5.0},
        } in plan.json["unmanaged"]
        text = run_cli("plan", q, "--bootstrap-server", live.bootstrap)
        unmanaged = len(plan.json["unmanaged"])
        assert f"{unmanaged} entit" in text.stdout and "not managed by these manifests" in text.stdout  # noqa: PT018
        if unmanaged <= 10:  # text lists the first ten (a shared real broker holds other tests' entities)
            assert f"  ? {{user={p}-m, client-id=c}}\n" in text.stdout
        strict = run_cli("plan", q, "--bootstrap-server", live.bootstrap, "--fail-on-unmanaged")
        assert strict.exit_code == 1
        assert "not managed by these manifests" in strict.stderr
        (tmp_path / "kqplan.toml").write_text(
            f'[clusters.x]\nbootstrap-server = "{live.bootstrap}"\nmanifests = ["q.yaml"]\n'
            "[policy]\nallow-unmanaged = false\n"
        )
        policy = run_cli("--config", cfg, "plan", "--cluster", "x")
        assert policy.exit_code == 1
        assert "not managed by these manifests" in policy.stderr
        # an ownership scope that covers it makes it managed: a deletion, not unmanaged (the policy
        # is dropped first: a shared real broker holds other tests' entities, unmanaged here)
        (tmp_path / "kqplan.toml").write_text(
            f'[clusters.x]\nbootstrap-server = "{live.bootstrap}"\nmanifests = ["q.yaml"]\n')
        write_manifest(
            tmp_path / "q.yaml",
            f"ownership:\n  prune: true\n  scope: [{{user: '{p}-*'}}]\n"
            f"entities:\n  - user: {p}-a\n    quotas: {{producer_byte_rate: 1MiB}}\n",
        )
        owned = run_cli("plan", q, "--bootstrap-server", live.bootstrap, "--format", "json")
        assert owned.exit_code == 0, owned.stderr
        assert [(c["display"], c["action"]) for c in owned.json["changes"]] == [
            (f"{{user={p}-m, client-id=c}}", "delete")
        ]
        assert not any(p in u["display"] for u in owned.json["unmanaged"])
    finally:
        live.remove_all(mine(p))


def test_unmanaged_text_section_and_nothing_changed(tmp_path):
    q = write_manifest(
        tmp_path / "q.yaml", "entities:\n  - user: a\n    quotas: {producer_byte_rate: 1MiB}\n"
    )
    with Sandbox.start(SandboxConfig(cluster_id="u")) as box:
        box.engine.load(
            {Entity.user("a"): {"producer_byte_rate": 2.0**20}, Entity.user("b"): {"producer_byte_rate": 7.0}}
        )
        plan = run_cli("--no-color", "plan", q, "--bootstrap-server", box.bootstrap)
        assert plan.exit_code == 0, plan.stderr
        assert plan.stdout == (
            "No changes. The cluster matches the manifests. (1 entity checked on cluster u "
            f"({box.bootstrap}), Kafka >=4.3 (kraft))\n\n"
            "1 entity on the cluster is not managed by these manifests (left untouched; adopt with "
            "`kqplan import`):\n  ? {user=b}\n"
        )
        applied = run_cli("apply", q, "--bootstrap-server", box.bootstrap, "--auto-approve")
        assert applied.exit_code == 0, applied.stdout + applied.stderr
        assert box.state[Entity.user("b")] == {"producer_byte_rate": 7.0}
