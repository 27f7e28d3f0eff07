"""The quota-key registry and Kafka's own validation rules for keys and values.

Every check here reproduces the KRaft controller (``ClientQuotaControlManager``,
reference §2.3–2.4) with its exact message text, so that what passes ``kqplan validate``
offline is what Kafka accepts, and the sandbox broker answers with the same words.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from kqplan.core.entity import CLIENT_ID, IP, USER, EntityKind, Name
from kqplan.core.units import format_bytes, format_number


class ValueType(StrEnum):
    """Kafka's ConfigDef type of a quota key; all travel as float64 on the wire."""

    LONG = "LONG"
    INT = "INT"
    DOUBLE = "DOUBLE"


@dataclass(frozen=True, slots=True)
class QuotaKey:
    name: str
    type: ValueType
    kind: EntityKind
    bytes_per_second: bool
    """Whether byte units (``10MiB``) are accepted and shown."""
    summary: str


QUOTA_KEYS: dict[str, QuotaKey] = {
    k.name: k
    for k in (
        QuotaKey("producer_byte_rate", ValueType.LONG, EntityKind.CLIENT, True,
                 "produce bandwidth, bytes/s"),
        QuotaKey("consumer_byte_rate", ValueType.LONG, EntityKind.CLIENT, True,
                 "fetch bandwidth, bytes/s"),
        QuotaKey("request_percentage", ValueType.DOUBLE, EntityKind.CLIENT, False,
                 "request handler and network thread time, percent of one thread"),
        QuotaKey("controller_mutation_rate", ValueType.DOUBLE, EntityKind.CLIENT, False,
                 "topic/partition create and delete rate, partitions/s"),
        QuotaKey("connection_creation_rate", ValueType.INT, EntityKind.IP, False,
                 "new connections per second from one address"),
    )
}

CLIENT_KEYS: tuple[str, ...] = tuple(k for k, v in QUOTA_KEYS.items() if v.kind is EntityKind.CLIENT)
IP_KEYS: tuple[str, ...] = tuple(k for k, v in QUOTA_KEYS.items() if v.kind is EntityKind.IP)

INT_MAX = 2_147_483_647
LONG_MAX_AS_DOUBLE = float(2**63)  # Java's (double) Long.MAX_VALUE
FRACTION_TOLERANCE = 1e-6  # one-sided: x % 1.0 <= 1e-6 passes (reference §2.4)

# Messages of ClientQuotaControlManager, word for word (including Kafka's "shouldnot").
MSG_EMPTY_ENTITY = "Invalid empty client quota entity"
MSG_IP_COMBINATION = (
    "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"
)


def keys_for(kind: EntityKind) -> tuple[str, ...]:
    """The quota keys Kafka accepts for an entity of this kind."""
    if kind is EntityKind.CLIENT:
        return CLIENT_KEYS
    if kind is EntityKind.IP:
        return IP_KEYS
    return ()


def entity_error(parts: Iterable[tuple[str, Name]]) -> str | None:
    """Kafka's ``validateEntity`` + combination check; ``parts`` in the order Kafka iterates.

    IP resolvability is left to the caller (it needs DNS, which offline validation avoids).
    """
    items = list(parts)
    if not items:
        return MSG_EMPTY_ENTITY
    for entity_type, name in items:
        if entity_type not in (USER, CLIENT_ID, IP):
            return f"Unhandled client quota entity type: {entity_type}"
        if name is not None and name == "":
            return f"Empty {entity_type} not supported"
    types = {t for t, _ in items}
    if IP in types and types & {USER, CLIENT_ID}:
        return MSG_IP_COMBINATION
    return None


def key_error(key: str, kind: EntityKind) -> str | None:
    """Kafka's unknown-key message, or None if ``key`` belongs to entities of ``kind``."""
    if key in keys_for(kind):
        return None
    return f"Invalid configuration key {key}"


def value_error(key: str, value: float) -> str | None:
    """Kafka's ``validateQuotaKeyValue`` message for a known key, or None if Kafka accepts it.

    NaN passes every check, as in Kafka (all comparisons with NaN are false).
    """
    if value <= 0.0:
        return f"Quota {key} must be greater than 0"
    value_type = QUOTA_KEYS[key].type
    if value_type is ValueType.DOUBLE:
        return None
    if value_type is ValueType.INT and value > INT_MAX:
        return f"Proposed value for {key} is too large for an INT."
    if value_type is ValueType.LONG and value > LONG_MAX_AS_DOUBLE:
        return f"Proposed value for {key} is too large for a LONG."
    if not math.isnan(value) and abs(math.fmod(value, 1.0)) > FRACTION_TOLERANCE:
        return f"{key} cannot be a fractional value."
    return None


def ip_error(name: Name) -> str | None:
    """Kafka's message for an ip name the controller cannot resolve (null = default: valid)."""
    from kqplan.core.ipnames import resolvable

    if name is None or resolvable(name):
        return None
    return f"{name} is not a valid IP or resolvable host."


# -- ZooKeeper mode's whole numbers ---------------------------------------------------------------

ZK_EPSILON = 1e-6  # ZkAdminManager.alterClientQuotas: "val epsilon = 1e-6"
_LONG_RANGE = (-(2**63), 2**63 - 1)
_INT_RANGE = (-(2**31), 2**31 - 1)


def _to_integral(value: float, low: int, high: int) -> int:
    """Scala ``Double.toLong``/``toInt`` (Java's cast): NaN is 0, out of range saturates,
    otherwise truncation toward zero."""
    if math.isnan(value):
        return 0
    if value >= high:
        return high
    if value <= low:
        return low
    return int(value)


def zookeeper_whole(value: float, value_type: str) -> float | None:
    """What a ZooKeeper-mode broker (ZkAdminManager) stores for a LONG/INT key, or None when it
    refuses the value: ``(value + epsilon).toLong``, refused when it is more than epsilon away from
    ``value``. So 1235.0000001 and 1234.9999999 become 1235, NaN becomes 0 (every comparison with
    NaN is false), negatives from -1e-6 down and every fraction beyond 1e-6 are refused. The
    sandbox's zk flavour stores by it; apply's verify recognises such a value by it."""
    low, high = _LONG_RANGE if value_type == ValueType.LONG.value else _INT_RANGE
    whole = _to_integral(value + ZK_EPSILON, low, high)
    if abs(float(whole) - value) > ZK_EPSILON:
        return None
    return float(whole)


def amount(key: str, value: float) -> str:
    """``300 MiB`` when a byte rate is an exact binary unit, else ``34952533 (≈33.33 MiB)``, else
    the plain number."""
    spec = QUOTA_KEYS.get(key)
    human = format_bytes(value) if spec is not None and spec.bytes_per_second else None
    if human is None:
        return format_number(value)
    return human if not human.startswith("≈") else f"{format_number(value)} ({human})"
