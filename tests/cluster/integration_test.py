"""KafkaCluster against the brokers that matter: the sandbox (kqplan/sandbox) and the real
Apache Kafka broker (tests/kafka). Same tests, both targets; no fault injection here (that
is in kafka_test.py/transport_test.py, and in the sandbox's own fault tests).

Each test uses entity names unique to it, so the shared real broker can run them in any
order, and removes what it set. Kafka applies quota changes asynchronously (reference §2.8),
so reads after writes poll with a bound.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from kqplan.cluster.connection import config_from_properties
from kqplan.cluster.failures import AuthenticationFailed, TlsVerificationFailed
from kqplan.cluster.kafka import KafkaCluster
from kqplan.core.cluster import ALL, Alteration, DescribeFilter, FilterComponent, MatchType, Op
from kqplan.core.entity import Entity
from kqplan.core.errors import KqplanError
from kqplan.core.state import QuotaState
from tests.cluster.proxy import CountingProxy
from tests.kafka.broker import KafkaSpec
from tests.kafka.plugin import real_kafka_for, real_kafka_params

if TYPE_CHECKING:
    from kqplan.sandbox import SandboxConfig


@dataclass(frozen=True)
class Target:
    name: str
    bootstrap: str
    sasl_bootstrap: str | None = None
    ssl_bootstrap: str | None = None
    ca_file: Path | None = None
    users: Mapping[str, str] = field(default_factory=dict)  # admin, reader, nobody -> password
    kafka: KafkaSpec | None = None  # the real broker's version and mode; None for the sandbox

    def cluster(self, props: str = "", *, bootstrap: str | None = None) -> KafkaCluster:
        config = config_from_properties(props, bootstrap=bootstrap or self.bootstrap,
                                        source="client.properties", env={})
        return KafkaCluster(config)

    def sasl(self, user: str, password: str | None = None) -> KafkaCluster:
        if self.sasl_bootstrap is None:
            pytest.skip(f"{self.name}: no SASL listener")
        jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'username="{user}" password="{password or self.users[user]}";')
        return self.cluster(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                            f"sasl.jaas.config={jaas}\n", bootstrap=self.sasl_bootstrap)


def _password_map(users) -> dict[str, str]:
    if isinstance(users, Mapping):
        return {name: getattr(u, "password", u) for name, u in users.items()}
    return {u.name: u.password for u in users}


def _real_kafka(request, spec: KafkaSpec) -> Target:
    broker = real_kafka_for(request, spec)
    return Target("real_kafka", broker.bootstrap, getattr(broker, "sasl_bootstrap", None),
                  getattr(broker, "ssl_bootstrap", None), getattr(broker, "ca_file", None),
                  _password_map(getattr(broker, "users", {})), broker.spec)


SANDBOX_USERS = {"admin": "admin-secret", "reader": "reader-secret", "nobody": "nobody-secret"}


def sandbox_config(pki) -> SandboxConfig:
    """Listeners and users like the real test broker's: PLAINTEXT, SASL_PLAINTEXT, SSL."""
    from kqplan.sandbox import Listener, Operation, SandboxConfig, SaslUser

    users = {"admin": SaslUser(SANDBOX_USERS["admin"], super_user=True),
             "reader": SaslUser(SANDBOX_USERS["reader"], frozenset({Operation.DESCRIBE_CONFIGS})),
             "nobody": SaslUser(SANDBOX_USERS["nobody"])}
    return SandboxConfig(port=0, users=users, extra_listeners=(
        Listener(sasl=True), Listener(tls_cert=pki.server_cert, tls_key=pki.server_key)))


@pytest.fixture(params=["sandbox", *real_kafka_params()])
def target(request, pki) -> Iterator[Target]:
    if isinstance(request.param, KafkaSpec):
        yield _real_kafka(request, request.param)
        return
    from kqplan.sandbox import Sandbox

    with Sandbox.start(sandbox_config(pki)) as sb:
        yield Target("sandbox", sb.bootstrap, sb.address(1), sb.address(2), pki.ca, SANDBOX_USERS)


def unique(tag: str) -> str:
    return f"kqplan-it-{tag}-{uuid.uuid4().hex[:8]}"


def until(cluster: KafkaCluster, flt: DescribeFilter, predicate, *, timeout: float = 15.0) -> QuotaState:
    """Describe until ``predicate(state)`` holds (Kafka's read-after-write lag)."""
    deadline = time.monotonic() + timeout
    while True:
        state = cluster.describe(flt)
        if predicate(state) or time.monotonic() > deadline:
            return state
        time.sleep(0.1)


def user_filter(name: str) -> DescribeFilter:
    return DescribeFilter((FilterComponent("user", MatchType.EXACT, name),))


@pytest.fixture
def cleanup(target) -> Iterator[list[Alteration]]:
    """Alterations to undo after the test (as the admin, on the plain listener)."""
    undo: list[Alteration] = []
    yield undo
    if undo:
        with target.cluster() as c:
            c.alter(undo, validate_only=False)


def removal(alteration: Alteration) -> Alteration:
    return Alteration(alteration.entity, tuple(Op(op.key, None) for op in alteration.ops))


def test_round_trip(target, cleanup):
    user, client = unique("rt"), unique("client")
    changes = [
        Alteration(Entity.user(user), (Op("producer_byte_rate", 1024.0), Op("consumer_byte_rate", 2048.0))),
        Alteration(Entity.user_client(user, client), (Op("request_percentage", 25.0),)),
        Alteration(Entity.user_client(user, None), (Op("controller_mutation_rate", 0.5),)),
    ]
    cleanup.extend(removal(a) for a in changes)
    flt = user_filter(user)
    with target.cluster() as c:
        checked = c.alter(changes, validate_only=True)
        assert sorted((r.entity.display, r.ok) for r in checked) == sorted(
            (a.entity.display, True) for a in changes)
        assert c.describe(flt) == {}  # validate-only changed nothing
        results = c.alter(changes, validate_only=False)
        assert {r.entity: (r.error_code, r.error_message) for r in results} == {
            a.entity: (0, None) for a in changes}
        expected = {a.entity: {op.key: op.value for op in a.ops} for a in changes}
        assert until(c, flt, lambda s: s == expected) == expected
        everything = c.describe(ALL)
        assert {e: everything[e] for e in expected} == expected
        c.alter([Alteration(Entity.user(user), (Op("consumer_byte_rate", None),))], validate_only=False)
        assert until(c, flt, lambda s: "consumer_byte_rate" not in s.get(Entity.user(user), {}))[
            Entity.user(user)] == {"producer_byte_rate": 1024.0}


def test_per_entity_errors_come_back_on_the_entity_sent(target, cleanup):
    odd = Entity.user_client("<default>", unique("spaced name ü"))  # a literal <default>
    good = Alteration(odd, (Op("producer_byte_rate", 10.0),))
    cleanup.append(removal(good))
    with target.cluster() as c:
        results = c.alter([good, Alteration(Entity.user(unique("bad")), (Op("bogus_key", 1.0),)),
                           Alteration(Entity.ip("10.1.2.3"), (Op("producer_byte_rate", 1.0),))],
                          validate_only=False)
        by_entity = {r.entity: (r.error_code, r.error_message) for r in results}
        assert by_entity[odd] == (0, None)
        assert len(results) == 3
        errors = sorted(v for e, v in by_entity.items() if e != odd)
        assert errors == [(42, "Invalid configuration key bogus_key"),
                          (42, "Invalid configuration key producer_byte_rate")]
        state = until(c, DescribeFilter((FilterComponent("user", MatchType.EXACT, "<default>"),)),
                      lambda s: odd in s)
        assert state[odd] == {"producer_byte_rate": 10.0}


def test_requests_per_describe_do_not_grow_with_entities(target, cleanup):
    prefix = unique("n")
    many = [Alteration(Entity.user(f"{prefix}-{i}"), (Op("producer_byte_rate", float(i + 1)),))
            for i in range(500)]
    cleanup.extend(removal(a) for a in many)
    def mine(state: QuotaState) -> int:
        return sum(1 for e in state if (e.get("user") or "").startswith(prefix))

    with CountingProxy(target.bootstrap).running() as proxy:
        with target.cluster(bootstrap=proxy.bootstrap) as c:
            c.identity()
            assert mine(c.describe()) == 0
        first = dict(proxy.requests)
        with target.cluster() as c:
            c.alter(many, validate_only=False)
            until(c, ALL, lambda s: mine(s) == 500)
        proxy.reset()
        with target.cluster(bootstrap=proxy.bootstrap) as c:
            c.identity()
            assert mine(c.describe()) == 500
        assert dict(proxy.requests) == first
        assert proxy.connections == 1
        assert first == {"ApiVersions": first["ApiVersions"], "Metadata": 1, "DescribeClientQuotas": 1}
        assert first["ApiVersions"] in (1, 2)  # 2 when the broker predates ApiVersions v4


def test_identity(target):
    with target.cluster() as c:
        identity = c.identity()
    assert identity.cluster_id
    assert identity.address == target.bootstrap


def test_sasl_plain_ok(target):
    with target.sasl("admin") as c:
        assert isinstance(c.describe(), dict)


def test_sasl_wrong_password_fails_fast(target, caplog):
    caplog.set_level(logging.DEBUG)
    wrong = "wrong-" + uuid.uuid4().hex
    with target.sasl("admin", wrong) as c:
        started = time.monotonic()
        with pytest.raises(AuthenticationFailed) as err:
            c.describe()
        elapsed = time.monotonic() - started
    assert err.value.message.startswith(f"authentication failed at {target.sasl_bootstrap} as admin (PLAIN)")
    assert elapsed < 3.0, f"took {elapsed:.1f}s: a wrong password must not look like a timeout"
    for text in (str(err.value), repr(err.value), caplog.text):
        assert wrong not in text


def test_sasl_reader_may_describe_but_not_alter(target):
    entity = Entity.user(unique("reader"))
    with target.sasl("reader") as c:
        assert isinstance(c.describe(), dict)
        for validate_only in (True, False):
            results = c.alter([Alteration(entity, (Op("producer_byte_rate", 1.0),))],
                              validate_only=validate_only)
            assert [(r.entity, r.error_code) for r in results] == [(entity, 31)]


def test_sasl_nobody_may_not_describe(target):
    with target.sasl("nobody") as c, pytest.raises(KqplanError) as err:
        c.describe()
    assert err.value.message == ("not authorized to describe client quotas "
                                 "(DESCRIBE_CONFIGS on the cluster)")


def test_tls_with_a_pem_ca(target, pki):
    if target.ssl_bootstrap is None or target.ca_file is None:
        pytest.skip(f"{target.name}: no TLS listener")
    props = f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={target.ca_file}\n"
    with target.cluster(props, bootstrap=target.ssl_bootstrap) as c:
        assert isinstance(c.describe(), dict)
    with target.cluster(f"security.protocol=SSL\nssl.ca.location={pki.other_ca}\n",
                        bootstrap=target.ssl_bootstrap) as c, pytest.raises(TlsVerificationFailed):
        c.describe()
