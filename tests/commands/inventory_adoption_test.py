"""Adoption with an inventory works the first time (issue 32 §1): export and import guard the
manifests with the inventory's name; a name and its id are one guard; a live-id guard holds on
its cluster; the layer being written is created, not refused; import follows export's layout;
``kqplan init`` adopts several clusters in one step, all or nothing, never overwriting."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kqplan.core.entity import Entity
from kqplan.sandbox import Sandbox, SandboxConfig
from tests.helpers import Result, run_cli, write_manifest

PROD_SEED = {Entity.user("alice"): {"producer_byte_rate": 1000.0},
             Entity.user("bob"): {"consumer_byte_rate": 2000.0}}
STAGING_SEED = {Entity.user("carol"): {"producer_byte_rate": 10.0}}


@pytest.fixture
def prod() -> Iterator[Sandbox]:
    with Sandbox.start(SandboxConfig(port=0, cluster_id="PROD-ID", seed=PROD_SEED)) as box:
        yield box


@pytest.fixture
def staging() -> Iterator[Sandbox]:
    with Sandbox.start(SandboxConfig(port=0, cluster_id="STAGING-ID-123", seed=STAGING_SEED)) as box:
        yield box


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def inventory(repo: Path, prod: Sandbox, staging: Sandbox | None = None, *, staging_id: bool = True) -> None:
    text = f'[clusters.prod]\nbootstrap-server = "{prod.bootstrap}"\nmanifests = ["quotas/prod"]\n'
    if staging is not None:
        text += (f'\n[clusters.staging]\nbootstrap-server = "{staging.bootstrap}"\n'
                 + ('id = "STAGING-ID-123"\n' if staging_id else "")
                 + 'manifests = ["quotas/staging", "overlays/staging"]\n')
    (repo / "kqplan.toml").write_text(text)


def no_changes(name: str) -> Result:
    result = run_cli("plan", "--cluster", name, "--detailed-exitcode")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "No changes." in result.stdout
    return result


def test_export_into_the_inventory_layer_writes_the_name_and_plans_clean(repo, prod):
    inventory(repo, prod)
    result = run_cli("export", "--cluster", "prod", "--out", "quotas/prod")  # the layer is created
    assert result.exit_code == 0, result.stderr
    text = (repo / "quotas/prod/quotas.yaml").read_text()
    assert "\ncluster: prod\n" in text
    assert "PROD-ID" not in text.split("kind: ClientQuotas")[1]  # the guard is the name, not the id
    no_changes("prod")


def test_another_cluster_s_missing_layer_does_not_stop_a_plan(repo, prod, staging):
    inventory(repo, prod, staging)
    assert run_cli("export", "--cluster", "prod", "--out", "quotas/prod").exit_code == 0
    no_changes("prod")
    result = run_cli("plan", "--cluster", "staging")
    assert result.exit_code == 1
    assert "Error: cluster 'staging': manifests layer 'quotas/staging' does not exist" in result.stderr
    assert "`kqplan export --cluster staging --out quotas/staging` writes it" in result.stderr
    validate = run_cli("validate", "quotas/prod")  # the whole project's check names them
    assert validate.exit_code == 1
    assert ("error[KQP191] cluster 'staging': manifests layer 'quotas/staging' does not exist"
            in validate.stderr)


def test_a_live_id_guard_holds_on_its_cluster_and_names_the_fix_elsewhere(repo, prod, staging):
    inventory(repo, prod)
    write_manifest(repo / "quotas/prod/q.yaml", "cluster: PROD-ID\nentities:\n  - user: alice\n"
                   "    quotas: {producer_byte_rate: 1000}\n  - user: bob\n"
                   "    quotas: {consumer_byte_rate: 2000}\n")
    result = no_changes("prod")
    assert "warning[KQP141] cluster 'PROD-ID' is not in the inventory" in result.stderr
    assert 'id = "PROD-ID" under [clusters.prod]' in result.stderr
    wrong = run_cli("plan", "--cluster", "prod", "--bootstrap-server", staging.bootstrap)
    assert wrong.exit_code == 1
    assert "wrong cluster: the manifests are guarded to 'PROD-ID'" in wrong.stderr
    assert 'record its id: id = "STAGING-ID-123" under [clusters.prod]' in wrong.stderr


def test_a_name_guard_without_an_id_needs_the_cluster_named(repo, prod):
    inventory(repo, prod)
    assert run_cli("export", "--cluster", "prod", "--out", "quotas/prod").exit_code == 0
    result = run_cli("plan", "quotas/prod", "--bootstrap-server", prod.bootstrap)
    assert result.exit_code == 1
    assert "guarded to cluster 'prod', which has no id in" in result.stderr
    assert 'plan with --cluster prod, or record its id: id = "PROD-ID" under [clusters.prod]' in result.stderr


def test_a_name_and_its_id_are_one_guard(repo, prod, staging):
    inventory(repo, prod, staging)
    write_manifest(repo / "quotas/staging/q.yaml", "cluster: STAGING-ID-123\nentities:\n  - user: carol\n"
                   "    quotas: {producer_byte_rate: 10}\n")
    write_manifest(repo / "overlays/staging/o.yaml", "cluster: staging\nentities: []\n")
    no_changes("staging")


def test_import_keeps_the_overlay_s_guard_and_plans_clean(repo, prod, staging):
    inventory(repo, prod, staging)
    assert run_cli("export", "--cluster", "staging", "--out", "quotas/staging").exit_code == 0
    write_manifest(repo / "overlays/staging/extra.yaml", "cluster: staging\nentities: []\n")
    assert run_cli("alter", "--names", "user=mallory", "--add", "producer_byte_rate=5",
                   "--bootstrap-server", staging.bootstrap).exit_code == 0
    # (the export's ownership scope covers every user: mallory is owned, not unmanaged)
    result = run_cli("import", "--names", "user=mallory", "overlays/staging", "--cluster", "staging")
    assert result.exit_code == 0, result.stderr
    written = (repo / "overlays/staging/quotas.yaml").read_text()
    assert "\ncluster: staging\n" in written
    no_changes("staging")


def test_import_into_a_layer_not_written_yet_creates_it(repo, prod, staging):
    inventory(repo, prod, staging)
    assert run_cli("export", "--cluster", "staging", "--out", "quotas/staging").exit_code == 0
    assert run_cli("alter", "--names", "user=mallory", "--add", "producer_byte_rate=5",
                   "--bootstrap-server", staging.bootstrap).exit_code == 0
    result = run_cli("import", "--names", "user=mallory", "overlays/staging", "--cluster", "staging")
    assert result.exit_code == 0, result.stderr
    assert "\ncluster: staging\n" in (repo / "overlays/staging/quotas.yaml").read_text()
    no_changes("staging")


def test_import_follows_the_layout_export_chose(repo, prod):
    inventory(repo, prod)
    assert run_cli("export", "--cluster", "prod", "--out", "quotas/prod", "--split-by", "user").exit_code == 0
    assert run_cli("alter", "--names", "user=mallory", "--add", "producer_byte_rate=5",
                   "--bootstrap-server", prod.bootstrap).exit_code == 0
    result = run_cli("import", "--names", "user=mallory", "quotas/prod", "--cluster", "prod")
    assert result.exit_code == 0, result.stderr
    assert (repo / "quotas/prod/users/mallory.yaml").is_file()
    assert not (repo / "quotas/prod/quotas.yaml").exists()
    again = run_cli("export", "--cluster", "prod", "--out", "quotas/prod", "--split-by", "user")
    assert again.exit_code == 0, again.stderr  # no "no longer on the cluster" for mallory
    no_changes("prod")


def test_init_adopts_two_clusters(repo, prod, staging):
    result = run_cli("init", "--cluster", f"prod={prod.bootstrap}",
                     "--cluster", f"staging={staging.bootstrap}")
    assert result.exit_code == 0, result.stderr
    toml = (repo / "kqplan.toml").read_text()
    assert '[clusters.prod]\n' in toml
    assert 'id = "PROD-ID"\n' in toml
    assert 'id = "STAGING-ID-123"\n' in toml
    assert 'manifests = ["quotas/staging"]' in toml
    assert "prod: 2 entities from cluster PROD-ID into quotas/prod" in result.stdout
    assert "staging: 1 entity from cluster STAGING-ID-123 into quotas/staging" in result.stdout
    no_changes("prod")
    no_changes("staging")


def test_init_never_overwrites(repo, prod):
    (repo / "kqplan.toml").write_text("# mine\n")
    result = run_cli("init", "--cluster", f"prod={prod.bootstrap}")
    assert result.exit_code == 1
    assert "Error: init refuses to overwrite kqplan.toml" in result.stderr
    assert (repo / "kqplan.toml").read_text() == "# mine\n"
    (repo / "kqplan.toml").unlink()
    (repo / "quotas/prod").mkdir(parents=True)
    result = run_cli("init", "--cluster", f"prod={prod.bootstrap}")
    assert result.exit_code == 1
    assert "init refuses to write into quotas/prod: it exists" in result.stderr
    assert not (repo / "kqplan.toml").exists()


def test_init_is_all_or_nothing(repo, prod):
    result = run_cli("init", "--cluster", f"prod={prod.bootstrap}", "--cluster", "down=127.0.0.1:1",
                     "--timeout", "5s")
    assert result.exit_code == 1
    assert "cannot connect to 127.0.0.1:1" in result.stderr
    assert list(repo.iterdir()) == []


@pytest.mark.parametrize(("arg", "message"), [
    ("prod", "--cluster prod: expected NAME=HOST:PORT"),
    ("prod=nohost", "--cluster prod: 'nohost' is not HOST:PORT"),
    ("../x=127.0.0.1:9092", "cannot be a cluster name (it contains a path separator)"),
])
def test_init_refuses_bad_cluster_arguments(repo, arg, message):
    result = run_cli("init", "--cluster", arg)
    assert result.exit_code == 1
    assert message in result.stderr
    assert list(repo.iterdir()) == []


def test_init_with_an_existing_inventory_exports_its_clusters(repo, prod, staging):
    inventory(repo, prod, staging, staging_id=False)
    result = run_cli("init")
    assert result.exit_code == 0, result.stderr
    assert (repo / "quotas/prod/quotas.yaml").is_file()
    assert (repo / "quotas/staging/quotas.yaml").is_file()
    assert 'note: [clusters.prod] records no id; add id = "PROD-ID"' in result.stderr
    no_changes("prod")
    assert (repo / "overlays/staging").is_dir()  # the inventory's later layer, created empty
    no_changes("staging")
