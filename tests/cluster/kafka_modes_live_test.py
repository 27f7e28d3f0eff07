"""Where ZooKeeper-mode and KRaft brokers answer the same requests by other rules (issue 18), on every
real broker of the matrix: each test asserts what this broker's mode does, and that kqplan neither
sends what it would store differently nor hides what it stored.

ZooKeeper mode (3.x, 2.8): whole-number keys truncate a fraction within 1e-6 (``1235.0000001`` is
kept as 1235; ``1235.5`` is refused), 0 and negative values are stored, IPv6 ip entities are
refused (``2001%3Adb8%3A%3A1 is not a valid IP or resolvable host.``). KRaft tolerates the same
fraction but keeps the double exactly, refuses values <= 0, and accepts IPv6.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kqplan.apply.protocol import apply
from kqplan.apply.verify import VerifyPolicy
from kqplan.cluster.connection import config_from_properties
from kqplan.cluster.kafka import KafkaCluster
from kqplan.core.cluster import ALL, Alteration, Op
from kqplan.core.entity import Entity
from kqplan.core.ownership import Ownership
from kqplan.core.plan import ClusterRef, diff
from kqplan.core.report import Status
from kqplan.core.state import QuotaState
from kqplan.render.apply import render_apply
from tests.cluster.proxy import CountingProxy
from tests.helpers import Result, mine, run_cli, write_manifest
from tests.kafka.configcommand import ConfigCommandError, Select
from tests.kafka.plugin import RealKafka

INVALID_REQUEST = 42


def cluster(real_kafka: RealKafka) -> KafkaCluster:
    return KafkaCluster(config_from_properties("", bootstrap=real_kafka.bootstrap, source="(test)", env={}))


def state(real_kafka: RealKafka, owned: Callable[[Entity], bool]) -> QuotaState:
    with cluster(real_kafka) as c:
        return {e: q for e, q in c.describe(ALL).items() if owned(e)}


def until(real_kafka: RealKafka, owned: Callable[[Entity], bool], want: QuotaState,
          timeout: float = 15.0) -> QuotaState:
    """The owned part of the cluster, polled until it equals ``want`` (Kafka's read-after-write lag)."""
    deadline = time.monotonic() + timeout
    while True:
        got = state(real_kafka, owned)
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


@pytest.fixture
def prefix(real_kafka: RealKafka) -> Iterator[str]:
    """A unique user-name prefix; every user entity under it is removed afterwards."""
    tag = f"kqplan-modes-{uuid.uuid4().hex[:8]}"
    yield tag
    with cluster(real_kafka) as c:
        undo = [Alteration(e, tuple(Op(k, None) for k in q)) for e, q in c.describe(ALL).items()
                if (e.get("user") or "").startswith(tag)]
        if undo:
            c.alter(undo, validate_only=False)


def counted(real_kafka: RealKafka, *args: str | Path) -> tuple[Result, dict[str, int]]:
    """Run kqplan against the broker through a proxy: its result, and the requests it sent by API."""
    with CountingProxy(real_kafka.bootstrap).running() as proxy:
        result = run_cli(*args, "--bootstrap-server", proxy.bootstrap)
        return result, dict(proxy.requests)


def test_a_fraction_on_a_whole_number_key(real_kafka, prefix, tmp_path):
    """ZooKeeper: refused at its line before any alter (it would be stored as 1235, and re-plan
    would show 1235 -> 1235.0000001 forever); the whole number then plans as no change.
    KRaft: the double is kept exactly."""
    path = write_manifest(tmp_path / "q.yaml", f"entities:\n  - user: {prefix}\n"
                          "    quotas: {producer_byte_rate: 1235.0000001}\n")
    applied, sent = counted(real_kafka, "apply", path, "--auto-approve")
    if real_kafka.zookeeper:
        assert applied.exit_code == 1
        assert applied.stderr.splitlines()[0] == (
            f"{path}:5:34: error[KQP145] {{user={prefix}}}: a ZooKeeper-mode broker stores 1235.0000001 "
            "as 1235 (producer_byte_rate is LONG): the plan would never converge; write the whole number")
        assert "AlterClientQuotas" not in sent
        # refused before the cluster's quotas are read: the describe sent ahead while the manifests
        # load (describing_ahead) may or may not have left before the refusal, under load it has
        # not (a full run saw none); never a second one, never an alter
        assert sent.get("DescribeClientQuotas", 0) <= 1
        assert state(real_kafka, mine(prefix)) == {}
        write_manifest(path, f"entities:\n  - user: {prefix}\n    quotas: {{producer_byte_rate: 1235}}\n")
        applied = run_cli("apply", path, "--auto-approve", "--bootstrap-server", real_kafka.bootstrap)
        assert applied.exit_code == 0, applied.stdout + applied.stderr
        kept = 1235.0
    else:
        assert applied.exit_code == 0, applied.stdout + applied.stderr
        kept = 1235.0000001
    assert until(real_kafka, mine(prefix), {Entity.user(prefix): {"producer_byte_rate": kept}}) == \
        {Entity.user(prefix): {"producer_byte_rate": kept}}
    replanned = run_cli("plan", path, "--bootstrap-server", real_kafka.bootstrap, "--detailed-exitcode")
    assert replanned.exit_code == 0, replanned.stdout + replanned.stderr
    assert replanned.stdout.startswith("No changes."), replanned.stdout


def test_the_broker_truncates_or_refuses_a_fraction_as_the_rule_says(real_kafka, prefix):
    """The broker behaviour KQP145 rests on, asked directly (kqplan's pre-checks bypassed)."""
    near, far = Entity.user(f"{prefix}-near"), Entity.user(f"{prefix}-far")
    with cluster(real_kafka) as c:
        results = {r.entity: (r.error_code, r.error_message) for r in c.alter(
            [Alteration(near, (Op("producer_byte_rate", 1235.0000001),)),
             Alteration(far, (Op("producer_byte_rate", 1235.5),))], validate_only=False)}
    if real_kafka.zookeeper:  # the near-whole value is truncated, not refused
        assert results == {near: (0, None),
                           far: (INVALID_REQUEST, "Configuration producer_byte_rate must be a LONG value")}
        want = {near: {"producer_byte_rate": 1235.0}}
    else:  # KRaft tolerates the same 1e-6 but keeps the double exactly
        assert results == {near: (0, None),
                           far: (INVALID_REQUEST, "producer_byte_rate cannot be a fractional value.")}
        want = {near: {"producer_byte_rate": 1235.0000001}}
    assert until(real_kafka, mine(prefix), want) == want


def test_verify_reports_a_value_stored_differently_at_once(real_kafka, prefix):
    """A plan that slipped past the rules (made elsewhere, applied here): verify does not poll to
    its deadline but reports what the cluster keeps."""
    entity = Entity.user(prefix)
    with cluster(real_kafka) as c:
        identity = c.identity()
        ref = ClusterRef(identity.cluster_id, identity.address, identity.version, identity.mode)
        plan = diff({entity: {"producer_byte_rate": 1235.0000001, "request_percentage": 5.0}}, {},
                    Ownership(), cluster=ref, fingerprint=None)
        started = time.monotonic()
        report = apply(c, plan, verify=VerifyPolicy(timeout_s=15.0))
        took = time.monotonic() - started
    (outcome,) = report.outcomes
    if real_kafka.zookeeper:
        assert outcome.status is Status.STORED_DIFFERENTLY
        assert outcome.stored == {"producer_byte_rate": 1235.0, "request_percentage": 5.0}
        rendered = render_apply(report)
        assert f"  + {{user={prefix}}}: stored differently: producer_byte_rate=1235 (asked 1235.0000001)" \
            in rendered.splitlines()
        assert "Re-running cannot converge" in rendered
        assert "Run apply again" not in rendered
    else:
        assert outcome.status is Status.APPLIED
    assert took < 10  # describe shows the stored value at once: no polling to the 15 s deadline


@pytest.mark.parametrize("address", ["2001:db8::1", "::ffff:10.0.0.8"])
def test_ipv6_ip_entities(real_kafka, tmp_path, address):
    """ZooKeeper: refused before the cluster is altered, saying why and where they work, as the
    broker itself would refuse them. KRaft: applied."""
    entity = Entity.of((("ip", address),))
    path = write_manifest(tmp_path / "q.yaml", f'entities:\n  - ip: "{address}"\n'
                          "    quotas: {connection_creation_rate: 7}\n")
    try:
        applied, sent = counted(real_kafka, "apply", path, "--auto-approve")
        if real_kafka.zookeeper:
            assert applied.exit_code == 1
            assert applied.stderr.splitlines()[0] == (
                f"{path}:4:5: error[KQP145] {{ip={address}}}: ZooKeeper-mode brokers refuse IPv6 ip entities "
                "('… is not a valid IP or resolvable host.'); KRaft clusters (Kafka 3.3+) accept them")
            assert "AlterClientQuotas" not in sent
            with cluster(real_kafka) as c:
                (result,) = c.alter([Alteration(entity, (Op("connection_creation_rate", 7.0),))],
                                    validate_only=True)
            sanitized = address.replace(":", "%3A")
            assert (result.error_code, result.error_message) == \
                (INVALID_REQUEST, f"{sanitized} is not a valid IP or resolvable host.")
            assert entity not in state(real_kafka, lambda e: True)
        else:
            assert applied.exit_code == 0, applied.stdout + applied.stderr
            assert until(real_kafka, lambda e: e == entity, {entity: {"connection_creation_rate": 7.0}}) == \
                {entity: {"connection_creation_rate": 7.0}}
    finally:
        with cluster(real_kafka) as c:
            c.alter([Alteration(entity, (Op("connection_creation_rate", None),))], validate_only=False)


@pytest.mark.parametrize(("add", "message"), [
    ("producer_byte_rate=0", "Quota producer_byte_rate must be greater than 0"),
    ("request_percentage=-5", "Quota request_percentage must be greater than 0"),
])
def test_alter_refuses_what_validate_refuses_without_contacting_the_cluster(real_kafka, prefix, add, message):
    """ZooKeeper would store 0 and -5 (and throttle the user to nothing); KRaft would refuse them.
    Either way alter refuses them offline, as validate does (KQP112)."""
    result, sent = counted(real_kafka, "alter", "--names", f"user={prefix}", "--add", add)
    assert result.exit_code == 1
    key = add.partition("=")[0]
    assert result.stderr.splitlines()[0] == f"--add: error[KQP112] {key}: {message}"  # validate's words
    assert sent == {}
    assert state(real_kafka, mine(prefix)) == {}


def test_invalid_cluster_state_is_reported_and_repaired(real_kafka, prefix, tmp_path):
    """Values KRaft refuses, stored out of band by Kafka's own ConfigCommand: on a ZooKeeper-mode
    broker they land; plan reports them rather than calling the cluster clean, and a manifest
    listing the entity repairs them. A KRaft broker refuses them in the first place."""
    cc = real_kafka.config_command
    if not real_kafka.zookeeper:
        with pytest.raises(ConfigCommandError) as err:
            cc.alter(Select.named("users", prefix), add={"producer_byte_rate": 0.0})
        assert "Quota producer_byte_rate must be greater than 0" in err.value.stdout + err.value.stderr
        assert state(real_kafka, mine(prefix)) == {}
        return
    cc.alter(Select.named("users", prefix), add={"producer_byte_rate": 0.0, "request_percentage": -5.0})
    bad = {Entity.user(prefix): {"producer_byte_rate": 0.0, "request_percentage": -5.0}}
    assert until(real_kafka, mine(prefix), bad) == bad
    notes = [f"invalid cluster state: {{user={prefix}}} producer_byte_rate=0.0 is refused by Kafka's own "
             "rules (Quota producer_byte_rate must be greater than 0); FIX.",
             f"invalid cluster state: {{user={prefix}}} request_percentage=-5.0 is refused by Kafka's own "
             "rules (Quota request_percentage must be greater than 0); FIX."]
    kq = ["--bootstrap-server", real_kafka.bootstrap]

    # a manifest that leaves the entity alone: the cluster is not called clean
    unrelated = write_manifest(tmp_path / "none.yaml", "entities: []\n")
    untouched = run_cli("plan", unrelated, *kq, "--detailed-exitcode")
    assert untouched.exit_code == 0, untouched.stdout + untouched.stderr
    for note in notes:
        assert note.replace("FIX", "list the entity in a manifest (or prune it) to repair it") \
            in untouched.stdout.splitlines()

    # export cannot write what validate refuses: it says so, and its ownership prunes the entity
    exported = run_cli("export", "--out", tmp_path / "adopted", *kq)
    assert exported.exit_code == 0, exported.stderr
    assert f"warning: {{user={prefix}}} producer_byte_rate=0.0 is not exported" in exported.stderr
    adopted = run_cli("plan", tmp_path / "adopted", *kq, "--detailed-exitcode")
    assert adopted.exit_code == 2, adopted.stdout + adopted.stderr
    assert f"  - {{user={prefix}}}" in adopted.stdout.splitlines()
    for note in notes:
        assert note.replace("FIX", "this plan repairs it") in adopted.stdout.splitlines()

    path = write_manifest(tmp_path / "q.yaml", f"entities:\n  - user: {prefix}\n"
                          "    quotas: {producer_byte_rate: 1MiB}\n")
    planned = run_cli("plan", path, *kq, "--detailed-exitcode")
    assert planned.exit_code == 2, planned.stdout + planned.stderr
    for note in notes:
        assert note.replace("FIX", "this plan repairs it") in planned.stdout.splitlines()
    applied = run_cli("apply", path, "--auto-approve", *kq)
    assert applied.exit_code == 0, applied.stdout + applied.stderr
    good = {Entity.user(prefix): {"producer_byte_rate": 1048576.0}}
    assert until(real_kafka, mine(prefix), good) == good
    clean = run_cli("plan", path, *kq, "--detailed-exitcode")
    assert clean.exit_code == 0, clean.stdout + clean.stderr
    assert "invalid cluster state" not in clean.stdout
