"""KafkaCluster against tests/cluster/fakebroker.py: retries, lost alters, error mapping.
Kafka's own semantics are checked against the sandbox and the real broker in
integration_test.py."""

from __future__ import annotations

import pytest

from kqplan.cluster.connection import config_from_properties
from kqplan.cluster.failures import ResponseLost
from kqplan.cluster.kafka import KafkaCluster
from kqplan.core.cluster import Alteration, AlterOutcomeUnknown, ClusterIdentity, Op
from kqplan.core.entity import Entity
from kqplan.core.errors import KqplanError
from tests.cluster.fakebroker import PRE_2_6_APIS, FakeBroker

ALICE = Entity.user("alice")
SET_ALICE = Alteration(ALICE, (Op("producer_byte_rate", 1024.0),))


def cluster(broker: FakeBroker, props: str = "") -> KafkaCluster:
    config = config_from_properties(props, bootstrap=broker.bootstrap, source="client.properties", env={})
    return KafkaCluster(config, retry_backoff_s=0.01)


def test_round_trip_and_identity():
    with FakeBroker().running() as b, cluster(b) as c:
        results = c.alter([SET_ALICE, Alteration(Entity.user_client(None, "etl"),
                                                 (Op("request_percentage", 50.0),))],
                          validate_only=False)
        assert [r.ok for r in results] == [True, True]
        assert c.describe() == {ALICE: {"producer_byte_rate": 1024.0},
                                Entity.user_client(None, "etl"): {"request_percentage": 50.0}}
        ident = c.identity()
        # version and mode come from the ApiVersions answer: no extra request (the log below)
        assert ident == ClusterIdentity("fake-cluster-id", b.bootstrap, ident.version, "kraft")
        assert ident.version is not None
        assert ident.version.startswith(">=")
        assert c.identity() is c.identity()  # asked once
        c.alter([Alteration(ALICE, (Op("producer_byte_rate", None),))], validate_only=False)
        assert ALICE not in c.describe()
    assert [k for k, _ in b.log if k not in (18,)] == [49, 48, 3, 49, 48]


def test_no_alterations_sends_nothing():
    with FakeBroker().running() as b, cluster(b) as c:
        assert c.alter([], validate_only=False) == []
    assert b.log == []


def test_unsupported_cluster_message():
    with FakeBroker(apis=dict(PRE_2_6_APIS)).running() as b, cluster(b) as c:
        for call in (c.describe, lambda: c.alter([SET_ALICE], validate_only=True)):
            with pytest.raises(KqplanError) as err:
                call()
            assert err.value.message == ("this cluster does not support client quota APIs "
                                         "(Kafka ≥ 2.6 required)")
        assert c.identity().cluster_id == "fake-cluster-id"


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_lost_alter_is_never_retried(when):
    with FakeBroker(drop={49: when}).running() as b, cluster(b) as c:
        with pytest.raises(AlterOutcomeUnknown) as err:
            c.alter([SET_ALICE], validate_only=False)
        assert "may or may not have been applied" in err.value.message
        assert b.log.count((49, 1)) == 1
        b.drop.clear()
        assert (ALICE in c.describe()) == (when == "after")


def test_a_lost_validate_only_alter_is_retried():
    with FakeBroker(drop={49: "after"}, drop_times=1).running() as b, cluster(b) as c:
        assert [r.ok for r in c.alter([SET_ALICE], validate_only=True)] == [True]
        assert b.log.count((49, 1)) == 2
        assert c.describe() == {}


def test_describe_retries_a_bounded_number_of_times():
    with FakeBroker(drop={48: "before"}, drop_times=2).running() as b, cluster(b) as c:
        assert c.describe() == {}
        assert c.transport.connections == 3
    with FakeBroker(drop={48: "before"}).running() as b, cluster(b) as c:
        with pytest.raises(ResponseLost):
            c.describe()
        assert b.log.count((48, 1)) == 3


def test_describe_not_authorized():
    with (FakeBroker(describe_error=(31, None)).running() as b, cluster(b) as c,
          pytest.raises(KqplanError) as err):
        c.describe()
    assert err.value.message == ("not authorized to describe client quotas "
                                 "(DESCRIBE_CONFIGS on the cluster)")
    assert err.value.hint is not None
    assert "--operation DescribeConfigs --cluster" in err.value.hint
    assert b.log.count((48, 1)) == 1  # an answer, not a transient failure: no retry


def test_describe_error_with_kafkas_message():
    with (FakeBroker(describe_error=(42, "Unknown match type 3")).running() as b, cluster(b) as c,
          pytest.raises(KqplanError) as err):
        c.describe()
    assert err.value.message == "describe client quotas failed: INVALID_REQUEST: Unknown match type 3"


def test_describe_request_timed_out_code_is_retried():
    with FakeBroker(describe_error=(7, None)).running() as b, cluster(b) as c:
        with pytest.raises(KqplanError, match="REQUEST_TIMED_OUT"):
            c.describe()
        assert b.log.count((48, 1)) == 3


def test_the_same_entity_twice_is_refused_before_sending():
    with (FakeBroker().running() as b, cluster(b) as c,
          pytest.raises(KqplanError, match="twice in one alter")):
        c.alter([SET_ALICE, SET_ALICE], validate_only=True)
    assert b.log == []


def test_names_are_sent_exactly_and_defaults_as_null():
    odd = Entity.user_client("<default>", " spaced\tname ")
    with FakeBroker().running() as b, cluster(b) as c:
        c.alter([Alteration(odd, (Op("producer_byte_rate", 1.0),)),
                 Alteration(Entity.user(None), (Op("consumer_byte_rate", 2.0),))], validate_only=False)
        assert b.state == {
            (("client-id", " spaced\tname "), ("user", "<default>")): {"producer_byte_rate": 1.0},
            (("user", None),): {"consumer_byte_rate": 2.0}}
        assert c.describe() == {odd: {"producer_byte_rate": 1.0},
                                Entity.user(None): {"consumer_byte_rate": 2.0}}


def test_connect_from_environment(tmp_path):
    props = tmp_path / "c.properties"
    props.write_text("client.id=kqplan-ci\n")
    with FakeBroker().running() as b, KafkaCluster.connect(
            None, None, env={"KQPLAN_BOOTSTRAP_SERVER": b.bootstrap,
                             "KQPLAN_COMMAND_CONFIG": str(props)}) as c:
        assert c.config.client_id == "kqplan-ci"
        assert c.describe() == {}


# v1 AlterClientQuotasResponse bodies: ThrottleTimeMs, one entry (ErrorCode 0, no message, one
# entity part user=<name>), the tag sections
def _answer_for(user: str) -> bytes:
    name = user.encode()
    return (b"\0\0\0\0" + b"\x02" + b"\0\0" + b"\0" + b"\x02" + b"\x05user" + bytes([len(name) + 1]) + name
            + b"\0" + b"\0" + b"\0")


def test_the_hand_read_answer_is_the_one_the_broker_sent():
    with FakeBroker(alter_body=_answer_for("alice")).running() as b, cluster(b) as c:
        assert [(r.entity, r.ok) for r in c.alter([SET_ALICE], validate_only=False)] == [(ALICE, True)]


@pytest.mark.parametrize("validate_only", [True, False])
def test_an_unreadable_alter_answer_is_an_error_that_says_the_outcome_is_unknown(validate_only):
    with (FakeBroker(alter_body=_answer_for("alice")[:-4]).running() as b, cluster(b) as c,
          pytest.raises(KqplanError) as err):
        c.alter([SET_ALICE], validate_only=validate_only)
    assert "cannot be read" in err.value.message
    assert "its outcome is unknown" in err.value.message
    assert err.value.hint == "run `kqplan plan` to see the state"


def test_an_answer_for_an_entity_not_sent_is_refused():
    with (FakeBroker(alter_body=_answer_for("mallory")).running() as b, cluster(b) as c,
          pytest.raises(KqplanError) as err):
        c.alter([SET_ALICE], validate_only=False)
    assert err.value.message == "the broker answered for {user=mallory}, which was not sent"
