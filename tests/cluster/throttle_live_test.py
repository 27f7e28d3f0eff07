"""A principal the broker throttles (kqplan's own, under a request_percentage quota — which a
quota tool's user may well set on itself) keeps working: the client waits out throttle_time_ms
as Kafka's clients do, instead of failing the next request as a lost connection."""

from __future__ import annotations

import time

from kqplan.cluster.connection import config_from_properties
from kqplan.cluster.kafka import KafkaCluster
from kqplan.core.cluster import Alteration, Op
from kqplan.core.entity import Entity
from tests.kafka.plugin import RealKafka


def test_a_throttled_principal_waits_out_the_throttle(real_kafka: RealKafka):
    assert real_kafka.sasl_bootstrap is not None
    admin = KafkaCluster(config_from_properties("", bootstrap=real_kafka.bootstrap, source="(test)", env={}))
    jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="reader" password="{real_kafka.users["reader"]}";')
    reader = KafkaCluster(config_from_properties(
        f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config={jaas}\n",
        bootstrap=real_kafka.sasl_bootstrap, source="(test)", env={}))
    quota = Alteration(Entity.user("reader"), (Op("request_percentage", 0.01),))
    with admin:
        [result] = admin.alter([quota], validate_only=False)
        assert result.error_code == 0
        try:
            with reader:
                deadline = time.monotonic() + 20
                throttled = 0
                while time.monotonic() < deadline and throttled < 2:
                    before = time.monotonic()
                    state = reader.describe()  # failed with "Node paused: {'throttle'}" before
                    throttled += time.monotonic() - before > 0.2  # the wait shows as a slow call
                assert throttled, "the broker never throttled reader: the test proves nothing"
                assert Entity.user("reader") in state
        finally:
            admin.alter([Alteration(quota.entity, (Op("request_percentage", None),))], validate_only=False)
