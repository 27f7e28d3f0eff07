"""Usage rows of a cluster the inventory does not list (issue 32): ``prd`` beside ``prod`` used to
vanish ("prod: 0 principals observed", exit 0). Now they are an error naming each such cluster
with the closest inventory name, on both engines and both commands; ``--allow-unknown-clusters``
makes it a warning and leaves those rows out. A cluster of the inventory that is not selected
(``--cluster``) is no unknown cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from kqplan.core.entity import Entity
from kqplan.snapshot.file import write_snapshot
from tests.helpers import fleet_cli, write_manifest

USAGE = ("cluster,user,client_id,ts,producer_byte_rate\n"
         "prod,orders,checkout,2026-11-22T10:00:00Z,2400000\n"
         "prd,orders,checkout,2026-11-22T10:00:00Z,2400000\n"
         "staging,orders,checkout,2026-11-22T10:00:00Z,1000\n"
         "zzz-lab,x,y,2026-11-22T10:00:00Z,1\n")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for name in ("prod", "staging"):
        write_snapshot(tmp_path / f"{name}.json", {Entity.user("orders"): {"producer_byte_rate": 1048576.0}},
                       f"{name}-id")
    write_manifest(tmp_path / "m" / "q.yaml",
                   "entities:\n  - user: orders\n    quotas: {producer_byte_rate: 1MiB}\n")
    (tmp_path / "kqplan.toml").write_text(
        '[clusters.prod]\nid = "prod-id"\nsnapshot = "prod.json"\nmanifests = ["m"]\n\n'
        '[clusters.staging]\nid = "staging-id"\nsnapshot = "staging.json"\nmanifests = ["m"]\n')
    (tmp_path / "usage.csv").write_text(USAGE)
    return tmp_path


def run(project: Path, command: str, engine: str, *extra: str):
    return fleet_cli(project, command, "--usage", project / "usage.csv", "--out", project / f"out-{engine}",
                     "--engine", engine, "--cluster", "prod", *extra)


ERROR = ("Error: the usage names 2 clusters not in {config}: 'prd' (did you mean 'prod'?), 'zzz-lab'\n"
         "  = help: correct the usage's cluster column, add the cluster to the inventory ([clusters.NAME]), "
         "or give --allow-unknown-clusters to leave those rows out\n")
WARNING = ("kqplan: the usage names 2 clusters not in {config}, their rows left out: 'prd' (did you mean "
           "'prod'?), 'zzz-lab'\n")


@pytest.mark.parametrize("engine", ["local", "spark"])
@pytest.mark.parametrize("command", ["impact", "rightsize"])
def test_an_unknown_cluster_is_an_error_with_a_did_you_mean(project, command, engine):
    config = project / "kqplan.toml"
    failed = run(project, command, engine)
    assert failed.exit_code == 1, failed.stdout + failed.stderr
    assert failed.stderr.endswith(ERROR.format(config=config)), failed.stderr
    assert "Traceback" not in failed.stderr
    assert not (project / f"out-{engine}" / ("impact.parquet" if command == "impact" else "proposals.parquet")
                ).exists()
    allowed = run(project, command, engine, "--allow-unknown-clusters")
    assert allowed.exit_code == 0, allowed.stdout + allowed.stderr
    assert WARNING.format(config=config) in allowed.stderr
    assert allowed.stdout.startswith("prod: 1 principals")  # staging is known, only not selected


def test_without_unknown_clusters_nothing_is_said(project):
    (project / "usage.csv").write_text("\n".join(line for line in USAGE.splitlines()
                                                 if not line.startswith(("prd", "zzz"))) + "\n")
    result = run(project, "impact", "local")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
