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
    faults: Sequence[Fault] = ()
    lag_ms: int = 0
    resolve_host: Callable[[str], bool] | None = None
    flavor: Flavor = Flavor.KRAFT
    """Answer as a KRaft 4.3 broker (default) or as a ZooKeeper-mode 3.9 one (docs/zk-rules.md)."""

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
