"""What each Kafka release and metadata mode accepts for client quotas, as one table of rules.

Offline, manifests are judged by the strict KRaft rules (``kqplan.core.quotas``), unless the inventory
declares a cluster's ``mode``/``version``; online, by what the broker's ApiVersions answer shows
(``ClusterIdentity.version``/``mode``). A rule here refuses what the target would refuse, or —
worse — store differently than asked, before anything is sent.

| rule | applies to | why |
|---|---|---|
| no ``ip`` entities, no ``controller_mutation_rate`` | Kafka < 2.7 | KIP-612 / KIP-599 came in 2.7 |
| no fraction on LONG/INT keys | ZooKeeper mode | it truncates ``1235.0000001`` to 1235 |
| no IPv6 ``ip`` entities | ZooKeeper mode | ``%3A%3A1 is not a valid IP or resolvable host.`` |
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from kqplan.core.desired import DesiredState
from kqplan.core.diagnostics import Diagnostic, Pending, locate
from kqplan.core.entity import IP, Entity
from kqplan.core.quotas import QUOTA_KEYS, ValueType

KRAFT = "kraft"
ZOOKEEPER = "zookeeper"
FIRST_WITH_IP_QUOTAS = (2, 7)


@dataclass(frozen=True, slots=True)
class ClusterProfile:
    """A target's release (lower bound) and metadata mode; None where unknown."""

    version: tuple[int, int] | None = None
    mode: str | None = None
    at_least: bool = False
    """The version is only a lower bound (detected from the advertised APIs: ``>=2.6``), so no
    rule about older releases may fire on it."""

    @classmethod
    def of(cls, version: str | None, mode: str | None) -> ClusterProfile:
        found = re.search(r"(\d+)\.(\d+)", version or "")
        return cls((int(found[1]), int(found[2])) if found else None, mode,
                   (version or "").startswith(">="))

    @property
    def known(self) -> bool:
        return self.version is not None or self.mode is not None

    def describe(self) -> str:
        parts = [f"Kafka {self.version[0]}.{self.version[1]}" if self.version else None,
                 f"{self.mode} mode" if self.mode else None]
        return ", ".join(p for p in parts if p)


@dataclass(frozen=True, slots=True)
class Problem:
    entity: Entity
    key: str | None
    message: str


def _old(profile: ClusterProfile) -> bool:
    return (profile.version is not None and not profile.at_least
            and profile.version < FIRST_WITH_IP_QUOTAS)


def entity_problem(entity: Entity, profile: ClusterProfile) -> str | None:
    """Why this target refuses the entity, or None."""
    if IP not in entity:
        return None
    if _old(profile):
        return (f"{profile.describe()} has no ip entities (they came with Kafka 2.7, KIP-612): "
                "the broker answers 'Unhandled client quota entity type: ip'")
    name = entity.name(IP)
    if profile.mode == ZOOKEEPER and name is not None and _ipv6(name):
        return ("ZooKeeper-mode brokers refuse IPv6 ip entities ('… is not a valid IP or resolvable "
                "host.'); KRaft clusters (Kafka 3.3+) accept them")
    return None


def _ipv6(name: str) -> bool:
    try:
        return isinstance(ipaddress.ip_address(name.split("%", maxsplit=1)[0]), ipaddress.IPv6Address)
    except ValueError:
        return False


def value_problem(key: str, value: float, profile: ClusterProfile) -> str | None:
    """Why this target refuses (or would silently rewrite) the value, or None."""
    if key == "controller_mutation_rate" and _old(profile):
        return (f"{profile.describe()} has no controller_mutation_rate (it came with Kafka 2.7, "
                "KIP-599)")
    spec = QUOTA_KEYS.get(key)
    if (profile.mode == ZOOKEEPER and spec is not None and spec.type is not ValueType.DOUBLE
            and math.isfinite(value) and value != math.floor(value)):
        return (f"a ZooKeeper-mode broker stores {value!r} as {math.floor(value):.0f} ({key} is "
                f"{spec.type.value}): the plan would never converge; write the whole number")
    return None


def problems(state: Mapping[Entity, Mapping[str, float]], profile: ClusterProfile) -> list[Problem]:
    """Everything in a desired state this target refuses or would store differently."""
    if not profile.known or not (_old(profile) or profile.mode == ZOOKEEPER):
        return []  # no rule applies: spare a 100k-entity state the loop
    found: list[Problem] = []
    for entity, quotas in state.items():
        why = entity_problem(entity, profile)
        if why is not None:
            found.append(Problem(entity, None, why))
            continue
        found.extend(Problem(entity, key, why) for key, value in quotas.items()
                     if (why := value_problem(key, value, profile)) is not None)
    return found


def diagnostics(desired: DesiredState, profile: ClusterProfile) -> list[Diagnostic]:
    """:func:`problems` as located errors at the manifest entries (KQP145)."""
    out: list[Diagnostic] = []
    found = problems(desired.quotas, profile)
    # budgets' keys too (their entities are in ``quotas``, judged above)
    found += [p for p in problems(desired.budgets, profile) if p.key is not None]
    for problem in found:
        origin = desired.origins.get(problem.entity)
        if origin is None:
            continue
        loc = (*origin.loc, "quotas", problem.key) if problem.key else origin.loc
        out.append(locate(origin.source, Pending(
            UNSUPPORTED, f"{problem.entity.display}: {problem.message}", loc,
            hint=f"the target is {profile.describe()}; declare or check mode/version in kqplan.toml")))
    return out


UNSUPPORTED = "KQP145"
"""Something the target's Kafka version or metadata mode refuses or would store differently."""
