"""What a sandbox is told and what it tells back: its configuration (listeners, SASL users and the
operations they may do, seed, faults, flavour) and the record of each request it served."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from kqplan.core.state import QuotaState
from kqplan.sandbox.faults import Fault
from kqplan.sandbox.flavors import Flavor

DEFAULT_CLUSTER_ID = "kqplan-sandbox-cluster"
SASL_SERVER_MAX_RECEIVE_SIZE = 524288  # Kafka's sasl.server.max.receive.size default (512 KiB)
REQUEST_HISTORY = 10_000  # requests kept in memory (``Sandbox.requests``)


class Operation(StrEnum):
    """The cluster ACL operations the quota RPCs (ref §1.5) and the SCRAM RPCs (scram.py) check."""

    DESCRIBE_CONFIGS = "DESCRIBE_CONFIGS"
    ALTER_CONFIGS = "ALTER_CONFIGS"
    DESCRIBE = "DESCRIBE"
    ALTER = "ALTER"


@dataclass(frozen=True, slots=True)
class SaslUser:
    """A PLAIN user and what it may do; a super user may do everything. A SCRAM user of the same
    name (AlterUserScramCredentials, ``SandboxConfig.scram_users``) gets the same rights: Kafka's
    ACLs name the principal ``User:NAME``, whatever the mechanism."""

    password: str
    operations: frozenset[Operation] = frozenset()
    super_user: bool = False

    def may(self, operation: Operation) -> bool:
        # Kafka: ALTER_CONFIGS implies DESCRIBE_CONFIGS, ALTER implies DESCRIBE (AclEntry.supportedOperations)
        return self.super_user or operation in self.operations or (
            operation is Operation.DESCRIBE_CONFIGS and Operation.ALTER_CONFIGS in self.operations) or (
            operation is Operation.DESCRIBE and Operation.ALTER in self.operations)


@dataclass(frozen=True, slots=True)
class Listener:
    """One listening socket. SASL listeners demand authentication (``SandboxConfig.sasl_mechanisms``);
    TLS needs cert and key."""

    port: int = 0
    sasl: bool = False
    tls_cert: Path | None = None
    tls_key: Path | None = None

    @property
    def protocol(self) -> str:
        """Its ``security.protocol``, as a client would configure it."""
        return ("SASL_" if self.sasl else "") + ("SSL" if self.tls_cert else "PLAINTEXT")


@dataclass(frozen=True)
class SandboxConfig:
    host: str = "127.0.0.1"
    port: int = 0
    """The first listener's port (0: pick one); more listeners in ``extra_listeners``."""
    sasl: bool = False
    tls_cert: Path | None = None
    tls_key: Path | None = None
    extra_listeners: tuple[Listener, ...] = ()
    cluster_id: str = DEFAULT_CLUSTER_ID
    seed: QuotaState | None = None
    state_file: Path | None = None
    """Load from it at start (unless ``seed``) and write every committed alter to it."""
    users: Mapping[str, SaslUser] = field(default_factory=dict)
    sasl_mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    """``sasl.enabled.mechanisms`` of the SASL listeners, in the order SaslHandshake lists them."""
    scram_users: Mapping[str, str] = field(default_factory=dict)
    """SCRAM users present from the start (name -> password, both mechanisms, 4096 iterations);
    AlterUserScramCredentials adds more. Kept in memory only, never in ``state_file``."""
    request_log: Path | None = None
    """Append every request served to this file, one JSON line each (written and flushed at once:
    nothing of it is held in memory)."""
    request_history: int = REQUEST_HISTORY
    """How many of the most recent requests ``Sandbox.requests`` keeps in memory (older ones are
    dropped: a long-running sandbox does not grow with its traffic); ``request_log`` has them all."""
    sasl_server_max_receive_size: int = SASL_SERVER_MAX_RECEIVE_SIZE
    """Kafka's ``sasl.server.max.receive.size``: the largest frame a SASL listener reads before the
    client has authenticated (ApiVersions, SaslHandshake, SaslAuthenticate, v0's bare tokens). A
    larger size prefix closes the connection before any of its body is read, as Kafka does
    (InvalidReceiveException). Once authenticated, and on PLAINTEXT/SSL listeners, the bound is
    ``socket.request.max.bytes`` (100 MiB)."""
    faults: Sequence[Fault] = ()
    lag_ms: int = 0
    resolve_host: Callable[[str], bool] | None = None
    flavor: Flavor = Flavor.KRAFT
    """Answer as a KRaft 4.3 broker (default) or as a ZooKeeper-mode 3.9 one (docs/zk-rules.md)."""
    brokers: int = 1
    """How many brokers Metadata and DescribeCluster list (nodes 1..N, all this process): a
    cluster of N brokers for cluster-wide budgets, without N processes."""
    broker_configs: Mapping[str, str] = field(default_factory=dict)
    """Broker settings DescribeConfigs reports as set (``client.quota.callback.class``,
    ``metrics.sample.window.ms``, ...), over Kafka's defaults of the quota settings."""

    def described_configs(self) -> dict[str, str | None]:
        """What DescribeConfigs answers for each node: Kafka's defaults of the settings that
        decide what quotas do (an unset callback: null), then :attr:`broker_configs`."""
        from kqplan.core.sensors import CALLBACK, DEFAULTS

        return {CALLBACK: None, **{k: str(v) for k, v in DEFAULTS.items()}, **self.broker_configs}

    def __post_init__(self) -> None:
        if self.brokers < 1:
            raise ValueError(f"brokers must be 1 or more, not {self.brokers}")
        if self.request_history < 0:
            raise ValueError(f"request_history must be 0 or more, not {self.request_history}")
        if self.sasl_server_max_receive_size < 0:
            raise ValueError("sasl_server_max_receive_size must be 0 or more, "
                             f"not {self.sasl_server_max_receive_size}")

    @property
    def listeners(self) -> tuple[Listener, ...]:
        return (Listener(self.port, self.sasl, self.tls_cert, self.tls_key), *self.extra_listeners)


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One request served, as ``--request-log`` writes it."""

    api_key: int
    api_name: str
    api_version: int
    client_id: str | None
    connection: int
    entries: int | None = None
    error_codes: tuple[int, ...] = ()
    validate_only: bool | None = None

    def to_json(self) -> dict[str, Any]:
        return {"api_key": self.api_key, "api_name": self.api_name, "api_version": self.api_version,
                "client_id": self.client_id, "connection": self.connection, "entries": self.entries,
                "error_codes": sorted(set(self.error_codes)), "validate_only": self.validate_only}
