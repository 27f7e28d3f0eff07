"""plan and apply over the wire (DESIGN §3.2, §3.5), through the CLI, against both live targets:
the sandbox broker and the real Apache Kafka broker. Fault injection is sandbox-only
(tests/apply/faults_test.py).

Entity names are unique per test so the shared real broker can run them in any order; each
test removes what it created.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest

from kqplan.core.cluster import Alteration, Op
from kqplan.core.entity import Entity
from tests.cluster.proxy import CountingProxy
from tests.helpers import REPO, Live, kq, manifests, mine, run_cli, write_manifest

FIRST = """\
ownership:
  prune: true
  scope: [{user: "P*"}]
entities:
  - user: P-api
    quotas: {producer_byte_rate: 10MiB, consumer_byte_rate: 20MiB}
  - user: P-api
    client-id: loader
    quotas: {request_percentage: 25}
  - user: P-old
    quotas: {producer_byte_rate: 1KiB}
"""

SECOND = """\
ownership:
  prune: true
  scope: [{user: "P*"}]
entities:
  - user: P-api
    quotas: {producer_byte_rate: 10MiB, consumer_byte_rate: 30MiB}
  - user: P-api
    client-id: loader
    quotas: {request_percentage: 25, controller_mutation_rate: 0.5}
"""


def test_plan_apply_converges(live, prefix, tmp_path):
    path = manifests(tmp_path, prefix, FIRST)
    plan = kq(live, "plan", path, "--detailed-exitcode")
    assert plan.exit_code == 2, plan.stderr
    assert "Plan: 3 to add, 0 to change, 0 to delete." in plan.stdout
    assert f"({live.bootstrap})" in plan.stdout.splitlines()[0]

    report = tmp_path / "report.json"
    applied = kq(live, "apply", path, "--auto-approve", "--report", report)
    assert applied.exit_code == 0, applied.stdout + applied.stderr
    data = json.loads(report.read_text())
    assert data["ok"] is True
    assert data["summary"]["applied"] == 3
    assert data["requests"] == {"alter_validate": 1, "alter": 1, "describe": data["requests"]["describe"]}
    assert {e["status"] for e in data["entities"]} == {"applied"}
    want = {Entity.user(f"{prefix}-api"): {"producer_byte_rate": 10485760.0,
                                           "consumer_byte_rate": 20971520.0},
            Entity.user_client(f"{prefix}-api", "loader"): {"request_percentage": 25.0},
            Entity.user(f"{prefix}-old"): {"producer_byte_rate": 1024.0}}
    assert live.state(mine(prefix)) == want  # apply verified it: no lag left to wait for
    assert kq(live, "plan", path, "--detailed-exitcode").stdout.startswith("No changes.")

    path = manifests(tmp_path, prefix, SECOND)
    plan = kq(live, "plan", path)
    assert "Plan: 0 to add, 2 to change, 1 to delete." in plan.stdout
    applied = kq(live, "apply", path, "--auto-approve")
    assert applied.exit_code == 0, applied.stdout + applied.stderr
    want = {Entity.user(f"{prefix}-api"): {"producer_byte_rate": 10485760.0,
                                           "consumer_byte_rate": 31457280.0},
            Entity.user_client(f"{prefix}-api", "loader"): {"request_percentage": 25.0,
                                                            "controller_mutation_rate": 0.5}}
    assert live.until(mine(prefix), want) == want
    again = kq(live, "apply", path, "--auto-approve")
    assert again.exit_code == 0
    assert again.stdout.startswith("No changes.")


def test_saved_plan_applies_exactly_and_stale_plan_is_refused(live, prefix, tmp_path):
    path = manifests(tmp_path, prefix, FIRST)
    saved = tmp_path / "plan.json"
    assert kq(live, "plan", path, "--out", saved).exit_code == 0
    # someone changes an entity of the plan behind our back
    intruder = Entity.user(f"{prefix}-api")
    with live.cluster() as c:
        c.alter([Alteration(intruder, (Op("producer_byte_rate", 5.0),))], validate_only=False)
    expected = {intruder: {"producer_byte_rate": 5.0}}
    assert live.until(mine(prefix), expected) == expected
    stale = kq(live, "apply", "--plan", saved, "--auto-approve")
    assert stale.exit_code == 1
    assert "stale" in stale.stderr, stale.stderr
    assert intruder.display in stale.stderr
    time.sleep(0.3)
    assert live.state(mine(prefix)) == expected  # nothing changed

    live.remove_all(mine(prefix))
    live.until(mine(prefix), {})
    assert kq(live, "plan", path, "--out", saved).exit_code == 0
    applied = kq(live, "apply", "--plan", saved, "--auto-approve")
    assert applied.exit_code == 0, applied.stdout + applied.stderr
    want = {Entity.user(f"{prefix}-api"): {"producer_byte_rate": 10485760.0,
                                           "consumer_byte_rate": 20971520.0},
            Entity.user_client(f"{prefix}-api", "loader"): {"request_percentage": 25.0},
            Entity.user(f"{prefix}-old"): {"producer_byte_rate": 1024.0}}
    assert live.until(mine(prefix), want) == want
    assert kq(live, "plan", path).stdout.startswith("No changes.")


def test_preflight_failure_reports_every_entity_and_changes_nothing(live, prefix, tmp_path):
    # A custom key passes offline validation (kqplan.toml) but the broker refuses it: the
    # validateOnly pre-flight catches it before anything is written (DESIGN §3.5 step 2).
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "kqplan.toml").write_text('[custom]\nkeys = ["x_custom_rate"]\n')
    path = manifests(tmp_path, prefix, """\
entities:
  - user: P-good
    quotas: {producer_byte_rate: 1MiB}
  - user: P-bad
    quotas: {x_custom_rate: 5}
""")
    report = tmp_path / "report.json"
    result = kq(live, "apply", path, "--auto-approve", "--report", report)
    assert result.exit_code == 1
    data = json.loads(report.read_text())
    assert data["preflight_failed"] is True
    by_user = {e["entity"]["user"]: e for e in data["entities"]}
    assert by_user[f"{prefix}-bad"]["status"] == "failed"
    assert by_user[f"{prefix}-bad"]["error"] == {"code": 42, "name": "INVALID_REQUEST",
                                                 "message": "Invalid configuration key x_custom_rate"}
    assert by_user[f"{prefix}-good"]["status"] == "skipped"
    assert "Invalid configuration key x_custom_rate" in result.stdout
    assert data["requests"]["alter"] == 0
    time.sleep(0.3)
    assert live.state(mine(prefix)) == {}


def test_plan_costs_the_same_requests_for_10_or_2000_entities(live, prefix, tmp_path):
    counts = []
    for n in (10, 2000):
        body = "entities:\n" + "".join(
            f"  - user: P-{n}-{i}\n    quotas: {{producer_byte_rate: {i + 1}}}\n" for i in range(n))
        path = manifests(tmp_path, prefix, body)
        with CountingProxy(live.bootstrap).running() as proxy:
            result = run_cli("plan", path, "--bootstrap-server", proxy.bootstrap)
            assert result.exit_code == 0, result.stderr
            assert f"Plan: {n} to add" in result.stdout
            counts.append((dict(proxy.requests), proxy.connections))
    assert counts[0] == counts[1]
    requests, connections = counts[0]
    assert requests["DescribeClientQuotas"] == 1
    assert connections == 1


@pytest.mark.floods_broker
def test_apply_splits_above_kafkas_10000_record_cap(live, prefix, tmp_path):
    # 5001 entities x 2 keys = 10002 records: one more request than Kafka's cap allows
    body = "entities:\n" + "".join(
        f"  - user: P-{i}\n    quotas: {{producer_byte_rate: {i + 1}, consumer_byte_rate: 7}}\n"
        for i in range(5001))
    path = manifests(tmp_path, prefix, body)
    report = tmp_path / "report.json"
    settings = tmp_path / "client.properties"
    settings.write_text(live.client_properties)
    result = kq(live, "apply", path, "--auto-approve", "--report", report, "--command-config", settings)
    assert result.exit_code == 0, result.stdout[-2000:] + result.stderr
    data = json.loads(report.read_text())
    # ZooKeeper mode has no record cap (reference, Appendix B), but writes each entity to ZooKeeper
    # before answering: kqplan sends it 1000 records per request (11 here), KRaft 10000 (2)
    expected = 11 if live.zookeeper else 2
    assert data["batches"] == expected
    assert data["requests"]["alter"] == expected
    assert data["requests"]["alter_validate"] == expected
    assert ("records: sent as 11 requests of at most 1000 (a ZooKeeper-mode broker" if live.zookeeper
            else "more than Kafka's 10000 per request: sent as 2 requests") in result.stdout
    assert data["summary"]["applied"] == 5001
    assert len(live.state(mine(prefix))) == 5001


def test_sandbox_flag_runs_the_readme_plan(tmp_path):
    seeded = run_cli("plan", "examples/payments", "--sandbox", "examples/payments/snapshot.json")
    offline = run_cli("plan", "examples/payments", "--state", "examples/payments/snapshot.json")
    assert seeded.exit_code == 0, seeded.stderr
    assert seeded.stdout.splitlines()[0].startswith(
        "kqplan will perform the following actions on cluster kqplan-example-prod-eu (127.0.0.1:")
    assert seeded.stdout.splitlines()[1:] == offline.stdout.splitlines()[1:]


@pytest.fixture(autouse=True)
def _repo_cwd(monkeypatch, request):
    if request.node.name.startswith("test_sandbox_flag"):
        monkeypatch.chdir(REPO)


ONE = "entities:\n  - user: a\n    quotas: {producer_byte_rate: 1}\n"


@pytest.mark.parametrize("argv", [
    ["--sandbox"], ["--sandbox="],
])
def test_sandbox_without_seed_plans_against_an_empty_cluster(tmp_path, argv):
    path = write_manifest(tmp_path / "q.yaml", ONE)
    result = run_cli("plan", path, *argv)
    assert result.exit_code == 0, result.stderr
    assert "Plan: 1 to add, 0 to change, 0 to delete." in result.stdout
    before = run_cli("plan", *argv, path)  # the flag before the paths takes no value
    assert before.exit_code == 0, before.stderr


def test_explicit_target_wins_over_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("KQPLAN_BOOTSTRAP_SERVER", "127.0.0.1:1")
    path = write_manifest(tmp_path / "q.yaml", ONE)
    assert run_cli("plan", path, "--sandbox").exit_code == 0
    refused = run_cli("plan", path, "--sandbox", "--bootstrap-server", "127.0.0.1:1")
    assert refused.exit_code == 1
    assert refused.stderr.startswith("Error: choose one target, not --sandbox and --bootstrap-server")


def test_sasl_admin_applies_reader_is_denied_and_changes_nothing(live, prefix, tmp_path):
    path = manifests(tmp_path, prefix, FIRST)
    reader = live.command_config(tmp_path, "reader")
    denied = run_cli("apply", path, "--auto-approve", "--report", tmp_path / "r.json",
                     "--bootstrap-server", live.sasl_bootstrap, "--command-config", reader)
    assert denied.exit_code == 1
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["preflight_failed"] is True
    assert {(e["status"], (e["error"] or {}).get("code")) for e in report["entities"]} == {("failed", 31)}
    assert "CLUSTER_AUTHORIZATION_FAILED" in denied.stdout
    assert live.state(mine(prefix)) == {}
    admin = live.command_config(tmp_path, "admin")
    applied = run_cli("apply", path, "--auto-approve", "--bootstrap-server", live.sasl_bootstrap,
                      "--command-config", admin)
    assert applied.exit_code == 0, applied.stdout + applied.stderr
    assert len(live.state(mine(prefix))) == 3


def test_wrong_password_is_reported_as_such_and_never_printed(live, prefix, tmp_path):
    path = manifests(tmp_path, prefix, FIRST)
    wrong = "wrong-" + uuid.uuid4().hex
    props = live.command_config(tmp_path, "admin", wrong)
    for command in ("plan", "apply"):
        result = run_cli(command, path, "--auto-approve" if command == "apply" else "--detailed-exitcode",
                         "--bootstrap-server", live.sasl_bootstrap, "--command-config", props)
        assert result.exit_code == 1
        assert "authentication failed" in result.stderr, result.stderr
        assert wrong not in result.stdout + result.stderr
        assert "Traceback" not in result.stderr


def test_kafkas_own_configcommand_sees_exactly_what_kqplan_applied(real_kafka, tmp_path):
    # the sandbox is held to the same broker by tests/sandbox/differential_test.py
    from tests.kafka.configcommand import Select

    live = Live("real_kafka", real_kafka.bootstrap, real_kafka.sasl_bootstrap, dict(real_kafka.users))
    prefix = f"kqplan-cc-{uuid.uuid4().hex[:8]}"
    try:
        path = manifests(tmp_path, prefix, FIRST)
        report = tmp_path / "r.json"
        assert kq(live, "apply", path, "--auto-approve", "--report", report).exit_code == 0
        reported = {tuple(sorted(e["entity"].items())): e["after"]
                    for e in json.loads(report.read_text())["entities"]}
        seen = {}
        for user in (f"{prefix}-api", f"{prefix}-old"):
            seen.update(real_kafka.config_command.describe(Select.named("users", user)).quotas)
        seen.update(real_kafka.config_command.describe(Select.named("users", f"{prefix}-api"),
                                                       Select.named("clients", "loader")).quotas)
        assert {tuple(sorted(k)): v for k, v in seen.items()} == reported
        assert len(reported) == 3
    finally:
        live.remove_all(mine(prefix))
