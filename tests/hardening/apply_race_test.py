"""Two applies racing on the same entity (issue 29): the one whose verify sees the other's value is
told the value changed underneath (another writer, between its alter and its verify) and that a
fresh plan is needed — not "stored differently … change the manifest", which stays for a broker
that keeps another representation of the value sent (ZooKeeper mode's whole numbers)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kqplan.apply.verify import changed_underneath, kept_as, stored_differently
from kqplan.core.cluster import Op
from kqplan.core.entity import Entity
from kqplan.core.ownership import Ownership
from kqplan.core.plan import Action, Change, ClusterRef, diff, same_value
from kqplan.core.quotas import QUOTA_KEYS, ValueType
from kqplan.core.report import ApplyReport, Outcome, Status
from kqplan.render.apply import render_apply, report_to_json
from kqplan.sandbox import Fault, Sandbox, SandboxConfig
from kqplan.sandbox.zk import stored_whole
from tests.helpers import run_cli, write_manifest

ZED = Entity.user("zed")
REF = ClusterRef("race", "127.0.0.1:9092", None, None)
HOLD_MS = 3000  # the first apply's alter answer is held back this long: the second apply runs meanwhile


def manifest(path: Path, rate: int) -> Path:
    return write_manifest(path, f"entities:\n  - user: zed\n    quotas: {{producer_byte_rate: {rate}}}\n")


def until(check, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_the_loser_of_two_racing_applies_is_told_the_value_changed_underneath(tmp_path):
    seed = {ZED: {"producer_byte_rate": 1000.0}}
    with Sandbox.start(SandboxConfig(cluster_id="race", seed=seed)) as box:
        # the first real alter is committed at once, its answer held back: the window between
        # an apply's alter and its verify, made long enough for a whole second apply
        box.faults.add(Fault("alter", answer_delay_ms=HOLD_MS, times=1))
        first_report = tmp_path / "first.json"
        first = subprocess.Popen(
            [sys.executable, "-m", "kqplan", "apply", str(manifest(tmp_path / "a" / "q.yaml", 2000)),
             "--bootstrap-server", box.bootstrap, "--auto-approve", "--report", str(first_report)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            until(lambda: box.state.get(ZED) == {"producer_byte_rate": 2000.0})  # its alter landed
            started = time.monotonic()
            second = run_cli("apply", manifest(tmp_path / "b" / "q.yaml", 3000), "--bootstrap-server",
                             box.bootstrap, "--auto-approve", "--report", tmp_path / "second.json")
            assert time.monotonic() - started < HOLD_MS / 1000, "the second apply came too late"
            out, err = first.communicate(timeout=60)
        finally:
            if first.poll() is None:
                first.kill()
                first.communicate()
        assert box.state[ZED] == {"producer_byte_rate": 3000.0}

    # the second writer won: its apply converged
    assert second.exit_code == 0, second.stdout + second.stderr
    assert json.loads((tmp_path / "second.json").read_text())["entities"][0]["status"] == "applied"

    # the first is told what happened, and what to do
    assert first.returncode == 1, out + err
    assert "Traceback" not in err
    assert "  ~ {user=zed}: changed underneath: producer_byte_rate=3000 (sent 2000)" in out.splitlines()
    assert "another writer altered it between this apply's alter and its verify" in out
    assert "fresh plan" in out
    assert "stored differently" not in out
    assert "change the manifest" not in out
    assert "Run apply again" not in out
    report = json.loads(first_report.read_text())
    (entity,) = report["entities"]
    assert entity["status"] == "changed underneath"
    assert entity["after"] == {"producer_byte_rate": 3000.0}  # what the cluster holds: the other's
    assert report["summary"]["changed_underneath"] == 1
    assert report["summary"]["stored_differently"] == 0
    assert report["ok"] is False
    assert report["verify"]["polls"] == 1  # a third value is final: no polling to the deadline


def test_an_entity_another_writer_deleted_meanwhile_is_changed_underneath(tmp_path):
    # (an entity the apply creates and another writer deletes looks like read-after-write lag:
    # describe shows the state before; so the race is shown on an update)
    seed = {ZED: {"producer_byte_rate": 1000.0}}
    with Sandbox.start(SandboxConfig(cluster_id="race", seed=seed)) as box:
        box.faults.add(Fault("alter", answer_delay_ms=HOLD_MS, times=1))
        report = tmp_path / "r.json"
        first = subprocess.Popen(
            [sys.executable, "-m", "kqplan", "apply", str(manifest(tmp_path / "a" / "q.yaml", 2000)),
             "--bootstrap-server", box.bootstrap, "--auto-approve", "--report", str(report)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            until(lambda: box.state.get(ZED) == {"producer_byte_rate": 2000.0})
            removal = run_cli("alter", "--names", "user=zed", "--delete", "producer_byte_rate",
                              "--bootstrap-server", box.bootstrap)
            out, err = first.communicate(timeout=60)
        finally:
            if first.poll() is None:
                first.kill()
                first.communicate()
    assert removal.exit_code == 0, removal.stdout + removal.stderr
    assert first.returncode == 1, out + err
    line = "  ~ {user=zed}: changed underneath: no quotas now (sent producer_byte_rate=2000)"
    assert line in out.splitlines()
    (entity,) = json.loads(report.read_text())["entities"]
    assert (entity["status"], entity["after"]) == ("changed underneath", None)


# -- the rule, over generated values -------------------------------------------------------------

LONG_KEYS = [k for k, spec in QUOTA_KEYS.items() if spec.type is not ValueType.DOUBLE]
finite = st.floats(min_value=1.0, max_value=1e12, allow_nan=False)


def change(before: dict[str, float] | None, after: dict[str, float]):
    (c,) = diff({ZED: after}, {ZED: before} if before else {}, Ownership(), cluster=REF,
                fingerprint=None).changes
    return c


@settings(max_examples=200, deadline=None)
@given(key=st.sampled_from(LONG_KEYS), whole=st.integers(1, 2**31 - 2),
       offset=st.sampled_from([1e-7, -1e-7, 5e-7, -9e-7]))
def test_zookeeper_whole_numbers_are_a_representation_of_the_value_sent(key, whole, offset):
    sent = whole + offset
    if sent == float(whole):
        return  # the offset vanished in the double: nothing to represent
    c = change({key: 1.0} if whole != 1 else {key: 5.0}, {key: sent})
    now = {key: float(whole)}
    assert kept_as(key, float(whole), sent)
    assert stored_differently(now, c)
    assert not changed_underneath(now, c)


@settings(max_examples=200, deadline=None)
@given(key=st.sampled_from(list(QUOTA_KEYS)), sent=finite, other=finite)
def test_any_other_value_is_another_writers(key, sent, other):
    before = sent + 7.0
    if math.isclose(other, sent, abs_tol=2e-6) or other == before:
        return
    c = change({key: before}, {key: sent})
    now = {key: other}
    assert not stored_differently(now, c)
    assert changed_underneath(now, c)


def test_nan_on_a_whole_number_key_is_kept_as_zero_and_a_double_key_keeps_exactly():
    assert kept_as("producer_byte_rate", 0.0, math.nan)  # ZkAdminManager: NaN.toLong is 0
    assert kept_as("request_percentage", math.nan, math.nan)
    assert not kept_as("request_percentage", 1235.0, 1235.0000001)  # a DOUBLE is kept as sent
    assert kept_as("producer_byte_rate", 1235.0, 1234.9999999)  # (value + 1e-6).toLong
    assert not kept_as("producer_byte_rate", 1234.0, 1234.9999999)
    assert kept_as("producer_byte_rate", float(2**63), float(2**63))


@settings(max_examples=300, deadline=None)
@given(key=st.sampled_from(LONG_KEYS), sent=st.floats(allow_infinity=True, allow_nan=True)
       | st.integers(-5, 2**40).map(lambda n: n + 1e-7) | st.integers(-5, 2**40).map(lambda n: n - 1e-7))
def test_the_representation_is_what_the_zookeeper_flavour_stores(key, sent):
    """The sandbox's ZooKeeper flavour (checked against a real 3.9 broker) and verify agree."""
    stored = stored_whole(sent, QUOTA_KEYS[key].type.value)
    if stored is not None:
        assert kept_as(key, stored, sent)
    for other in (sent + 1.0, sent - 1.0, 0.5, 3.0):
        if stored is None or not same_value(other, stored):
            assert kept_as(key, other, sent) == same_value(other, sent)


def test_the_advice_names_each_cause():
    raced = change({"producer_byte_rate": 1.0}, {"producer_byte_rate": 2.0})
    truncated = Change(Entity.user("t"), Action.CREATE, None, {"producer_byte_rate": 1235.0000001},
                       (Op("producer_byte_rate", 1235.0000001),))
    report = ApplyReport(REF, (Outcome(raced, Status.CHANGED_UNDERNEATH, stored={"producer_byte_rate": 3.0}),
                               Outcome(truncated, Status.STORED_DIFFERENTLY,
                                       stored={"producer_byte_rate": 1235.0})),
                         False, 1, {"describe": 2, "alter_validate": 1, "alter": 1})
    lines = render_apply(report).splitlines()
    assert "  ~ {user=zed}: changed underneath: producer_byte_rate=3 (sent 2)" in lines
    assert "  + {user=t}: stored differently: producer_byte_rate=1235 (asked 1235.0000001)" in lines
    closing = lines[-1]
    assert closing.startswith("Apply incomplete: 0 of 2 entities applied; 1 stored differently, "
                              "1 changed underneath. The value changed underneath (1 entity)")
    assert "fresh plan" in closing
    assert "change the manifest" in closing
    assert "Run apply again" not in closing
    as_json = report_to_json(report)
    assert [e["status"] for e in as_json["entities"]] == ["changed underneath", "stored differently"]
    assert as_json["summary"]["changed_underneath"] == 1
