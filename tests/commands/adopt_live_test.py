"""alter, describe, export and resolve against live targets (sandbox and real broker): export
then plan is "No changes." — the adoption round trip of issue 6, over the wire."""

from __future__ import annotations

import json
import uuid

from kqplan.core.entity import Entity
from tests.helpers import mine, run_cli


def test_alter_describe_export_plan_resolve_round_trip(live, tmp_path):
    p = f"kqplan-adopt-{uuid.uuid4().hex[:8]}"
    try:
        kq = ["--bootstrap-server", live.bootstrap]
        # KRaft keeps any double; a ZooKeeper-mode broker would store 1235 (issue 18), so alter
        # refuses the fraction there before sending anything, and the round trip uses what it keeps.
        rate = "1235" if live.zookeeper else "1235.0000001"
        if live.zookeeper:
            refused = run_cli("alter", "--names", f"user={p}-a", "--add", "producer_byte_rate=1235.0000001",
                              *kq)
            assert (refused.exit_code, refused.stdout) == (1, "")
            assert refused.stderr == (
                f"--add: error[KQP145] {{user={p}-a}}: a ZooKeeper-mode broker stores 1235.0000001 as 1235 "
                "(producer_byte_rate is LONG): the plan would never converge; write the whole number\n"
                "Found 1 error(s).\n")
            assert live.state(mine(p)) == {}
        for names, add in ((f"user={p}-a", f"producer_byte_rate={rate},consumer_byte_rate=10MiB"),
                           (f"user={p} spaced ü,client-id=app", "request_percentage=12.5")):
            result = run_cli("alter", "--names", names, "--add", add, *kq)
            assert result.exit_code == 0, result.stderr
            # before -> after, in plan's markers (issue 13: the KIP's silence hid what changed)
            assert result.stdout.startswith(f"+ {{{names.replace(',', ', ')}}} (altered)\n"), result.stdout
            assert [line.split(" = ")[0].strip() for line in result.stdout.splitlines()[1:]] == \
                [f"+ {item.split('=')[0]}" for item in sorted(add.split(","))]
        result = run_cli("alter", "--names", f"user={p}-a", "--defaults", "client-id",
                         "--add", "controller_mutation_rate=0.5", *kq)
        assert result.exit_code == 0, result.stderr
        want = {Entity.user(f"{p}-a"): {"producer_byte_rate": float(rate), "consumer_byte_rate": 10485760.0},
                Entity.user_client(f"{p} spaced ü", "app"): {"request_percentage": 12.5},
                Entity.user_client(f"{p}-a", None): {"controller_mutation_rate": 0.5}}
        assert live.until(mine(p), want) == want

        described = run_cli("describe", "--names", f"user={p}-a", "--strict", *kq)
        assert described.exit_code == 0, described.stderr
        lines = described.stdout.splitlines()
        assert lines[0] == f"{{user={p}-a}}"
        assert sorted(line.strip() for line in lines[1:] if line.strip()) == [
            "consumer_byte_rate=10485760", f"producer_byte_rate={rate}"]

        snapshot = tmp_path / "all.json"
        assert run_cli("export", "--format", "json", "--out", snapshot, *kq).exit_code == 0
        out = tmp_path / "adopted"
        assert run_cli("export", "--out", out, *kq).exit_code == 0
        plan = run_cli("plan", out, *kq)
        assert plan.exit_code == 0, plan.stderr
        assert plan.stdout.startswith("No changes."), plan.stdout

        resolved = json.loads(run_cli("resolve", "--names", f"user={p}-a,client-id=other",
                                      "--format", "json", *kq).stdout)
        assert resolved["quotas"]["controller_mutation_rate"]["value"] == 0.5
        assert resolved["quotas"]["controller_mutation_rate"]["source"] == {"user": f"{p}-a",
                                                                             "client-id": None}
        assert resolved["quotas"]["producer_byte_rate"]["value"] == float(rate)
    finally:
        live.remove_all(mine(p))
