"""The deletion brake (KQP155) names the setting that tripped it — max-delete (a count) or
max-delete-percent (a share of the managed entities), or both — and says when it is kqplan's default
(the brake is on without any ``[policy]``), with how to change it. It used to name ``[policy]
max-delete`` when the percentage had tripped."""

from __future__ import annotations

from pathlib import Path

from kqplan.core.entity import Entity
from kqplan.sandbox import Sandbox, SandboxConfig
from tests.helpers import run_cli, write_manifest

HINT_START = "  = help: review the deletions; pass --allow-mass-delete if they are meant, or set "


def _plan(tmp_path: Path, on_cluster: int, listed: int, policy: str | None):
    """A cluster of ``on_cluster`` users ``brake-N``, all in a pruned scope; the manifest lists the
    first ``listed``; ``policy`` is kqplan.toml's [policy] body (None: no kqplan.toml at all)."""
    seed = {Entity.user(f"brake-{i}"): {"producer_byte_rate": 1024.0} for i in range(on_cluster)}
    body = "ownership: {prune: true, scope: [{user: \"brake-*\"}]}\nentities:\n" + "".join(
        f"  - user: brake-{i}\n    quotas: {{producer_byte_rate: 1KiB}}\n" for i in range(listed))
    manifest = write_manifest(tmp_path / "m" / "q.yaml", body)
    config = () if policy is None else ("--config", tmp_path / "kqplan.toml")
    if policy is not None:
        (tmp_path / "kqplan.toml").write_text("[policy]\n" + policy)
    with Sandbox.start(SandboxConfig(port=0, seed=seed)) as sandbox:
        return run_cli(*config, "plan", manifest, "--bootstrap-server", sandbox.bootstrap)


def _error(result) -> list[str]:
    assert result.exit_code == 1, result.stdout + result.stderr
    return result.stderr.splitlines()


def test_the_default_percentage_is_named_as_the_default(tmp_path: Path):
    assert _error(_plan(tmp_path, 5, 2, None)) == [
        "Error: the plan deletes 3 entities: 60% of the 5 managed entities, over 25% "
        "(the default [policy] max-delete-percent) [KQP155]",
        HINT_START + "max-delete-percent under [policy] in kqplan.toml"]


def test_the_default_count_is_named_as_the_default(tmp_path: Path):
    assert _error(_plan(tmp_path, 100, 89, "")) == [  # a kqplan.toml without the two settings
        "Error: the plan deletes 11 entities: more than 10 (the default [policy] max-delete) [KQP155]",
        HINT_START + "max-delete under [policy] in kqplan.toml"]


def test_configured_settings_are_named_where_they_are_set(tmp_path: Path):
    config = tmp_path / "kqplan.toml"
    assert _error(_plan(tmp_path, 5, 2, "max-delete = 2\nmax-delete-percent = 40\n")) == [
        f"Error: the plan deletes 3 entities: more than 2 ([policy] max-delete in {config}) and 60% of the "
        f"5 managed entities, over 40% ([policy] max-delete-percent in {config}) [KQP155]",
        HINT_START + "max-delete and max-delete-percent under [policy] in kqplan.toml"]


def test_a_setting_kqplan_toml_sets_to_the_default_value_is_named_where_it_is_set(tmp_path: Path):
    """``max-delete = 10`` in kqplan.toml is kqplan.toml's setting, not "the default" (the brake
    used to compare the value with the default)."""
    config = tmp_path / "kqplan.toml"
    assert _error(_plan(tmp_path, 100, 89, "max-delete = 10\n")) == [
        f"Error: the plan deletes 11 entities: more than 10 ([policy] max-delete in {config}) [KQP155]",
        HINT_START + "max-delete under [policy] in kqplan.toml"]


def test_a_setting_spelled_with_underscores_is_named_where_it_is_set(tmp_path: Path):
    """``max_delete = 5`` is the same setting as ``max-delete = 5`` (the schema takes both
    spellings): kqplan.toml's, never "the default"."""
    config = tmp_path / "kqplan.toml"
    assert _error(_plan(tmp_path, 100, 94, "max_delete = 5\n")) == [
        f"Error: the plan deletes 6 entities: more than 5 ([policy] max-delete in {config}) [KQP155]",
        HINT_START + "max-delete under [policy] in kqplan.toml"]
