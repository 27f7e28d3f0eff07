"""``kqplan fleet apply`` (issue 31 §4): every cluster's plan applied with the single-cluster
protocol; with ``--rollout``, wave by wave in the order of ``[rollout] waves``, the first wave
that does not apply cleanly stopping the rollout — three real sandboxes, the second wave's
cluster refusing one entity."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from kqplan.core.entity import Entity
from kqplan.sandbox import Fault, Sandbox, SandboxConfig
from tests.helpers import run_cli, write_manifest

NAMES = ("staging", "prod-eu", "prod-us")
SEED = {Entity.user("u1"): {"producer_byte_rate": 1000.0}, Entity.user("u2"): {"producer_byte_rate": 1000.0}}
MANIFEST = ("entities:\n  - user: u1\n    quotas: {producer_byte_rate: 2000}\n"
            "  - user: u2\n    quotas: {producer_byte_rate: 2000}\n")


def three_clusters(stack: ExitStack, root: Path, prod_eu: Fault) -> tuple[Path, dict[str, Sandbox]]:
    """Three sandboxes in waves staging, prod-eu, prod-us (``prod_eu``: prod-eu's fault), an
    inventory naming them and a manifest each."""
    boxes = {}
    for name in NAMES:
        boxes[name] = stack.enter_context(Sandbox.start(SandboxConfig(
            port=0, cluster_id=f"id-{name}", seed=SEED, faults=(prod_eu,) if name == "prod-eu" else ())))
    toml = "".join(f'[clusters.{n}]\nbootstrap-server = "{b.bootstrap}"\nid = "id-{n}"\n'
                   f'manifests = ["q/{n}"]\n\n' for n, b in boxes.items())
    toml += '[rollout]\nwaves = [["staging"], ["prod-eu"], ["prod-us"]]\n'
    (root / "kqplan.toml").write_text(toml)
    for name in NAMES:
        write_manifest(root / "q" / name / "q.yaml", f"cluster: {name}\n" + MANIFEST)
    return root / "kqplan.toml", boxes


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[tuple[Path, dict[str, Sandbox]]]:
    with ExitStack() as stack:
        yield three_clusters(stack, tmp_path, Fault("alter", error_code=44, error_message="policy says no",
                                                    entities=frozenset({Entity.user("u1")})))


def rate(box: Sandbox, user: str) -> float | None:
    return (box.state.get(Entity.user(user)) or {}).get("producer_byte_rate")


def test_the_first_failing_wave_stops_the_rollout(fleet, tmp_path):
    toml, boxes = fleet
    report = tmp_path / "fleet-report.json"
    result = run_cli("--config", toml, "fleet", "apply", "--rollout", "--auto-approve", "--report", report)
    out = result.stdout + result.stderr
    assert result.exit_code == 1, out
    assert "== staging (wave 1 of 3) ==" in out
    assert "Rollout stopped after wave 2: prod-us not started." in out
    assert "Fleet apply incomplete: 1 applied, 1 failed, 1 not started." in out
    assert (rate(boxes["staging"], "u1"), rate(boxes["staging"], "u2")) == (2000.0, 2000.0)
    assert (rate(boxes["prod-eu"], "u1"), rate(boxes["prod-eu"], "u2")) == (1000.0, 2000.0)
    assert (rate(boxes["prod-us"], "u1"), rate(boxes["prod-us"], "u2")) == (1000.0, 1000.0)
    document = json.loads(report.read_text())
    assert document["ok"] is False
    assert document["waves"] == [["staging"], ["prod-eu"], ["prod-us"]]
    by_name = {c["name"]: c for c in document["clusters"]}
    assert [by_name[n]["status"] for n in NAMES] == ["applied", "failed", "not started"]
    failed = {e["entity"]["user"]: e["status"] for e in by_name["prod-eu"]["report"]["entities"]}
    assert failed == {"u1": "failed", "u2": "applied"}
    assert by_name["prod-us"]["report"] is None


def test_without_rollout_every_cluster_is_applied(fleet, tmp_path):
    toml, boxes = fleet
    result = run_cli("--config", toml, "fleet", "apply", "--auto-approve")
    assert result.exit_code == 1  # prod-eu refuses u1
    assert "Fleet apply incomplete: 2 applied, 1 failed." in result.stdout
    assert rate(boxes["prod-us"], "u1") == 2000.0


def test_a_cluster_that_cannot_be_planned_stops_everything(fleet):
    toml, boxes = fleet
    manifest = toml.parent / "q" / "prod-us" / "q.yaml"
    text = manifest.read_text()
    manifest.write_text(text.replace("producer_byte_rate: 2000", "producer_byte_rat: 2000", 1))
    result = run_cli("--config", toml, "fleet", "apply", "--rollout", "--auto-approve")
    assert result.exit_code == 1
    assert "fleet apply stops before any change: 1 cluster(s) could not be planned (prod-us:" in result.stderr
    assert all(rate(box, "u2") == 1000.0 for box in boxes.values())


def test_refusals(fleet, tmp_path):
    toml, _ = fleet
    result = run_cli("--config", toml, "fleet", "apply", "--rollout")
    assert result.exit_code == 1
    assert "refusing to apply without confirmation: not running on a terminal" in result.stderr
    text = toml.read_text().replace('[rollout]\nwaves = [["staging"], ["prod-eu"], ["prod-us"]]\n',
                                    '[rollout]\nwaves = [["staging"], ["prod-eu"], ["prod-uss"]]\n')
    toml.write_text(text)
    result = run_cli("--config", toml, "fleet", "apply", "--rollout", "--auto-approve")
    assert result.exit_code == 1
    assert "rollout.waves: wave 3 names 'prod-uss', which is not a cluster of the inventory" in result.stderr
    assert "did you mean 'prod-us'?" in result.stderr


@pytest.mark.parametrize("workflow", ["rollout-on-merge.yml", "nightly-revert-expired.yml"])
def test_the_example_workflows_run_a_real_fleet_apply(fleet, tmp_path, monkeypatch, workflow):
    """The GitHub examples' `kqplan fleet apply` line, as written, against three sandboxes."""
    import shlex

    from tests.helpers import REPO

    text = (REPO / "examples" / "github" / workflow).read_text()
    [line] = [ln.split("run:", 1)[1].strip() for ln in text.splitlines() if "run: kqplan fleet apply" in ln]
    toml, _ = fleet
    monkeypatch.chdir(tmp_path)
    args = shlex.split(line)
    assert args[:3] == ["kqplan", "fleet", "apply"]
    result = run_cli("--config", toml, *args[1:])
    assert result.exit_code == 1  # prod-eu refuses u1: the rollout stops after wave 2
    document = json.loads((tmp_path / "fleet-report.json").read_text())
    assert [c["status"] for c in document["clusters"]] == ["applied", "failed", "not started"]
