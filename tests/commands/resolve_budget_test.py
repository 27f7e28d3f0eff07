"""resolve --desired never shows a per-cluster budget as unlimited (issue 31 §3): without a
cluster there is no broker count to divide it by, so it says so."""

from __future__ import annotations

from tests.helpers import run_cli, write_manifest


def test_resolve_desired_refuses_a_budget_it_cannot_divide(tmp_path):
    path = write_manifest(tmp_path / "q.yaml", "entities:\n  - user: a\n"
                          "    quotas: {producer_byte_rate: {per-cluster: 300MiB}}\n")
    result = run_cli("resolve", "--names", "user=a,client-id=c", "--desired", path)
    assert result.exit_code == 1
    assert ("Error: --desired: {user=a} producer_byte_rate is a per-cluster budget, whose per-broker "
            "value depends on the cluster's broker count") in result.stderr
    assert "unlimited" not in result.stdout
