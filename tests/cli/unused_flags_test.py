"""Flags that only another flag reads are refused without it, naming the flag they need, instead of
being accepted and ignored (issue 41): a plan "from the metrics" that never asked Prometheus, an
apply whose --prometheus nobody read. Refused before any cluster or Prometheus is asked."""

from __future__ import annotations

import itertools

import pytest

from kqplan.sandbox import Sandbox, SandboxConfig
from tests.helpers import run_cli, write_manifest

PLAN_FLAGS = {"--since": "7d", "--step": "60s", "--prometheus": "http://127.0.0.1:9",
              "--selector": 'kafka_cluster="x"', "--metric": "byte-rate=kafka_x", "--prometheus-headers": "h"}
APPLY_FLAGS = {k: PLAN_FLAGS[k] for k in ("--prometheus", "--selector", "--metric", "--prometheus-headers")}

MANIFEST = "entities:\n  - user: a\n    quotas: {producer_byte_rate: 1}\n"


@pytest.fixture(scope="module")
def box():
    with Sandbox.start(SandboxConfig(cluster_id="c")) as sandbox:
        yield sandbox


def given(flags: dict[str, str], names: tuple[str, ...], tmp_path) -> list[str]:
    headers = tmp_path / "h"
    headers.write_text("X-A: b\n")
    values = {**flags, "--prometheus-headers": str(headers)}
    return [part for name in names for part in (name, values[name])]


@pytest.mark.parametrize("names", [(n,) for n in PLAN_FLAGS] + [*itertools.combinations(PLAN_FLAGS, 2)][:3])
def test_plan_refuses_metrics_flags_without_usage_from_metrics(tmp_path, box, names):
    path = write_manifest(tmp_path / "q.yaml", MANIFEST)
    before = len(box.requests)
    result = run_cli("plan", path, "--bootstrap-server", box.bootstrap, *given(PLAN_FLAGS, names, tmp_path))
    assert result.exit_code == 1, result.stdout
    them = " and ".join(names)
    assert f"Error: {them} {'is' if len(names) == 1 else 'are'} used only with --usage-from-metrics" \
        in result.stderr
    assert f"add --usage-from-metrics, or leave out {them}" in result.stderr
    assert len(box.requests) == before


@pytest.mark.parametrize("name", list(APPLY_FLAGS))
def test_apply_refuses_metrics_flags_without_verify_enforcement(tmp_path, box, name):
    path = write_manifest(tmp_path / "q.yaml", MANIFEST)
    before = len(box.requests)
    result = run_cli("apply", path, "--bootstrap-server", box.bootstrap, "--auto-approve",
                     *given(APPLY_FLAGS, (name,), tmp_path))
    assert result.exit_code == 1, result.stdout
    assert f"Error: {name} is used only with --verify-enforcement, which was not given" in result.stderr
    assert len(box.requests) == before


def test_the_usage_file_route_still_takes_stat(tmp_path, box):
    path = write_manifest(tmp_path / "q.yaml", MANIFEST)
    usage = tmp_path / "u.csv"
    usage.write_text("cluster,user,client_id,producer_byte_rate\nc,a,,10\n")
    result = run_cli("plan", path, "--bootstrap-server", box.bootstrap, "--usage", usage, "--stat", "max")
    assert result.exit_code == 0, result.stderr
