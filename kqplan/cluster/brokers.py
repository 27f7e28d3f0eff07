"""Each broker's quota settings: DescribeConfigs (API 32) of its ``BROKER`` resource, asked of that
very broker (Kafka answers a broker's own configs only there: ``ConfigHelper`` refuses another
broker's id), for the names of :data:`kqplan.core.sensors.SETTINGS` only.

One broker: the command's own connection. Several: one connection per broker (to the address it
advertises, with the command's security settings), at most :data:`PARALLEL` at a time. A broker
that cannot be asked is reported, not fatal: kqplan then assumes Kafka's defaults for it and says so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from kqplan.cluster.connection import ConnectionConfig
from kqplan.cluster.failures import UnsupportedApi
from kqplan.cluster.transport import KafkaTransport
from kqplan.core.cluster import error_name
from kqplan.core.errors import KqplanError
from kqplan.core.sensors import SETTINGS, BrokerRead, BrokerSettings, ClusterSettings

BROKER_RESOURCE = 4  # ConfigResource.Type.BROKER
CLUSTER_AUTHORIZATION_FAILED = 31
PARALLEL = 8


@dataclass(frozen=True, slots=True)
class Broker:
    """A live broker, as the Metadata answer lists it."""

    node: int
    host: str
    port: int

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def read_settings(brokers: Sequence[Broker], config: ConnectionConfig,
                  own: KafkaTransport) -> ClusterSettings:
    """Every broker's settings; ``own`` is the command's connection (used when there is one broker)."""
    if len(brokers) == 1:
        return ClusterSettings((_read(brokers[0], lambda: own, close=False),))

    def one(broker: Broker) -> BrokerRead:
        return _read(broker, lambda: KafkaTransport(replace(config, bootstrap=broker.address)), close=True)

    with ThreadPoolExecutor(max_workers=min(PARALLEL, len(brokers) or 1),
                            thread_name_prefix="kqplan-broker-settings") as pool:
        return ClusterSettings(tuple(pool.map(one, sorted(brokers, key=lambda b: b.node))))


def _read(broker: Broker, transport: Callable[[], KafkaTransport], *, close: bool) -> BrokerRead:
    # the submodule alone: kafka.protocol.admin's package builds every admin API (start-up time)
    from kafka.protocol.admin.configs import DescribeConfigsRequest

    conn = transport()
    try:
        request = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=BROKER_RESOURCE, resource_name=str(broker.node),
            configuration_keys=list(SETTINGS))], include_synonyms=False)
        response = conn.send(request)
    except UnsupportedApi:
        return BrokerRead(broker.node, broker.address, None, "it does not serve DescribeConfigs")
    except KqplanError as exc:
        return BrokerRead(broker.node, broker.address, None, exc.message)
    finally:
        if close:
            conn.close()
    return _answer(broker, response)


def _answer(broker: Broker, response: Any) -> BrokerRead:
    results = getattr(response, "results", None) or []
    if len(results) != 1:
        return BrokerRead(broker.node, broker.address, None,
                          f"it answered DescribeConfigs with {len(results)} results for one resource")
    result = results[0]
    code = int(getattr(result, "error_code", 0) or 0)
    if code == CLUSTER_AUTHORIZATION_FAILED:
        return BrokerRead(broker.node, broker.address, None,
                          "not authorized to describe its configs (DESCRIBE_CONFIGS on the cluster)")
    if code:
        said = getattr(result, "error_message", None)
        return BrokerRead(broker.node, broker.address, None,
                          f"DescribeConfigs failed: {error_name(code)}" + (f": {said}" if said else ""))
    configs = {str(c.name): (None if c.value is None else str(c.value))
               for c in getattr(result, "configs", None) or []}
    return BrokerRead(broker.node, broker.address, BrokerSettings.of(configs))
