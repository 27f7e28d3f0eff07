"""The ``Cluster`` protocol: the only door to Kafka (wire, snapshot file or sandbox)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Protocol

from kqplan.core.entity import Entity, Name
from kqplan.core.errors import KqplanError
from kqplan.core.sensors import ClusterSettings
from kqplan.core.state import QuotaState

# Kafka's names for the error codes quota RPCs can carry (reference §1.4).
ERROR_NAMES = {
    0: "NONE", -1: "UNKNOWN_SERVER_ERROR", 7: "REQUEST_TIMED_OUT", 18: "RECORD_LIST_TOO_LARGE",
    31: "CLUSTER_AUTHORIZATION_FAILED", 35: "UNSUPPORTED_VERSION", 41: "NOT_CONTROLLER",
    42: "INVALID_REQUEST", 44: "POLICY_VIOLATION", 56: "KAFKA_STORAGE_ERROR",
}


def error_name(code: int) -> str:
    return ERROR_NAMES.get(code, f"ERROR_{code}")


class AlterOutcomeUnknown(KqplanError):
    """An alter was sent but its answer was lost (timeout, dropped connection): it may or may
    not have been applied. Backends raise it; apply resolves it by describing."""

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out
        """The broker did not answer in time: it may still apply the alter after we look."""


class AlterNotSent(KqplanError):
    """An alter could not be sent at all (no connection, TLS or authentication refused before
    the request was written): nothing of it reached the broker, so nothing of it was applied."""


class MatchType(IntEnum):
    """DescribeClientQuotas component match types (wire values)."""

    EXACT = 0
    DEFAULT = 1
    SPECIFIED = 2


@dataclass(frozen=True, slots=True)
class FilterComponent:
    entity_type: str
    match_type: MatchType
    match: Name = None


@dataclass(frozen=True, slots=True)
class DescribeFilter:
    """A DescribeClientQuotas filter; the default (no components, not strict) means all."""

    components: tuple[FilterComponent, ...] = ()
    strict: bool = False


ALL = DescribeFilter()


@dataclass(frozen=True, slots=True)
class Op:
    """One AlterClientQuotas op: set ``key`` to ``value``, or remove it when value is None."""

    key: str
    value: float | None

    @property
    def remove(self) -> bool:
        return self.value is None


@dataclass(frozen=True, slots=True)
class Alteration:
    entity: Entity
    ops: tuple[Op, ...]


@dataclass(frozen=True, slots=True)
class EntityResult:
    """A broker's answer for one entity of an AlterClientQuotas request."""

    entity: Entity
    error_code: int = 0
    error_message: str | None = None

    @property
    def ok(self) -> bool:
        return self.error_code == 0


@dataclass(frozen=True, slots=True)
class ClusterIdentity:
    cluster_id: str | None
    address: str
    """Where it was reached: ``host:port``, ``snapshot:PATH`` or ``sandbox:host:port``."""
    version: str | None = None
    """The Kafka release range the broker's ApiVersions answer proves, e.g. ``>=3.9``."""
    mode: str | None = None
    """``kraft`` or ``zookeeper``: ZooKeeper-mode brokers advertise the inter-broker APIs
    (LeaderAndIsr) on their client listeners, KRaft brokers do not."""
    brokers: int | None = field(default=None, compare=False)
    """How many brokers the cluster's Metadata answer lists (live brokers); None when the target
    cannot tell (a snapshot). Cluster-wide budgets are divided by it. Not part of which cluster
    this is (equality): a cluster stays itself when a broker is added."""


class Cluster(Protocol):
    """Describe and alter client quotas. Implementations raise KqplanError on failure."""

    def identity(self) -> ClusterIdentity: ...

    def describe(self, flt: DescribeFilter = ALL) -> QuotaState: ...

    def alter(self, alterations: Sequence[Alteration], *, validate_only: bool) -> list[EntityResult]: ...

    def broker_settings(self) -> ClusterSettings:
        """Each broker's quota settings (callback class, sensor windows); no broker for a target
        without brokers (a snapshot)."""
        ...

    def close(self) -> None: ...
