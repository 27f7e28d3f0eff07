"""pytest plugin: the live targets (fixture ``live``: the sandbox broker, then each real broker of
the matrix, see :mod:`tests.kafka.plugin`; fixture ``prefix``: user names each test owns and
removes afterwards). :class:`tests.helpers.Live` is what a test gets."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.helpers import Live
from tests.kafka.broker import KafkaSpec
from tests.kafka.plugin import real_kafka_for, real_kafka_params


@pytest.fixture(params=["sandbox", *real_kafka_params()])
def live(request) -> Iterator[Live]:
    if isinstance(request.param, KafkaSpec):
        broker = real_kafka_for(request, request.param)
        yield Live("real_kafka", broker.bootstrap, broker.sasl_bootstrap, dict(broker.users), broker.spec)
        return
    from kqplan.sandbox import Listener, Operation, Sandbox, SandboxConfig, SaslUser

    users = {"admin": "admin-pw", "reader": "reader-pw"}
    config = SandboxConfig(port=0, extra_listeners=(Listener(sasl=True),), users={
        "admin": SaslUser(users["admin"], super_user=True),
        "reader": SaslUser(users["reader"], frozenset({Operation.DESCRIBE_CONFIGS}))})
    with Sandbox.start(config) as sandbox:
        yield Live("sandbox", sandbox.bootstrap, sandbox.address(1), users)


@pytest.fixture
def prefix(live) -> Iterator[str]:
    """A unique user-name prefix; everything under it is removed afterwards."""
    tag = f"kqplan-apply-{uuid.uuid4().hex[:8]}"
    yield tag
    live.remove_all(lambda e: (e.get("user") or "").startswith(tag))
