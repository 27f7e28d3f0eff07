"""apply's verify waits no longer than the broker needs and says how many describes it took
(``verify`` in ``--report``), on the sandbox (no lag) and the real broker (tens of ms of lag)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import Live, kq, manifests

BODY = """\
entities:
""" + "".join(f"  - user: P-{i}\n    quotas: {{producer_byte_rate: {1024 * (i + 1)}}}\n" for i in range(200))


def test_verify_reports_its_polls(live: Live, prefix: str, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    done = kq(live, "apply", manifests(tmp_path, prefix, BODY), "--auto-approve", "--report", report)
    assert done.exit_code == 0, done.output
    doc = json.loads(report.read_text())
    assert doc["summary"]["applied"] == 200
    polls, seconds = doc["verify"]["polls"], doc["verify"]["seconds"]
    assert polls >= 1
    assert doc["requests"]["describe"] == polls + 1  # the check before the alter, then to verify
    if live.name == "sandbox" or live.zookeeper:
        # The sandbox shows a committed alter at once, and so does a ZooKeeper-mode broker: it
        # answers the alter once ZooKeeper holds it, and describe reads ZooKeeper.
        assert polls == 1, doc["verify"]
    if not live.zookeeper:
        # 20, 30, 45, ... ms between polls: a lag of tens of ms costs a few polls, never seconds.
        # (On ZooKeeper, one describe can itself take seconds: Kafka 2.8 keeps an empty node for
        # every entity ever set and reads them all; the record-cap test's 5001 are why it runs last.)
        assert seconds < 2.0, doc["verify"]
