"""fleet rightsize writes what its own checks accept (issue 29): an inventory cluster without an
``id`` gets a manifest that validates and plans on that cluster (no ``cluster:`` guard it would
refuse), and a cluster named like rightsize's own outputs is refused before anything is written
rather than ending in an internal error."""

from __future__ import annotations

from pathlib import Path

import pytest

from kqplan.core.entity import Entity
from kqplan.snapshot.file import write_snapshot
from tests.helpers import run_cli


def project(root: Path, clusters: dict[str, str | None]) -> Path:
    """``[clusters.NAME]`` with a snapshot each (its cluster id ``NAME-id``), ``id`` as given; a
    usage file where one principal of each is far below its quota (rightsize lowers it)."""
    body, usage = [], ["cluster,user,client_id,request_percentage,ts"]
    for i, (name, ident) in enumerate(clusters.items()):
        write_snapshot(root / f"s{i}.json", {Entity.user(None): {"request_percentage": 50.0}}, f"{name}-id")
        body.append(f'[clusters."{name}"]\nsnapshot = "s{i}.json"\n' + (f'id = "{ident}"\n' if ident else ""))
        usage.append(f"{name},dave,x,0.2,1")
    (root / "kqplan.toml").write_text("\n".join(body), encoding="utf-8")
    (root / "usage.csv").write_text("\n".join(usage) + "\n", encoding="utf-8")
    return root / "kqplan.toml"


def rightsize(config: Path, out: Path, *args: str):
    # one sample per principal: --min-samples 1 lowers on it (by default a day of windows is asked)
    return run_cli("--config", config, "fleet", "rightsize", "--usage", config.parent / "usage.csv",
                   "--out", out, "--min-samples", "1", *args)


def test_a_cluster_without_an_id_gets_a_manifest_that_validates_and_plans(tmp_path):
    config = project(tmp_path, {"east": None, "west": "west-id"})
    out = tmp_path / "out"
    result = rightsize(config, out)
    assert result.exit_code == 0, result.stdout + result.stderr  # was 1: KQP141 on its own manifest
    assert result.stderr == (f"kqplan: east has no id in {config}: its manifest is written without a "
                             'cluster: guard (add id = "east-id" to [clusters.east] to guard it)\n')
    east = (out / "east" / "rightsize.yaml").read_text(encoding="utf-8")
    assert "\ncluster:" not in east
    assert "\ncluster: west-id\n" in (out / "west" / "rightsize.yaml").read_text(encoding="utf-8")
    for name in ("east", "west"):
        validated = run_cli("--config", config, "validate", out / name)
        assert validated.exit_code == 0, validated.stdout + validated.stderr
        plan = run_cli("--config", config, "plan", "--cluster", name, out / name)
        assert plan.exit_code == 0, plan.stdout + plan.stderr
        assert "Plan: 1 to add, 0 to change, 0 to delete." in plan.stdout


def test_once_the_id_is_added_the_guard_is_written_and_holds(tmp_path):
    config = project(tmp_path, {"east": "east-id"})
    assert rightsize(config, tmp_path / "out").exit_code == 0
    manifest = (tmp_path / "out" / "east" / "rightsize.yaml").read_text(encoding="utf-8")
    assert "cluster: east-id" in manifest
    write_snapshot(tmp_path / "other.json", {}, "other-id")
    wrong = run_cli("--config", config, "plan", tmp_path / "out" / "east", "--state", tmp_path / "other.json")
    assert wrong.exit_code == 1
    assert "wrong cluster" in wrong.stderr


@pytest.mark.parametrize("name", ["proposals.md", "proposals.parquet", "Proposals.MD"])
def test_a_cluster_named_like_an_output_of_rightsize_is_refused_before_anything_is_written(tmp_path, name):
    config = project(tmp_path, {"east": None, name: None})
    result = rightsize(config, tmp_path / "out")
    assert result.exit_code == 1
    assert "internal error" not in result.stderr
    where = tmp_path / "out" / name
    assert result.stderr.startswith(f"Error: cluster '{name}' cannot be written to {where}: the command "
                                    f"writes its own {name.lower()} there\n")
    assert "  = help: rename the [clusters.…] table in kqplan.toml" in result.stderr
    assert not (tmp_path / "out").exists()


def test_clusters_whose_names_differ_only_in_case_are_refused(tmp_path):
    config = project(tmp_path, {"east": None, "East": None})
    result = rightsize(config, tmp_path / "out")
    assert result.exit_code == 1
    # refused where it is written: kqplan.toml (the fleet's own check of output paths stays behind
    # it for names that come another way: tests/hardening/out_paths_test.py)
    assert "error[KQP190] cluster name \"East\" differs from \"east\" only in case" in result.stderr
    assert not (tmp_path / "out").exists()


def test_what_is_in_the_way_in_out_is_named(tmp_path):
    config = project(tmp_path, {"east": None})
    out = tmp_path / "out"
    out.mkdir()
    (out / "east").write_text("a file where the folder goes", encoding="utf-8")
    result = rightsize(config, out)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {out / 'east'} is a file, where a cluster's manifest folder "
                                    "goes")
    (out / "east").unlink()
    (out / "proposals.md").mkdir()
    result = rightsize(config, out)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {out / 'proposals.md'} is a directory, where rightsize writes "
                                    "its proposals.md")
    assert not (out / "east").exists()
