"""[policy] guardrails: KQP150-154 located errors in validate and plan, the deletion brake (count and
percent, KQP155, --allow-mass-delete) and protect: true (KQP156), over TCP against the sandbox."""

from __future__ import annotations

from pathlib import Path

from kqplan.core.entity import Entity
from kqplan.sandbox import Sandbox, SandboxConfig
from tests.helpers import run_cli, shown, write_manifest


def _project(tmp_path: Path, policy: str, body: str) -> tuple[Path, Path]:
    (tmp_path / "kqplan.toml").write_text("[policy]\n" + policy)
    return tmp_path / "kqplan.toml", write_manifest(tmp_path / "m" / "q.yaml", body)


def _validate(cfg: Path, path: Path):
    return run_cli("--config", cfg, "validate", path)


def test_min_and_max_with_units(tmp_path):
    cfg, q = _project(
        tmp_path,
        '[policy.keys.consumer_byte_rate]\nmin = "1MiB"\nmax = "100MiB"\n',
        "entities:\n  - user: a\n    quotas: {consumer_byte_rate: 1KiB}\n"
        "  - user: b\n    quotas: {consumer_byte_rate: 1GiB}\n"
        "  - user: c\n    quotas: {consumer_byte_rate: 10MiB}\n",
    )
    result = _validate(cfg, q)
    assert result.exit_code == 1
    lines = [line for line in result.stdout.splitlines() if "error[" in line]
    m = shown(q, tmp_path)  # m/q.yaml: from the root, kqplan.toml's directory; the config as opened
    assert lines == [
        f"{m}:5:34: error[KQP150] consumer_byte_rate = 1024 of {{user=a}} is below the minimum 1048576"
        f" ([policy] keys.consumer_byte_rate.min in {cfg})",
        f"{m}:7:34: error[KQP151] consumer_byte_rate = 1073741824 of {{user=b}} is above the maximum "
        "104857600"
        f" ([policy] keys.consumer_byte_rate.max in {cfg})",
    ]


def test_required_keys_only_on_user_entities(tmp_path):
    cfg, q = _project(
        tmp_path,
        'required-keys = ["request_percentage"]\n',
        "entities:\n  - user: a\n    client-id: x\n    quotas: {producer_byte_rate: 1}\n"
        "  - client-id: y\n    quotas: {producer_byte_rate: 1}\n",
    )
    result = _validate(cfg, q)
    assert result.exit_code == 1
    assert (f"\n{shown(q, tmp_path)}:4:5: error[KQP152] {{user=a, client-id=x}} does not set "
            "request_percentage") in "\n" + result.stdout
    assert "client-id=y" not in result.stdout


def test_required_defaults_each_form(tmp_path):
    forms = {
        "user": "{user=<default>}",
        "client-id": "{client-id=<default>}",
        "user,client-id": "{user=<default>, client-id=<default>}",
        "ip": "{ip=<default>}",
    }
    for form, display in forms.items():
        cfg, q = _project(
            tmp_path,
            f'required-defaults = ["{form}"]\n',
            "entities:\n  - user: a\n    quotas: {producer_byte_rate: 1}\n",
        )
        result = _validate(cfg, q)
        assert result.exit_code == 1, form
        assert f"error[KQP153] no manifest lists {display}" in result.stdout, (form, result.stdout)
    cfg, q = _project(
        tmp_path,
        'required-defaults = ["user,client-id"]\n',
        "entities:\n  - {user: <default>, client-id: <default>, quotas: {producer_byte_rate: 1}}\n",
    )
    assert _validate(cfg, q).exit_code == 0


def test_required_labels_document_level_satisfies(tmp_path):
    cfg, q = _project(
        tmp_path,
        'required-labels = ["team", "env"]\n',
        "metadata: {labels: {team: core}}\nentities:\n  - user: a\n"
        "    metadata: {labels: {env: prod}}\n    quotas: {producer_byte_rate: 1}\n"
        "  - user: b\n    quotas: {producer_byte_rate: 1}\n",
    )
    result = _validate(cfg, q)
    assert result.exit_code == 1
    errors = [line for line in result.stdout.splitlines() if "error[" in line]
    assert errors == [
        f"{shown(q, tmp_path)}:8:5: error[KQP154] {{user=b}} has no label env "
        f"([policy] required-labels in {cfg})"
    ]


def test_policy_errors_fail_plan_too(tmp_path):
    cfg, q = _project(
        tmp_path,
        '[policy.keys.producer_byte_rate]\nmax = "1MiB"\n',
        "entities:\n  - user: a\n    quotas: {producer_byte_rate: 2MiB}\n",
    )
    with Sandbox.start(SandboxConfig(cluster_id="p")) as box:
        plan = run_cli("--config", cfg, "plan", q, "--bootstrap-server", box.bootstrap)
        assert plan.exit_code == 1
        assert "error[KQP151]" in plan.stdout + plan.stderr


def test_bad_policy_values_are_kqp190(tmp_path):
    cfg, q = _project(tmp_path, 'required-defaults = ["usr"]\n', "entities: []\n")
    result = _validate(cfg, q)
    assert result.exit_code == 1
    assert f"\n{shown(cfg, tmp_path)}:2:1: error[KQP190]" in "\n" + result.stderr
    cfg, q = _project(tmp_path, "max-delete-percent = 150\n", "entities: []\n")
    result = _validate(cfg, q)
    assert result.exit_code == 1
    assert f"\n{shown(cfg, tmp_path)}:2:1: error[KQP190]" in "\n" + result.stderr
    cfg, q = _project(tmp_path, '[policy.keys.producer_byte_rate]\nmin = "10 MB/s"\n', "entities: []\n")
    assert _validate(cfg, q).exit_code == 1


def _brake_setup(box: Sandbox, tmp_path: Path, policy: str, managed: int, removed: int) -> tuple[Path, Path]:
    """`managed` entities old-N on the cluster, all in scope; the manifest keeps managed-removed of them."""
    box.engine.load({Entity.user(f"old-{i}"): {"producer_byte_rate": 1.0} for i in range(managed)})
    kept = "".join(
        f"  - user: old-{i}\n    quotas: {{producer_byte_rate: 1}}\n" for i in range(removed, managed)
    )
    cfg, q = _project(
        tmp_path,
        policy,
        "ownership:\n  prune: true\n  scope: [{user: 'old-*'}]\n"
        + ("entities:\n" + kept if kept else "entities: []\n"),
    )
    return cfg, q


def test_brake_by_percent_and_allowed_with_the_flag(tmp_path):
    with Sandbox.start(SandboxConfig(cluster_id="b")) as box:
        cfg, q = _brake_setup(
            box, tmp_path, "max-delete = 100\nmax-delete-percent = 25\n", managed=8, removed=3
        )
        refused = run_cli("--config", cfg, "apply", q, "--bootstrap-server", box.bootstrap, "--auto-approve")
        assert refused.exit_code == 1
        assert "KQP155" in refused.stderr
        assert "3 entities" in refused.stderr
        assert len(box.state) == 8
        allowed = run_cli(
            "--config",
            cfg,
            "apply",
            q,
            "--bootstrap-server",
            box.bootstrap,
            "--auto-approve",
            "--allow-mass-delete",
        )
        assert allowed.exit_code == 0, allowed.stdout + allowed.stderr
        assert sorted(e.display for e in box.state) == [f"{{user=old-{i}}}" for i in range(3, 8)]


def test_brake_at_the_limits_passes(tmp_path):
    # exactly max-delete deletions and exactly 25 %: not more than the limits
    with Sandbox.start(SandboxConfig(cluster_id="b")) as box:
        cfg, q = _brake_setup(
            box, tmp_path, "max-delete = 2\nmax-delete-percent = 25\n", managed=8, removed=2
        )
        plan = run_cli("--config", cfg, "plan", q, "--bootstrap-server", box.bootstrap)
        assert plan.exit_code == 0, plan.stdout + plan.stderr
        cfg, q = _brake_setup(
            box, tmp_path, "max-delete = 2\nmax-delete-percent = 100\n", managed=8, removed=3
        )
        over = run_cli("--config", cfg, "plan", q, "--bootstrap-server", box.bootstrap)
        assert over.exit_code == 1
        assert "the plan deletes 3 entities: more than 2" in over.stderr


def test_one_deletion_is_never_braked_by_percent(tmp_path):
    with Sandbox.start(SandboxConfig(cluster_id="b")) as box:
        cfg, q = _brake_setup(box, tmp_path, "max-delete-percent = 10\n", managed=2, removed=1)
        plan = run_cli("--config", cfg, "plan", q, "--bootstrap-server", box.bootstrap)
        assert plan.exit_code == 0, plan.stdout + plan.stderr


def test_protect_refuses_even_with_allow_mass_delete(tmp_path):
    with Sandbox.start(SandboxConfig(cluster_id="b")) as box:
        box.engine.load({Entity.user("keep"): {"producer_byte_rate": 1.0}})
        write_manifest(
            tmp_path / "base" / "q.yaml",
            "entities:\n  - user: keep\n    protect: true\n    quotas: {producer_byte_rate: 1}\n",
        )
        write_manifest(
            tmp_path / "over" / "q.yaml",
            "entities:\n  - user: keep\n    override: true\n    quotas: {producer_byte_rate: null}\n",
        )
        for extra in ((), ("--allow-mass-delete",)):
            result = run_cli(
                "apply",
                tmp_path / "base",
                tmp_path / "over",
                "--bootstrap-server",
                box.bootstrap,
                "--auto-approve",
                *extra,
            )
            assert result.exit_code == 1, extra
            assert "KQP156" in result.stderr
            assert "deletes 1 protected entity ({user=keep})" in result.stderr
        assert box.state[Entity.user("keep")] == {"producer_byte_rate": 1.0}


def test_creations_do_not_dilute_the_delete_percentage(tmp_path):
    # 2 of 4 managed entities deleted (50 %) while 20 are created: still braked
    with Sandbox.start(SandboxConfig(cluster_id="b")) as box:
        box.engine.load({Entity.user(f"old-{i}"): {"producer_byte_rate": 1.0} for i in range(4)})
        kept = "".join(f"  - user: old-{i}\n    quotas: {{producer_byte_rate: 1}}\n" for i in range(2, 4))
        new = "".join(f"  - user: old-new-{i}\n    quotas: {{producer_byte_rate: 1}}\n" for i in range(20))
        cfg, q = _project(
            tmp_path, "max-delete-percent = 25\n",
            "ownership:\n  prune: true\n  scope: [{user: 'old-*'}]\nentities:\n" + kept + new,
        )
        plan = run_cli("--config", cfg, "plan", q, "--bootstrap-server", box.bootstrap)
        assert plan.exit_code == 1, plan.stdout
        assert "KQP155" in plan.stderr
