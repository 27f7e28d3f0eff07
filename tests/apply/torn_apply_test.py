"""apply under real network faults (issue 33): a TCP proxy between kqplan and the sandbox drops,
black-holes or delays the N-th request of an API. Whatever happens once an alter has gone out, the
report exists and lists every entity with an outcome that is true of the cluster read directly
afterwards, and the next plan shows exactly what is left."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kqplan.apply import protocol
from kqplan.apply.verify import VerifyPolicy
from kqplan.cluster.kafka import KafkaCluster
from kqplan.core.entity import Entity
from kqplan.sandbox import Sandbox, SandboxConfig
from tests.fault_proxy import ALTER_CLIENT_QUOTAS, DESCRIBE_CLIENT_QUOTAS, Kind, Rule, proxied
from tests.helpers import REPO, run_cli, write_manifest

N = 20  # entities
BATCH = 5  # per alter request: 4 batches; AlterClientQuotas 1-4 validate them, 5-8 alter them
OLD, NEW = 1.0, 100.0
SCHEMA = json.loads((REPO / "schemas" / "report-v1.json").read_text())
STATUSES = {"applied", "unverified", "unknown", "not applied", "not sent", "failed",
            "stored differently", "changed underneath"}


def real_alter(batch: int) -> int:
    """The AlterClientQuotas request that carries real alter batch ``batch`` (1-based)."""
    return N // BATCH + batch


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(protocol, "MAX_RECORDS_PER_REQUEST", BATCH)
    monkeypatch.setattr(protocol, "DEFAULT_VERIFY", VerifyPolicy(timeout_s=1.0))


@pytest.fixture
def box() -> Iterator[Sandbox]:
    seed = {Entity.user(f"u{i}"): {"producer_byte_rate": OLD} for i in range(N)}
    with Sandbox.start(SandboxConfig(port=0, cluster_id="faults", seed=seed)) as sandbox:
        yield sandbox


def manifest(tmp_path: Path, rate: float = NEW) -> Path:
    return write_manifest(tmp_path / "q" / "q.yaml", "entities:\n" + "".join(
        f"  - user: u{i}\n    quotas: {{producer_byte_rate: {rate:g}}}\n" for i in range(N)))


def client_config(tmp_path: Path, timeout_ms: int = 1500) -> Path:
    path = tmp_path / "client.properties"
    path.write_text(f"request.timeout.ms={timeout_ms}\nsocket.connection.setup.timeout.ms=1000\n")
    return path


def apply_through(proxy_bootstrap: str, tmp_path: Path, report: Path) -> tuple[int, str]:
    result = run_cli("apply", manifest(tmp_path), "--auto-approve", "--report", report,
                     "--bootstrap-server", proxy_bootstrap, "--command-config", client_config(tmp_path))
    return result.exit_code, result.stdout + result.stderr


def stored(box: Sandbox) -> dict[str, float | None]:
    """The cluster read directly (over the wire, not through the proxy): user → producer_byte_rate."""
    with KafkaCluster.connect(box.bootstrap, None) as cluster:
        state = cluster.describe()
    return {f"u{i}": (state.get(Entity.user(f"u{i}")) or {}).get("producer_byte_rate") for i in range(N)}


def check_truthful(box: Sandbox, tmp_path: Path, report_path: Path) -> dict[str, set[str]]:
    """The invariant: every entity has a status; ``applied`` ones hold the new value, ``not sent``
    ones the old; the next plan lists exactly the entities not at the new value, none ``applied``
    and every ``not sent``. Returns the users by status."""
    report = json.loads(report_path.read_text())
    jsonschema.validate(report, SCHEMA)
    by_status: dict[str, set[str]] = {}
    for entity in report["entities"]:
        assert entity["status"] in STATUSES
        by_status.setdefault(entity["status"], set()).add(entity["entity"]["user"])
    assert sorted(e["entity"]["user"] for e in report["entities"]) == sorted(f"u{i}" for i in range(N))
    now = stored(box)
    assert all(now[u] == NEW for u in by_status.get("applied", ())), (by_status, now)
    assert all(now[u] == OLD for u in by_status.get("not sent", ())), (by_status, now)
    plan = run_cli("plan", manifest(tmp_path), "--bootstrap-server", box.bootstrap, "--format", "json")
    assert plan.exit_code == 0, plan.stderr
    left = {c["entity"]["user"] for c in plan.json["changes"]}
    assert left == {u for u, v in now.items() if v != NEW}
    assert left.isdisjoint(by_status.get("applied", ()))
    assert by_status.get("not sent", set()) <= left
    if report["ok"]:
        assert not left
        assert report["status"] == "finished"
    return by_status


ORDER = sorted((f"u{i}" for i in range(N)), key=lambda u: Entity.user(u).display)
"""The plan's order, in which batches are cut."""


def users(*batches: int) -> set[str]:
    return {ORDER[i] for b in batches for i in range((b - 1) * BATCH, b * BATCH)}


def test_batch_2_of_4_dropped_and_the_broker_gone(box, tmp_path, small_batches):
    report = tmp_path / "r.json"
    with proxied(box.bootstrap) as proxy:
        proxy.add(Rule(ALTER_CLIENT_QUOTAS, real_alter(2), Kind.DROP))
        code, out = apply_through(proxy.bootstrap, tmp_path, report)
    assert code == 1, out
    assert "Traceback" not in out
    assert "Batch 2 of 4 lost its answer" in out
    assert "batches 3–4 not sent" in out
    assert "check --bootstrap-server" not in out.split("Verify failed")[0]
    assert "Apply incomplete: 0 of 20 entities applied; 5 unverified, 5 unknown, 10 not sent." in out
    by_status = check_truthful(box, tmp_path, report)
    assert by_status == {"unverified": users(1), "unknown": users(2), "not sent": users(3, 4)}
    assert stored(box) == {u: NEW if u in users(1) else OLD for u in users(1, 2, 3, 4)}


def test_batch_2_of_4_applied_then_its_answer_lost_and_the_broker_gone(box, tmp_path, small_batches):
    report = tmp_path / "r.json"
    with proxied(box.bootstrap) as proxy:
        proxy.add(Rule(ALTER_CLIENT_QUOTAS, real_alter(2), Kind.DROP_AFTER))
        code, out = apply_through(proxy.bootstrap, tmp_path, report)
    assert code == 1, out
    by_status = check_truthful(box, tmp_path, report)
    assert by_status == {"unverified": users(1), "unknown": users(2), "not sent": users(3, 4)}
    assert stored(box) == {u: NEW if u in users(1, 2) else OLD for u in users(1, 2, 3, 4)}


def test_batch_2_of_4_black_holed(box, tmp_path, small_batches):
    report = tmp_path / "r.json"
    with proxied(box.bootstrap) as proxy:
        proxy.add(Rule(ALTER_CLIENT_QUOTAS, real_alter(2), Kind.BLACKHOLE, seconds=4.0))
        started = time.monotonic()
        code, out = apply_through(proxy.bootstrap, tmp_path, report)
        time.sleep(max(0.0, started + 4.5 - time.monotonic()))  # the held request lands meanwhile
    assert code == 1, out
    assert "Batch 2 of 4 timed out after 1." in out
    assert "(it may still be applied); batches 3–4 not sent." in out
    by_status = check_truthful(box, tmp_path, report)
    assert by_status["not sent"] == users(3, 4)
    assert users(2) <= by_status.get("unknown", set()) | by_status.get("applied", set())
    assert stored(box) == {u: NEW if u in users(1, 2) else OLD for u in users(1, 2, 3, 4)}


def test_batch_2_of_4_answered_after_the_timeout(box, tmp_path, small_batches):
    report = tmp_path / "r.json"
    with proxied(box.bootstrap) as proxy:
        proxy.add(Rule(ALTER_CLIENT_QUOTAS, real_alter(2), Kind.DELAY, seconds=3.0))
        code, out = apply_through(proxy.bootstrap, tmp_path, report)
    assert code == 1, out
    assert "timed out after" in out
    assert "batches 3–4 not sent" in out
    by_status = check_truthful(box, tmp_path, report)
    # the request landed at once: the verify describe (a new connection) resolves it
    assert by_status == {"applied": users(1, 2), "not sent": users(3, 4)}
    assert "Apply incomplete: 10 of 20 entities applied; 10 not sent." in out


@pytest.mark.parametrize(("api", "nth"), [(DESCRIBE_CLIENT_QUOTAS, 1), (ALTER_CLIENT_QUOTAS, 1)],
                         ids=["plan describe", "validate"])
def test_a_stale_report_is_replaced_when_the_next_run_fails_early(box, tmp_path, small_batches, api, nth):
    report = tmp_path / "r.json"
    first = run_cli("apply", manifest(tmp_path, 50.0), "--auto-approve", "--report", report,
                    "--bootstrap-server", box.bootstrap)
    assert first.exit_code == 0, first.stderr
    assert json.loads(report.read_text())["ok"] is True
    with proxied(box.bootstrap) as proxy:
        proxy.add(Rule(api, nth, Kind.DROP))
        code, out = apply_through(proxy.bootstrap, tmp_path, report)
    assert code == 1, out
    document = json.loads(report.read_text())
    jsonschema.validate(document, SCHEMA)
    assert (document["ok"], document["status"]) == (False, "failed")
    assert document["error"]
    assert all(e["status"] == "not sent" for e in document["entities"])
    assert len(document["entities"]) == (N if api == ALTER_CLIENT_QUOTAS else 0)
    assert set(stored(box).values()) == {50.0}  # nothing changed


def test_sigterm_mid_alter_leaves_an_interrupted_report(box, tmp_path):
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"ok": True}))  # a previous run's success
    with proxied(box.bootstrap) as proxy:
        proxy.add(Rule(ALTER_CLIENT_QUOTAS, 2, Kind.DELAY, seconds=30.0))  # 1: validate, 2: alter
        child = subprocess.Popen(
            [sys.executable, "-m", "kqplan", "apply", str(manifest(tmp_path)), "--auto-approve",
             "--report", str(report), "--bootstrap-server", proxy.bootstrap],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 30
            while not (proxy.counts[ALTER_CLIENT_QUOTAS] >= 2 and
                       json.loads(report.read_text()).get("status") == "in progress"):
                assert time.monotonic() < deadline, "no in-progress report"
                assert child.poll() is None, "no in-progress report"
                time.sleep(0.02)
            in_progress = json.loads(report.read_text())
            child.send_signal(signal.SIGTERM)
            out, err = child.communicate(timeout=30)
        finally:
            if child.poll() is None:
                child.kill()
                child.communicate()
    assert (in_progress["ok"], in_progress["finished_at"]) == (False, None)
    assert in_progress["plan_digest"].startswith("sha256:")
    assert {e["status"] for e in in_progress["entities"]} == {"not sent"}
    assert child.returncode == 130, out + err
    document = json.loads(report.read_text())
    jsonschema.validate(document, SCHEMA)
    assert (document["status"], document["ok"]) == ("interrupted", False)
    assert document["plan_digest"] == in_progress["plan_digest"]
    # the one batch was in flight: it landed (the proxy forwarded it), and is reported unknown
    assert {e["status"] for e in document["entities"]} == {"unknown"}
    assert set(stored(box).values()) == {NEW}


FAULTS = st.one_of(
    st.tuples(st.just(ALTER_CLIENT_QUOTAS), st.integers(1, 2 * N // BATCH)),
    st.tuples(st.just(DESCRIBE_CLIENT_QUOTAS), st.integers(1, 3)),
)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fault=FAULTS, kind=st.sampled_from(Kind))
def test_any_fault_leaves_a_truthful_report(tmp_path_factory, fault, kind):
    api, nth = fault
    tmp_path = tmp_path_factory.mktemp("fault")
    report = tmp_path / "r.json"
    seed = {Entity.user(f"u{i}"): {"producer_byte_rate": OLD} for i in range(N)}
    with pytest.MonkeyPatch.context() as mp, \
            Sandbox.start(SandboxConfig(port=0, cluster_id="faults", seed=seed)) as sandbox:
        mp.setattr(protocol, "MAX_RECORDS_PER_REQUEST", BATCH)
        mp.setattr(protocol, "DEFAULT_VERIFY", VerifyPolicy(timeout_s=0.5))
        with proxied(sandbox.bootstrap) as proxy:
            proxy.add(Rule(api, nth, kind, seconds=2.0))
            started = time.monotonic()
            code, out = apply_through(proxy.bootstrap, tmp_path, report)
            time.sleep(max(0.0, started + 2.5 - time.monotonic()))  # held requests land
        assert "Traceback" not in out
        assert code in (0, 1), out
        document = json.loads(report.read_text())
        jsonschema.validate(document, SCHEMA)
        if document["entities"]:
            check_truthful(sandbox, tmp_path, report)
        else:  # stopped before the plan: nothing was sent
            assert code == 1
            assert document["status"] == "failed"
            assert set(stored(sandbox).values()) == {OLD}
        assert (code == 0) is document["ok"]
