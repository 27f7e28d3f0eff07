"""apply under faults only the sandbox can inject (DESIGN §3.5): a lost alter resolved by
describing, partial failure attribution, read-after-write lag, and the wrong cluster."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kqplan.core.entity import Entity
from kqplan.sandbox import Drop, Fault, Sandbox, SandboxConfig
from tests.helpers import run_cli, write_manifest


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    with Sandbox.start(SandboxConfig(port=0)) as sb:
        yield sb


def entities(n: int) -> str:
    return "entities:\n" + "".join(
        f"  - user: u{i}\n    quotas: {{producer_byte_rate: {i + 1}}}\n" for i in range(n))


def apply(sandbox: Sandbox, path: Path, report: Path) -> tuple[int, dict, str]:
    result = run_cli("apply", path, "--auto-approve", "--report", report,
                     "--bootstrap-server", sandbox.bootstrap)
    return result.exit_code, json.loads(report.read_text()), result.stdout + result.stderr


def test_connection_dropped_after_the_alter_is_reported_applied(sandbox, tmp_path):
    sandbox.faults.add(Fault("alter", drop=Drop.AFTER, times=1))
    code, report, out = apply(sandbox, write_manifest(tmp_path / "q.yaml", entities(3)), tmp_path / "r.json")
    assert code == 0, out
    assert report["summary"]["applied"] == 3
    assert any("outcome was resolved by describing" in note for note in report["notes"])
    assert len(sandbox.state) == 3


def test_connection_dropped_before_the_alter_is_reported_not_applied(sandbox, tmp_path):
    sandbox.faults.add(Fault("alter", drop=Drop.BEFORE, times=1))
    code, report, out = apply(sandbox, write_manifest(tmp_path / "q.yaml", entities(3)), tmp_path / "r.json")
    assert code == 1, out
    assert report["summary"]["not_applied"] == 3
    assert {e["status"] for e in report["entities"]} == {"not applied"}
    assert sandbox.state == {}
    # re-running converges
    assert run_cli("apply", tmp_path / "q.yaml", "--auto-approve", "--bootstrap-server",
                   sandbox.bootstrap).exit_code == 0
    assert len(sandbox.state) == 3


@pytest.mark.parametrize(("n", "k"), [(10, 1), (50, 7)])
def test_partial_failure_is_attributed_to_exactly_the_failing_entities(sandbox, tmp_path, n, k):
    bad_entities = {Entity.user(f"u{i}") for i in range(0, n, n // k)[:k]}
    bad = {e.display for e in bad_entities}
    sandbox.faults.add(Fault("alter", error_code=44, error_message="policy says no",
                             entities=frozenset(bad_entities)))
    code, report, out = apply(sandbox, write_manifest(tmp_path / "q.yaml", entities(n)), tmp_path / "r.json")
    assert code == 1
    failed = {e["display"] for e in report["entities"] if e["status"] == "failed"}
    assert failed == bad
    assert report["summary"]["applied"] == n - k
    assert all(e["error"] == {"code": 44, "name": "POLICY_VIOLATION", "message": "policy says no"}
               for e in report["entities"] if e["status"] == "failed")
    assert {e.display for e in sandbox.state} == {Entity.user(f"u{i}").display for i in range(n)} - bad
    assert "policy says no" in out


def test_read_after_write_lag_is_waited_out(sandbox, tmp_path):
    sandbox.faults.lag_ms = 1500
    code, report, out = apply(sandbox, write_manifest(tmp_path / "q.yaml", entities(5)), tmp_path / "r.json")
    assert code == 0, out
    assert report["summary"]["applied"] == 5
    assert report["requests"]["describe"] >= 2  # the first verify saw the old state


def test_lag_longer_than_the_verify_window_is_reported_unverified(sandbox):
    from kqplan.apply.protocol import apply as run_apply
    from kqplan.apply.verify import VerifyPolicy
    from kqplan.cluster.connection import config_from_properties
    from kqplan.cluster.kafka import KafkaCluster
    from kqplan.core.ownership import Ownership
    from kqplan.core.plan import ClusterRef, diff
    from kqplan.core.report import Status

    sandbox.faults.lag_ms = 60_000
    desired = {Entity.user("a"): {"producer_byte_rate": 1.0}, Entity.user("b"): {"producer_byte_rate": 2.0}}
    with KafkaCluster(config_from_properties("", bootstrap=sandbox.bootstrap, source="t", env={})) as c:
        plan = diff(desired, c.describe(), Ownership(), cluster=ClusterRef(None, sandbox.bootstrap),
                    fingerprint=None)
        report = run_apply(c, plan, verify=VerifyPolicy(timeout_s=0.5, first_delay_s=0.05, max_delay_s=0.2))
    assert [o.status for o in report.outcomes] == [Status.UNVERIFIED, Status.UNVERIFIED]
    assert not report.ok
    assert report.requests["describe"] >= 2
    assert len(sandbox.state) == 2  # it was applied; only the check could not see it


def test_the_preflight_failing_changes_nothing_even_with_faults_later(sandbox, tmp_path):
    sandbox.faults.add(Fault("alter", error_code=41, error_message="not controller", validate_only=True,
                             times=1))
    code, report, _ = apply(sandbox, write_manifest(tmp_path / "q.yaml", entities(4)), tmp_path / "r.json")
    assert code == 1
    assert report["preflight_failed"] is True
    assert report["requests"]["alter"] == 0
    assert sandbox.state == {}


def test_wrong_cluster_is_refused_over_the_wire(sandbox, tmp_path):
    path = write_manifest(tmp_path / "q.yaml", "cluster: prod-eu\n" + entities(1))
    (tmp_path / "kqplan.toml").write_text('[clusters]\nprod-eu = "the-real-prod"\n')
    for command in ("plan", "apply"):
        result = run_cli(command, path, "--auto-approve" if command == "apply" else "--detailed-exitcode",
                         "--bootstrap-server", sandbox.bootstrap)
        assert result.exit_code == 1
        assert "wrong cluster: the manifests are guarded to 'prod-eu' (id the-real-prod), but " \
               f"{sandbox.bootstrap} is cluster kqplan-sandbox-cluster" in result.stderr
    assert sandbox.state == {}
    assert sandbox.requests_of(49) == []


def test_apply_request_counts_from_the_request_log(sandbox, tmp_path):
    path = write_manifest(tmp_path / "q.yaml", entities(1000))
    code, report, out = apply(sandbox, path, tmp_path / "r.json")
    assert code == 0, out
    alters = sandbox.requests_of(49)
    assert [r.validate_only for r in alters] == [True, False]
    assert len(sandbox.requests_of(48)) == 1 + report["requests"]["describe"]  # plan + verify
