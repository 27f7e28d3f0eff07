"""Which Kafka the sandbox answers as: ``kraft`` (a KRaft 4.3 broker, the default) or ``zk``
(a ZooKeeper-mode 3.9 broker). A flavour picks the quota engine and the ApiVersions answer;
everything else (framing, SASL, TLS, faults, snapshots) is shared."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

from kqplan.core.state import QuotaState
from kqplan.sandbox import apis, zk
from kqplan.sandbox.engine import QuotaEngine


class Flavor(StrEnum):
    KRAFT = "kraft"
    ZK = "zk"

    @property
    def mode(self) -> str:
        """The metadata mode kqplan reports for such a cluster (kqplan.core.versions)."""
        return "zookeeper" if self is Flavor.ZK else "kraft"

    @property
    def release(self) -> str:
        """The Kafka release this flavour answers as (recorded in ``--state`` snapshots)."""
        return "3.9" if self is Flavor.ZK else "4.3"


def new_engine(flavor: Flavor, state: QuotaState | None, *,
               resolve_host: Callable[[str], bool] | None = None) -> QuotaEngine:
    """The quota engine of a cluster of this flavour, holding ``state``."""
    engine_class = zk.ZkQuotaEngine if flavor is Flavor.ZK else QuotaEngine
    return engine_class(state, resolve_host=resolve_host)


def api_versions(flavor: Flavor, version: int) -> tuple[int, bytes]:
    """(response version, body) of the ApiVersions answer to a request of ``version``."""
    if flavor is Flavor.ZK:
        return zk.api_versions(version)
    return (0 if version > apis.SUPPORTED[apis.API_VERSIONS][1] else version), apis.api_versions(version)
