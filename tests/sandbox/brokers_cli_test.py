"""``kqplan sandbox --brokers N`` in its own process: a plan divides budgets by N."""

from __future__ import annotations

import sys

from tests.helpers import run_cli, serving, write_manifest


def test_the_sandbox_process_advertises_n_brokers(tmp_path):
    path = write_manifest(tmp_path / "q.yaml", "entities:\n  - user: etl\n"
                          "    quotas: {producer_byte_rate: {per-cluster: 300MiB}}\n")
    command = [sys.executable, "-m", "kqplan", "sandbox", "--port", "0", "--brokers", "3"]
    with serving(command) as (_, bootstrap):
        doc = run_cli("plan", path, "--bootstrap-server", bootstrap, "--format", "json").json
    assert doc["cluster"]["brokers"] == 3
    assert doc["changes"][0]["after"] == {"producer_byte_rate": 104857600.0}
    refused = run_cli("sandbox", "--brokers", "0")
    assert (refused.exit_code, refused.stderr.splitlines()[0]) == (
        1, "Error: Invalid value for '--brokers': 0 is not in the range x>=1.")
