"""An alter answered after request.timeout.ms may still land: it is "unknown", never "not applied"."""

from __future__ import annotations

import json
import time

from kqplan.apply.protocol import apply
from kqplan.apply.verify import VerifyPolicy
from kqplan.cluster.connection import config_from_properties
from kqplan.cluster.kafka import KafkaCluster
from kqplan.core.entity import Entity
from kqplan.core.errors import KqplanError
from kqplan.core.ownership import Ownership
from kqplan.core.plan import ClusterRef, diff
from kqplan.core.report import Status
from kqplan.render.apply import report_to_json
from kqplan.sandbox import Drop, Fault, Sandbox, SandboxConfig
from tests.helpers import run_cli, write_manifest

LATE = Entity.user("late")


def landed(box: Sandbox, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while LATE not in box.state and time.monotonic() < deadline:
        time.sleep(0.1)
    return box.state.get(LATE) == {"producer_byte_rate": 1.0}


def test_a_timed_out_alter_that_lands_after_verify_is_unknown_not_not_applied():
    with Sandbox.start(SandboxConfig(cluster_id="c")) as box:
        box.faults.add(Fault("alter", delay_ms=3000, times=1))  # the real alter only
        config = config_from_properties("request.timeout.ms=500\n", bootstrap=box.bootstrap, source="t",
                                        env={})
        plan = diff({LATE: {"producer_byte_rate": 1.0}}, {}, Ownership(), cluster=ClusterRef("c", "x"),
                    fingerprint=None)
        with KafkaCluster(config) as cluster:
            report = apply(cluster, plan, verify=VerifyPolicy(timeout_s=0.5))
        assert [o.status for o in report.outcomes] == [Status.UNKNOWN]
        assert landed(box)  # it did land, after kqplan looked: "not applied" would have been a lie


def test_a_timed_out_alter_seen_by_verify_is_applied(tmp_path):
    with Sandbox.start(SandboxConfig(cluster_id="c")) as box:
        box.faults.add(Fault("alter", delay_ms=2000, times=1))
        write_manifest(tmp_path / "q.yaml", "entities:\n  - user: late\n"
                       "    quotas: {producer_byte_rate: 1}\n")
        config = tmp_path / "client.properties"
        config.write_text("request.timeout.ms=1000\n")
        report = tmp_path / "report.json"
        result = run_cli("apply", tmp_path / "q.yaml", "--bootstrap-server", box.bootstrap,
                         "--command-config", config, "--auto-approve", "--report", report)
        assert result.exit_code == 0, result.stdout + result.stderr
        doc = json.loads(report.read_text())
        assert doc["entities"][0]["status"] == "applied"
        assert "timed out" in doc["notes"][0]


def test_a_failing_verify_still_ends_with_an_outcome_per_entity():
    with Sandbox.start(SandboxConfig(cluster_id="c")) as box:
        config = config_from_properties("", bootstrap=box.bootstrap, source="t", env={})
        plan = diff({LATE: {"producer_byte_rate": 1.0}}, {}, Ownership(), cluster=ClusterRef("c", "x"),
                    fingerprint=None)
        # every verify describe is lost (the first describe, the check before the alter, passes)
        box.faults.add(Fault("describe", drop=Drop.BEFORE, skip=1))
        with KafkaCluster(config, retry_backoff_s=0.01) as cluster:
            report = apply(cluster, plan, verify=VerifyPolicy(timeout_s=0.5))
        assert [o.status for o in report.outcomes] == [Status.UNVERIFIED]
        assert report.notes[-1].startswith("Verify failed (no answer from")
        assert report_to_json(report)["entities"][0]["status"] == "unverified"
        assert box.state[LATE] == {"producer_byte_rate": 1.0}  # the alter itself went through


def test_a_retried_request_says_how_long_it_really_waited():
    # the sandbox drops every describe: each attempt waits, and the message says how long in all
    with Sandbox.start(SandboxConfig(cluster_id="c")) as box:
        box.faults.add(Fault("describe", drop=Drop.BEFORE))
        config = config_from_properties("", bootstrap=box.bootstrap, source="t", env={})
        with KafkaCluster(config, retry_backoff_s=0.01) as cluster:
            try:
                cluster.describe()
            except KqplanError as exc:
                message = exc.message
        assert "gave up after 3 attempts (" in message
        assert message.endswith(" s in all)")
