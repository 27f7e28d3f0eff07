"""Verify tells the truth: a broker that keeps another value than asked (ZooKeeper-mode brokers
truncate 1235.0000001 to 1235) is reported at once as "stored differently", with what it holds."""

from __future__ import annotations

import json
import math
import time

from kqplan.core.entity import Entity
from kqplan.sandbox import Sandbox, SandboxConfig
from tests.helpers import run_cli, write_manifest


def truncating(box: Sandbox) -> None:
    """Make the sandbox's engine store whole-number keys as a ZooKeeper-mode broker does."""
    engine = box.engine
    replayed = engine._replayed  # the state an alter's records leave (staged, then committed)

    def truncate(key, value):
        return value if value is None or not key.endswith("byte_rate") else float(math.floor(value))

    def zk_replayed(changes):
        return replayed({e: [(k, truncate(k, v)) for k, v in records] for e, records in changes.items()})

    engine._replayed = zk_replayed


def test_a_truncated_value_is_stored_differently_at_once_and_reported(tmp_path):
    with Sandbox.start(SandboxConfig(cluster_id="c")) as box:
        truncating(box)
        write_manifest(tmp_path / "q.yaml", "entities:\n  - user: zed\n"
                       "    quotas: {producer_byte_rate: 1235.0000001, request_percentage: 5}\n")
        report = tmp_path / "report.json"
        started = time.monotonic()
        result = run_cli("apply", tmp_path / "q.yaml", "--bootstrap-server", box.bootstrap,
                         "--auto-approve", "--report", report)
        assert time.monotonic() - started < 5  # no polling to the 15 s deadline
        assert result.exit_code == 1
        assert ("  + {user=zed}: stored differently: producer_byte_rate=1235 (asked 1235.0000001)"
                in result.stdout)
        assert "Re-running cannot converge" in result.stdout
        assert "Run apply again to converge" not in result.stdout
        entity = json.loads(report.read_text())["entities"][0]
        assert entity["status"] == "stored differently"
        assert entity["after"] == {"producer_byte_rate": 1235.0, "request_percentage": 5.0}
        assert box.state[Entity.user("zed")] == entity["after"]
