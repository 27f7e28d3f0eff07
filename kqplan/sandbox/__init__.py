"""The sandbox: a Kafka-wire-compatible client-quota broker for tests and local runs (KRaft and
ZooKeeper flavours, SASL/SCRAM, injected faults). This face names what callers use. Imports
``core``, ``snapshot`` and ``files``; a server, it never imports a client (``cluster``)."""

from kqplan.sandbox.broker import Sandbox
from kqplan.sandbox.config import (
    DEFAULT_CLUSTER_ID,
    Listener,
    Operation,
    RequestRecord,
    SandboxConfig,
    SaslUser,
)
from kqplan.sandbox.faults import Drop, Fault, Faults
from kqplan.sandbox.flavors import Flavor

__all__ = ["DEFAULT_CLUSTER_ID", "Drop", "Fault", "Faults", "Flavor", "Listener", "Operation",
           "RequestRecord", "Sandbox", "SandboxConfig", "SaslUser"]
