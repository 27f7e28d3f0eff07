"""After a committed alter the sandbox encodes its describe-all answer again in a thread
(broker._warm_up), so the next plan finds it ready; an answer of a state that a later alter
replaced is never served. Over TCP with kqplan's own wire client."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kqplan.cluster.connection import config_from_properties
from kqplan.cluster.kafka import KafkaCluster
from kqplan.core.cluster import Alteration, Op
from kqplan.core.entity import Entity
from kqplan.sandbox import Sandbox, SandboxConfig, apis


def _client(sandbox: Sandbox) -> KafkaCluster:
    return KafkaCluster(config_from_properties("", bootstrap=sandbox.bootstrap, source="test", env={}))


def _set(cluster: KafkaCluster, name: str, value: float) -> None:
    [result] = cluster.alter([Alteration(Entity.user(name), (Op("producer_byte_rate", value),))],
                             validate_only=False)
    assert result.error_code == 0


def test_the_answer_is_ready_after_a_commit_without_a_describe() -> None:
    seed = {Entity.user(f"u{i}"): {"consumer_byte_rate": 1024.0} for i in range(2000)}
    with Sandbox.start(SandboxConfig(port=0, seed=seed)) as box, _client(box) as cluster:
        _set(cluster, "new", 2048.0)
        deadline = time.monotonic() + 10
        while 1 not in box._describe_cache and time.monotonic() < deadline:
            time.sleep(0.01)
        assert 1 in box._describe_cache, "no describe-all answer encoded after the commit"
        _, count = box._describe_cache[1]
        assert count == 2001
        assert cluster.describe()[Entity.user("new")] == {"producer_byte_rate": 2048.0}
        assert [r.entries for r in box.requests_of(48)] == [2001]  # counted as when it is encoded


def test_each_describe_sees_the_alter_before_it() -> None:
    seed = {Entity.user(f"u{i}"): {"consumer_byte_rate": 1024.0} for i in range(3000)}
    with Sandbox.start(SandboxConfig(port=0, seed=seed)) as box, _client(box) as cluster:
        for i in range(30):
            _set(cluster, "moving", float(1024 + i))
            if i % 3 == 0:
                assert cluster.describe()[Entity.user("moving")] == {"producer_byte_rate": float(1024 + i)}


def test_a_warm_up_of_a_replaced_state_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    # the first warm-up starts encoding (50 ms after its alter) before the second alter (at
    # 0.1 s) and ends after it (0.3 s), before that alter's own warm-up (0.75 s): its answer,
    # of a replaced state, must not be served to a describe at 0.45 s
    delays = iter([0.25, 0.6])
    real = apis.describe_response

    def slow(version: int, result: Any) -> bytes:
        if len(result.entries or ()) == 101:  # this test's state (another test's thread may linger)
            time.sleep(next(delays, 0.0))
        return real(version, result)

    monkeypatch.setattr(apis, "describe_response", slow)
    seed = {Entity.user(f"u{i}"): {"consumer_byte_rate": 1024.0} for i in range(100)}
    with Sandbox.start(SandboxConfig(port=0, seed=seed)) as box, _client(box) as cluster:
        cluster.identity()
        started = time.monotonic()
        _set(cluster, "moving", 1.0)
        time.sleep(max(0.0, 0.1 - (time.monotonic() - started)))
        _set(cluster, "moving", 2.0)
        time.sleep(max(0.0, 0.45 - (time.monotonic() - started)))
        assert cluster.describe()[Entity.user("moving")] == {"producer_byte_rate": 2.0}


def test_alters_in_a_row_encode_only_the_last_state(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = apis.describe_response

    def counted(version: int, result: Any) -> bytes:
        if len(result.entries or ()) == 1:  # this test's state (another test's thread may linger)
            calls.append(version)
        return real(version, result)

    monkeypatch.setattr(apis, "describe_response", counted)
    with Sandbox.start(SandboxConfig(port=0)) as box, _client(box) as cluster:
        for i in range(5):  # an apply's batches: each alter right after the last one's answer
            _set(cluster, "moving", float(i + 1))
        time.sleep(0.3)
        assert calls == [1]  # the four replaced states were never encoded
        assert 1 in box._describe_cache
