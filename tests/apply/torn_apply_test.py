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

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kqplan.apply import protocol
from kqplan.apply.verify import VerifyPolicy
from kqplan.sandbox import Flavor, Sandbox, SandboxConfig
from tests.apply.torn import BATCH, NEW, OLD, SCHEMA, N, Users, real_alter
from tests.fault_proxy import ALTER_CLIENT_QUOTAS, DESCRIBE_CLIENT_QUOTAS, Kind, Rule, proxied
from tests.helpers import run_cli


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(protocol, "MAX_RECORDS_PER_REQUEST", BATCH)
    monkeypatch.setattr(protocol, "DEFAULT_VERIFY", VerifyPolicy(timeout_s=1.0))


@pytest.fixture
def box() -> Iterator[Sandbox]:
    with Sandbox.start(SandboxConfig(port=0, cluster_id="faults", seed=Users("").seed_state())) as sandbox:
        yield sandbox


@pytest.fixture
def ents(box: Sandbox) -> Users:
    return Users(box.bootstrap)


def test_batch_2_of_4_dropped_and_the_broker_gone(box, ents, tmp_path, small_batches):
    report = tmp_path / "r.json"
    with proxied(box.bootstrap) as proxy:
        proxy.add(Rule(ALTER_CLIENT_QUOTAS, real_alter(2), Kind.DROP))
        code, out = ents.apply_through(proxy.bootstrap, tmp_path, report)
    assert code == 1, out
    assert "Traceback" not in out
    assert "Batch 2 of 4 lost its answer" in out
    assert "batches 3–4 not sent" in out
    assert "check --bootstrap-server" not in out.split("Verify failed")[0]
    assert "Apply incomplete: 0 of 20 entities applied; 5 unverified, 5 unknown, 10 not sent." in out
    by_status = ents.check_truthful(tmp_path, report)
    assert by_status == {"unverified": ents.users(1), "unknown": ents.users(2), "not sent": ents.users(3, 4)}
    assert ents.stored() == {u: NEW if u in ents.users(1) else OLD for u in ents.users(1, 2, 3, 4)}


def test_batch_2_of_4_applied_then_its_answer_lost_and_the_broker_gone(box, ents, tmp_path, small_batches):
    report = tmp_path / "r.json"
    with proxied(box.bootstrap) as proxy:
        proxy.add(Rule(ALTER_CLIENT_QUOTAS, real_alter(2), Kind.DROP_AFTER))
        code, out = ents.apply_through(proxy.bootstrap, tmp_path, report)
    assert code == 1, out
    by_status = ents.check_truthful(tmp_path, report)
    assert by_status == {"unverified": ents.users(1), "unknown": ents.users(2), "not sent": ents.users(3, 4)}
    assert ents.stored() == {u: NEW if u in ents.users(1, 2) else OLD for u in ents.users(1, 2, 3, 4)}


def test_batch_2_of_4_black_holed(box, ents, tmp_path, small_batches):
    report = tmp_path / "r.json"
    with proxied(box.bootstrap) as proxy:
        proxy.add(Rule(ALTER_CLIENT_QUOTAS, real_alter(2), Kind.BLACKHOLE, seconds=4.0))
        started = time.monotonic()
        code, out = ents.apply_through(proxy.bootstrap, tmp_path, report)
        time.sleep(max(0.0, started + 4.5 - time.monotonic()))  # the held request lands meanwhile
    assert code == 1, out
    assert "Batch 2 of 4 timed out after 1." in out
    assert "(it may still be applied); batches 3–4 not sent." in out
    by_status = ents.check_truthful(tmp_path, report)
    assert by_status["not sent"] == ents.users(3, 4)
    assert ents.users(2) <= by_status.get("unknown", set()) | by_status.get("applied", set())
    assert ents.stored() == {u: NEW if u in ents.users(1, 2) else OLD for u in ents.users(1, 2, 3, 4)}


def test_batch_2_of_4_answered_after_the_timeout(box, ents, tmp_path, small_batches):
    report = tmp_path / "r.json"
    with proxied(box.bootstrap) as proxy:
        proxy.add(Rule(ALTER_CLIENT_QUOTAS, real_alter(2), Kind.DELAY, seconds=3.0))
        code, out = ents.apply_through(proxy.bootstrap, tmp_path, report)
    assert code == 1, out
    assert "timed out after" in out
    assert "batches 3–4 not sent" in out
    by_status = ents.check_truthful(tmp_path, report)
    # the request landed at once: the verify describe (a new connection) resolves it
    assert by_status == {"applied": ents.users(1, 2), "not sent": ents.users(3, 4)}
    assert "Apply incomplete: 10 of 20 entities applied; 10 not sent." in out


def test_another_writer_between_the_plan_and_the_alter_stops_the_apply(box, ents, tmp_path, small_batches):
    # the 1st AlterClientQuotas is the first validateOnly: the plan's describe is done, no alter yet
    report = tmp_path / "r.json"
    victim = ents.order[7]
    with proxied(box.bootstrap) as proxy:
        proxy.add(Rule(ALTER_CLIENT_QUOTAS, 1, Kind.CALL, action=lambda: ents.another_writer(victim, 7.0)))
        code, out = ents.apply_through(proxy.bootstrap, tmp_path, report)
        assert proxy.counts[ALTER_CLIENT_QUOTAS] == N // BATCH  # the validations, no real alter
    assert code == 1, out
    assert (f"1 entity changed on the cluster since the plan was made ({{user={victim}}}); "
            "nothing was changed") in out
    assert "another writer changed them" in out
    document = json.loads(report.read_text())
    assert (document["status"], document["ok"]) == ("failed", False)
    assert {e["status"] for e in document["entities"]} == {"not sent"}
    assert ents.stored() == {u: 7.0 if u == victim else OLD for u in ents.users(1, 2, 3, 4)}


def test_a_lost_batch_that_landed_is_known_to_have_landed_whole(box, ents, tmp_path, small_batches):
    # batch 2's connection is cut after the broker has the request: its answer is lost, the
    # broker alive; the verify describe (a new connection) sees it landed
    report = tmp_path / "r.json"
    with proxied(box.bootstrap) as proxy:
        proxy.add(Rule(ALTER_CLIENT_QUOTAS, real_alter(2), Kind.CUT_AFTER))
        code, out = ents.apply_through(proxy.bootstrap, tmp_path, report)
    assert code == 1, out
    assert "Batch 2 of 4 lost its answer" in out
    assert "resolved by describing: it landed (one of its entities shows its new value" in out
    assert ents.check_truthful(tmp_path, report) == {
        "applied": ents.users(1, 2), "not sent": ents.users(3, 4)}


def test_a_lost_batch_that_never_reached_the_broker_is_not_applied(box, ents, tmp_path, small_batches):
    report = tmp_path / "r.json"
    with proxied(box.bootstrap) as proxy:
        proxy.add(Rule(ALTER_CLIENT_QUOTAS, real_alter(2), Kind.CUT))
        code, out = ents.apply_through(proxy.bootstrap, tmp_path, report)
    assert code == 1, out
    assert "The lost batch's outcome was resolved by describing." in out
    assert ents.check_truthful(tmp_path, report) == {
        "applied": ents.users(1), "not applied": ents.users(2), "not sent": ents.users(3, 4)}


@pytest.mark.parametrize("flavor", [Flavor.KRAFT, Flavor.ZK], ids=["kraft", "zookeeper"])
def test_a_landed_batch_reverted_by_another_writer(tmp_path, small_batches, flavor):
    """KRaft writes a request whole: one entity of the lost batch at its new value proves the
    rest was written too, so one back at its old value was changed by another writer since. A
    ZooKeeper-mode broker writes one znode per entity: there, each entity speaks for itself."""
    report = tmp_path / "r.json"
    config = SandboxConfig(port=0, cluster_id="faults", seed=Users("").seed_state(), flavor=flavor)
    with Sandbox.start(config) as sandbox, proxied(sandbox.bootstrap) as proxy:
        ents = Users(sandbox.bootstrap)
        victim = sorted(ents.users(2))[0]
        proxy.add(Rule(ALTER_CLIENT_QUOTAS, real_alter(2), Kind.CUT_AFTER))
        # describes: 1 the plan, 2 the check before the alter, 3 the first verify
        proxy.add(Rule(DESCRIBE_CLIENT_QUOTAS, 3, Kind.CALL,
                       action=lambda: ents.another_writer(victim, OLD)))
        code, out = ents.apply_through(proxy.bootstrap, tmp_path, report)
        assert code == 1, out
        by_status = ents.check_truthful(tmp_path, report)
    rest = ents.users(1, 2) - {victim}
    if flavor is Flavor.KRAFT:
        assert by_status == {"applied": rest, "changed underneath": {victim}, "not sent": ents.users(3, 4)}
    else:
        assert by_status == {"applied": rest, "not applied": {victim}, "not sent": ents.users(3, 4)}


@pytest.mark.parametrize(("api", "nth"), [(DESCRIBE_CLIENT_QUOTAS, 1), (ALTER_CLIENT_QUOTAS, 1)],
                         ids=["plan describe", "validate"])
def test_a_stale_report_is_replaced_when_the_next_run_fails_early(box, ents, tmp_path, small_batches, api,
                                                                  nth):
    report = tmp_path / "r.json"
    first = run_cli("apply", ents.manifest(tmp_path, 50.0), "--auto-approve", "--report", report,
                    "--bootstrap-server", box.bootstrap)
    assert first.exit_code == 0, first.stderr
    assert json.loads(report.read_text())["ok"] is True
    with proxied(box.bootstrap) as proxy:
        proxy.add(Rule(api, nth, Kind.DROP))
        code, out = ents.apply_through(proxy.bootstrap, tmp_path, report)
    assert code == 1, out
    document = json.loads(report.read_text())
    jsonschema.validate(document, SCHEMA)
    assert (document["ok"], document["status"]) == (False, "failed")
    assert document["error"]
    assert all(e["status"] == "not sent" for e in document["entities"])
    assert len(document["entities"]) == (N if api == ALTER_CLIENT_QUOTAS else 0)
    assert set(ents.stored().values()) == {50.0}  # nothing changed


def test_sigterm_mid_alter_leaves_an_interrupted_report(box, ents, tmp_path):
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"ok": True}))  # a previous run's success
    with proxied(box.bootstrap) as proxy:
        proxy.add(Rule(ALTER_CLIENT_QUOTAS, 2, Kind.DELAY, seconds=30.0))  # 1: validate, 2: alter
        child = subprocess.Popen(
            [sys.executable, "-m", "kqplan", "apply", str(ents.manifest(tmp_path)), "--auto-approve",
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
    assert set(ents.stored().values()) == {NEW}


FAULTS = st.one_of(
    st.tuples(st.just(ALTER_CLIENT_QUOTAS), st.integers(1, 2 * N // BATCH)),
    st.tuples(st.just(DESCRIBE_CLIENT_QUOTAS), st.integers(1, 3)),
)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fault=FAULTS, kind=st.sampled_from([k for k in Kind if k is not Kind.CALL]))
def test_any_fault_leaves_a_truthful_report(tmp_path_factory, fault, kind):
    api, nth = fault
    tmp_path = tmp_path_factory.mktemp("fault")
    report = tmp_path / "r.json"
    with pytest.MonkeyPatch.context() as mp, \
            Sandbox.start(SandboxConfig(port=0, cluster_id="faults", seed=Users("").seed_state())) as sandbox:
        ents = Users(sandbox.bootstrap)
        mp.setattr(protocol, "MAX_RECORDS_PER_REQUEST", BATCH)
        mp.setattr(protocol, "DEFAULT_VERIFY", VerifyPolicy(timeout_s=0.5))
        with proxied(sandbox.bootstrap) as proxy:
            proxy.add(Rule(api, nth, kind, seconds=2.0))
            started = time.monotonic()
            code, out = ents.apply_through(proxy.bootstrap, tmp_path, report)
            time.sleep(max(0.0, started + 2.5 - time.monotonic()))  # held requests land
        assert "Traceback" not in out
        assert code in (0, 1), out
        document = json.loads(report.read_text())
        jsonschema.validate(document, SCHEMA)
        if document["entities"]:
            ents.check_truthful(tmp_path, report)
        else:  # stopped before the plan: nothing was sent
            assert code == 1
            assert document["status"] == "failed"
            assert set(ents.stored().values()) == {OLD}
        assert (code == 0) is document["ok"]
