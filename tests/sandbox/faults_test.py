"""Fault injection as kqplan's client meets it over real TCP (DESIGN §3.5): delays, dropped
connections before and after an alter commits, error answers, the first N requests failing,
and faults changed at run time from other threads.

tests/apply/faults_test.py checks what ``kqplan apply`` makes of these; here it is the sandbox's
side of the contract, one fault kind at a time, through ``KafkaCluster``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from kqplan.cluster.connection import config_from_properties
from kqplan.cluster.kafka import DescribeFailed, KafkaCluster
from kqplan.core.cluster import Alteration, AlterOutcomeUnknown, Op
from kqplan.core.entity import Entity
from kqplan.sandbox import Drop, Fault, Faults, Sandbox, SandboxConfig

SEED = {Entity.user("seeded"): {"producer_byte_rate": 1.0}}


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    with Sandbox.start(SandboxConfig(port=0, seed=SEED)) as sb:
        yield sb


def client(sandbox: Sandbox, props: str = "") -> KafkaCluster:
    # a short backoff: retries are part of what is tested, waiting is not
    return KafkaCluster(config_from_properties(props, bootstrap=sandbox.bootstrap, source="t", env={}),
                        retry_backoff_s=0.01)


def change(name: str, value: float = 5.0) -> Alteration:
    return Alteration(Entity.user(name), (Op("consumer_byte_rate", value),))


# -- delay -----------------------------------------------------------------------------------------

def test_a_delay_slows_exactly_the_requests_it_names(sandbox):
    sandbox.faults.add(Fault("describe", delay_ms=400, times=1))
    with client(sandbox) as c:
        c.identity()  # connect first: only the describe is timed
        t0 = time.perf_counter()
        assert c.describe() == SEED
        assert time.perf_counter() - t0 >= 0.4
        assert c.describe() == SEED  # times=1: spent


def test_a_delay_beyond_the_request_timeout_is_retried_for_a_describe(sandbox):
    sandbox.faults.add(Fault("describe", delay_ms=1500, times=1))
    with client(sandbox, "request.timeout.ms=500\n") as c:
        assert c.describe() == SEED
    assert len(sandbox.requests_of(48)) >= 1


# -- dropped connections ---------------------------------------------------------------------------

def test_lost_alter_applied_drop_after_commit(sandbox):
    sandbox.faults.add(Fault("alter", drop=Drop.AFTER, times=1))
    with client(sandbox) as c:
        with pytest.raises(AlterOutcomeUnknown, match="may or may not have been applied"):
            c.alter([change("after")], validate_only=False)
        assert c.describe()[Entity.user("after")] == {"consumer_byte_rate": 5.0}  # it was applied
    assert sandbox.state[Entity.user("after")] == {"consumer_byte_rate": 5.0}


def test_lost_alter_not_applied_drop_before_commit(sandbox):
    sandbox.faults.add(Fault("alter", drop=Drop.BEFORE, times=1))
    with client(sandbox) as c:
        with pytest.raises(AlterOutcomeUnknown):
            c.alter([change("before")], validate_only=False)
        assert Entity.user("before") not in c.describe()
        # the fault is spent: the same alter now goes through
        assert c.alter([change("before")], validate_only=False)[0].ok
    assert Entity.user("before") in sandbox.state


def test_drop_after_commit_writes_the_state_file_first(tmp_path):
    state = tmp_path / "state.json"
    config = SandboxConfig(port=0, state_file=state, faults=(Fault("alter", drop=Drop.AFTER, times=1),))
    with Sandbox.start(config) as sb, client(sb) as c, pytest.raises(AlterOutcomeUnknown):
        c.alter([change("durable")], validate_only=False)
    from kqplan.snapshot.file import read_snapshot

    saved, _ = read_snapshot(state)
    assert saved == {Entity.user("durable"): {"consumer_byte_rate": 5.0}}


def test_a_dropped_describe_is_retried(sandbox):
    sandbox.faults.add(Fault("describe", drop=Drop.BEFORE, times=2))
    with client(sandbox) as c:
        assert c.describe() == SEED  # attempts=3: two drops, then the answer
    described = [r for r in sandbox.requests if r.api_name == "DescribeClientQuotas"]
    assert len(described) == 3
    assert len({r.connection for r in described}) == 3  # each drop cost a connection


# -- error answers, the first N requests ------------------------------------------------------------

def test_the_first_n_describes_fail_then_it_answers(sandbox):
    sandbox.faults.add(Fault("describe", error_code=7, error_message="The request timed out.", times=2))
    with client(sandbox) as c:
        assert c.describe() == SEED  # REQUEST_TIMED_OUT is retried: fails twice, third works


def test_a_describe_error_that_outlasts_the_retries_is_reported(sandbox):
    sandbox.faults.add(Fault("describe", error_code=7, error_message="The request timed out.", times=3))
    with client(sandbox) as c, pytest.raises(DescribeFailed) as failed:
        c.describe()
    assert failed.value.code == 7


def test_a_whole_request_alter_error_lands_on_every_entity_and_changes_nothing(sandbox):
    sandbox.faults.add(Fault("alter", error_code=41, error_message="This is not the correct controller "
                             "for this cluster.", times=1))
    with client(sandbox) as c:
        results = c.alter([change("a"), change("b")], validate_only=False)
        assert [(r.error_code, r.error_message) for r in results] == [
            (41, "This is not the correct controller for this cluster.")] * 2
        assert c.describe() == SEED
        assert all(r.ok for r in c.alter([change("a"), change("b")], validate_only=False))


def test_named_entities_fail_and_the_others_commit(sandbox):
    bad = Entity.user("b")
    sandbox.faults.add(Fault("alter", error_code=44, error_message="no", entities=frozenset({bad})))
    with client(sandbox) as c:
        results = {r.entity.display: r.error_code for r in c.alter([change("a"), change("b")],
                                                                    validate_only=False)}
    assert results == {Entity.user("a").display: 0, bad.display: 44}
    assert Entity.user("a") in sandbox.state
    assert Entity.user("b") not in sandbox.state


def test_an_alter_fault_spares_validate_only_unless_asked(sandbox):
    sandbox.faults.add(Fault("alter", error_code=44, times=1))
    with client(sandbox) as c:
        assert c.alter([change("v")], validate_only=True)[0].ok  # the pre-flight passes...
        assert c.alter([change("v")], validate_only=False)[0].error_code == 44  # ...the alter fails
        sandbox.faults.add(Fault("alter", error_code=42, validate_only=True, times=1))
        assert c.alter([change("v")], validate_only=True)[0].error_code == 42


def test_faults_given_at_start(tmp_path):
    config = SandboxConfig(port=0, faults=(Fault("describe", error_code=31, times=1),))
    with Sandbox.start(config) as sb, client(sb) as c:
        with pytest.raises(DescribeFailed, match="not authorized to describe"):
            c.describe()
        assert c.describe() == {}


# -- run time changes, thread safety ---------------------------------------------------------------

def test_clear_removes_every_fault_and_the_lag(sandbox):
    sandbox.faults.add(Fault("describe", error_code=31))
    sandbox.faults.lag_ms = 10_000
    sandbox.faults.clear()
    assert sandbox.faults.lag_ms == 0
    with client(sandbox) as c:
        assert c.alter([change("x")], validate_only=False)[0].ok
        assert Entity.user("x") in c.describe()


def test_times_is_exact_under_concurrent_requests():
    faults = Faults()
    faults.add(Fault("alter", error_code=41, times=500))
    hits: list[int] = []

    def take() -> None:
        for _ in range(200):
            hits.append(len(faults.take(49)))

    threads = [threading.Thread(target=take) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(hits) == 500  # 1600 requests, exactly 500 hit


def test_faults_change_while_a_client_is_busy(sandbox):
    stop = threading.Event()
    errors: list[BaseException] = []

    def flip() -> None:
        try:
            while not stop.is_set():
                sandbox.faults.add(Fault("describe", delay_ms=1))
                sandbox.faults.clear()
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    flipper = threading.Thread(target=flip)
    flipper.start()
    try:
        with client(sandbox) as c:
            for _ in range(50):
                assert c.describe() == SEED
    finally:
        stop.set()
        flipper.join(10)
    assert errors == []


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"api": "produce"}, "unknown API 'produce'; one of metadata, apiversions, describe, alter"),
    ({"api": "describe", "error_code": 44, "entities": frozenset({"user=a"})},
     "failing named entities needs api='alter' and an error_code"),
    ({"api": "alter", "entities": frozenset({"user=a"})}, "needs api='alter' and an error_code"),
    ({"api": "alter", "error_code": 44, "entities": frozenset({"{user=a}"})},
     "entities must be kqplan.core.entity.Entity values"),
])
def test_a_bad_fault_is_refused_with_the_reason(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Fault(**kwargs)
