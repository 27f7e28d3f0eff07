"""The sandbox's ``zk`` flavour: DescribeClientQuotas and AlterClientQuotas as a ZooKeeper-mode
Kafka 3.9 broker answers them (docs/zk-rules.md), and the API set such a broker advertises.

Read from Apache Kafka's branch ``3.9`` (commit ``c821449fb7c``) and checked against the
kafka_2.13-3.9.1 jar's string constants:

- ``core/src/main/scala/kafka/server/ZkAdminManager.scala``: ``alterClientQuotas``,
  ``parseAndSanitizeQuotaEntity``, ``describeClientQuotas``, ``handleDescribeClientQuotas``,
  ``handleDescribeIpQuotas``;
- ``core/src/main/scala/kafka/zk/AdminZkClient.scala``: ``changeConfigs`` and its validation,
  ``fetchEntityConfig``;
- ``core/src/main/scala/kafka/server/DynamicConfig.scala``: the key sets (``User`` includes the
  SCRAM mechanisms), ``Ip.isValidIpEntity``;
- ``server-common/.../server/config/QuotaConfigs.java``: key types, no validators but the ip's
  ``atLeast(0)``;
- ``clients/.../common/utils/Sanitizer.java``: names become ZooKeeper node names;
- ``clients/.../common/requests/DescribeClientQuotasRequest.java`` ``filter()`` and
  ``ApiError.fromThrowable``: what becomes UNKNOWN_SERVER_ERROR with a null message;
- ``core/src/main/scala/kafka/server/KafkaApis.scala``: ``handleDescribeClientQuotasRequest``
  and ``handleAlterClientQuotasRequest`` (ZkSupport branch).

What differs from the KRaft rules of :mod:`kqplan.sandbox.engine` (reference §2–§3):
alter entries run one after another against ZooKeeper, ops in request order, duplicates
accepted (the last result is the one answered), no ``> 0`` check, LONG/INT values converted
(``1235.0000001`` is stored as 1235, NaN as 0), ip names checked in their sanitized form (so
IPv6 literals are refused), no 10 000-record cap; describe has its own messages, ignores a
match string on DEFAULT/SPECIFIED and fails with UNKNOWN_SERVER_ERROR where Kafka's Java code
throws (a null EXACT match, an unknown match type, an invalid ZooKeeper path).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from kafka.protocol.metadata import ApiVersionsResponse

from kqplan.core.entity import CLIENT_ID, IP, USER, Entity, Name, sanitize
from kqplan.core.quotas import CLIENT_KEYS, IP_KEYS, QUOTA_KEYS, ValueType
from kqplan.core.quotas import zookeeper_whole as stored_whole  # the core's rule, by its sandbox name
from kqplan.core.state import QuotaState
from kqplan.sandbox.engine import (
    DESCRIBE_SUCCESS_MESSAGE,
    INVALID_REQUEST,
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    NONE,
    UNSUPPORTED_VERSION,
    AlterEntry,
    AlterResult,
    DescribeComponent,
    DescribeResult,
    QuotaEngine,
    Staged,
    WireEntity,
    WireOp,
    _java_map_items,
    _Row,
    _value_rank,
)

UNKNOWN_SERVER_ERROR = -1
"""What ``ApiError.fromThrowable`` makes of a non-Kafka exception, always with a null message."""

DEFAULT_NODE = "<default>"
"""``ZooKeeperInternals.DEFAULT_STRING``: the default entity's node name."""

# ZkAdminManager's messages, word for word (the kafka_2.13-3.9.1 jar holds the same strings).
MSG_EMPTY_ENTITY = "Invalid empty client quota entity"
MSG_IP_COMBINATION = (
    "Invalid quota entity combination, IP entity should not be used with user/client ID entity."
)
MSG_EMPTY_FILTER_TYPE = "Unexpected empty filter component entity type"
MSG_FILTER_IP_COMBINATION = (
    "Invalid entity filter component combination, IP filter component should not be used with "
    "user or clientId filter component."
)
_FILTER_LABELS = {USER: "user", CLIENT_ID: "client", IP: "ip"}  # "Duplicate <label> filter component …"

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
"""ScramMechanism.mechanismNames(): STRING keys of DynamicConfig.User, which alterClientQuotas
cannot handle (``IllegalStateException("Unexpected config type STRING")``)."""

STRING = "STRING"
KeyTypes = Mapping[str, str]
_CLIENT_CONFIG: KeyTypes = {k: QUOTA_KEYS[k].type.value for k in CLIENT_KEYS}   # DynamicConfig.Client
_USER_CONFIG: KeyTypes = {**dict.fromkeys(SCRAM_MECHANISMS, STRING), **_CLIENT_CONFIG}  # DynamicConfig.User
_IP_CONFIG: KeyTypes = {k: QUOTA_KEYS[k].type.value for k in IP_KEYS}            # DynamicConfig.Ip


# ApiVersions of a ZooKeeper-mode 3.9 broker: ApiVersionsResponse.brokerApiVersions(RecordVersion.V2,
# ListenerType.ZK_BROKER, enableUnstableLastVersion=false, clientTelemetryEnabled=false), as the
# kafka-clients-3.9.1 jar computes it (DefaultApiVersionManager without a forwarding manager, no
# telemetry receiver). LeaderAndIsr (4), StopReplica (5), UpdateMetadata (6) and ControlledShutdown
# (7) are what tells a client it is a ZooKeeper-mode broker
# (kqplan.cluster.transport.KafkaTransport.broker_kind).
ZK_39_API_VERSIONS: dict[int, tuple[int, int]] = {
    0: (0, 11), 1: (0, 17), 2: (0, 9), 3: (0, 12), 4: (0, 7), 5: (0, 4), 6: (0, 8), 7: (0, 3),
    8: (0, 9), 9: (0, 9), 10: (0, 6), 11: (0, 9), 12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 5),
    16: (0, 5), 17: (0, 1), 18: (0, 4), 19: (0, 7), 20: (0, 6), 21: (0, 2), 22: (0, 5), 23: (0, 4),
    24: (0, 5), 25: (0, 4), 26: (0, 4), 27: (0, 1), 28: (0, 4), 29: (0, 3), 30: (0, 3), 31: (0, 3),
    32: (0, 4), 33: (0, 2), 34: (0, 2), 35: (0, 4), 36: (0, 2), 37: (0, 3), 38: (0, 3), 39: (0, 2),
    40: (0, 2), 41: (0, 3), 42: (0, 2), 43: (0, 2), 44: (0, 1), 45: (0, 0), 46: (0, 0), 47: (0, 0),
    48: (0, 1), 49: (0, 1), 50: (0, 0), 51: (0, 0), 56: (0, 3), 57: (0, 1), 58: (0, 0), 60: (0, 1),
    61: (0, 0), 65: (0, 0), 66: (0, 1), 67: (0, 0), 68: (0, 0), 69: (0, 0),
}
API_VERSIONS_KEY = 18


def api_versions(version: int) -> tuple[int, bytes]:
    """(response version, body) of the ApiVersions answer. v0-v4 are answered in kind; a newer
    request gets the v0 UNSUPPORTED_VERSION body with the key list, as from any broker (ref §1.1).
    No feature tags: a ZooKeeper broker's features are left out (kqplan reads only the API set)."""
    keys = [ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(ZK_39_API_VERSIONS.items())]
    if version > ZK_39_API_VERSIONS[API_VERSIONS_KEY][1]:
        body = ApiVersionsResponse(version=0, error_code=UNSUPPORTED_VERSION, api_keys=keys)
        return 0, bytes(body.encode())
    return version, bytes(ApiVersionsResponse(version=version, error_code=0, api_keys=keys,
                                              throttle_time_ms=0).encode())


# -- names as ZooKeeper holds them ------------------------------------------------------------

def node_name(name: Name) -> str:
    """``ZkAdminManager.sanitizeEntityName``: the default entity is ``<default>``."""
    return DEFAULT_NODE if name is None else sanitize(name)


def _valid_path_element(node: str) -> bool:
    """ZooKeeper's ``PathUtils.validatePath`` for one element of ``/config/<type>/<name>``: a
    sanitized name is ASCII, so only an empty element (``…/users/`` or ``//``) and the relative
    ``.`` and ``..`` are refused (IllegalArgumentException, hence UNKNOWN_SERVER_ERROR)."""
    return node not in ("", ".", "..")


# -- the engine ---------------------------------------------------------------------------------

Error = tuple[int, str | None]


def _zk_row(entity: Entity, values: Mapping[str, float]) -> _Row:
    """A describe entry as KafkaApis' ZooKeeper branch builds it: ``userClientIdToEntity`` is a
    Scala Map of user then client-id, iterated in that order (the entity's canonical order)."""
    items = list(values.items())
    if len(items) > 1:
        items.sort(key=_value_rank)
    return _Row(dict(entity.parts), (entity.parts, items))


class ZkQuotaEngine(QuotaEngine):
    """The quota configs of one ZooKeeper-mode Kafka 3.9 cluster and the two RPCs' rules."""

    def __init__(self, state: QuotaState | None = None, *,
                 resolve_host: Callable[[str], bool] | None = None) -> None:
        super().__init__(None, resolve_host=resolve_host)
        if state is not None:
            self.load(state)

    def load(self, state: QuotaState) -> None:
        self._rows = {entity: _zk_row(entity, quotas) for entity, quotas in state.items() if quotas}

    # -- DescribeClientQuotas -------------------------------------------------------------------

    def describe(self, components: Sequence[DescribeComponent], strict: bool, *,
                 version: int) -> DescribeResult:
        """KafkaApis: ``request.filter()``, then ZkAdminManager.describeClientQuotas."""
        del version
        # DescribeClientQuotasRequest.filter(): ofEntity(type, null) throws NullPointerException,
        # an unknown match type IllegalArgumentException; DEFAULT and SPECIFIED drop the match.
        for component in components:
            if component.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED) or (
                    component.match_type == MATCH_EXACT and component.match is None):
                return DescribeResult(UNKNOWN_SERVER_ERROR, None, None)
        seen: dict[str, DescribeComponent] = {}
        for component in components:
            entity_type = component.entity_type
            if entity_type in _FILTER_LABELS:
                if entity_type in seen:
                    message = f"Duplicate {_FILTER_LABELS[entity_type]} filter component entity type"
                    return DescribeResult(INVALID_REQUEST, message, None)
                seen[entity_type] = component
            elif entity_type == "":
                return DescribeResult(INVALID_REQUEST, MSG_EMPTY_FILTER_TYPE, None)
            else:
                message = f"Custom entity type '{entity_type}' not supported"
                return DescribeResult(UNSUPPORTED_VERSION, message, None)
        if IP in seen and (USER in seen or CLIENT_ID in seen):
            return DescribeResult(INVALID_REQUEST, MSG_FILTER_IP_COMBINATION, None)
        exact: dict[str, Name] = {t: c.match for t, c in seen.items() if c.match_type == MATCH_EXACT}
        exact.update({t: None for t, c in seen.items() if c.match_type == MATCH_DEFAULT})
        specified = {t for t, c in seen.items() if c.match_type == MATCH_SPECIFIED}
        if not all(_valid_path_element(node_name(name)) for name in _fetched(exact, seen, strict)):
            return DescribeResult(UNKNOWN_SERVER_ERROR, None, None)
        # Which znodes are read differs from ClientQuotasImage, what matches does not (ref §3.2).
        return DescribeResult(NONE, DESCRIBE_SUCCESS_MESSAGE, self._matching(exact, specified, strict))

    # -- AlterClientQuotas ----------------------------------------------------------------------

    def stage(self, entries: Sequence[AlterEntry], validate_only: bool, *, version: int) -> Staged:
        """``entries.map { alterEntityQuotas … }.toMap``: each entry on its own, in order, against
        what ZooKeeper holds then (earlier entries' writes included); one answer per distinct
        entity, the last entry's; no record cap. validateOnly skips the writes."""
        del version
        results: dict[Entity, Error] = {}
        echoes: dict[Entity, WireEntity] = {}  # Scala's Map keeps the first equal key
        written: dict[Entity, dict[str, float]] = {}
        for entry in entries:
            pairs = _java_map_items(entry.entity, len(entry.entity))  # repeated type: last wins
            entity = Entity.of(pairs)
            echoes.setdefault(entity, pairs)
            current = written[entity] if entity in written else self._values(entity)
            outcome = self._alter_entity(pairs, entry.ops, current)
            if isinstance(outcome, dict):
                results[entity] = (NONE, None)
                if not validate_only:  # adminZkClient.changeConfigs
                    written[entity] = outcome
            else:
                results[entity] = outcome
        answer = [AlterResult(code, message, echoes[entity]) for entity, (code, message) in results.items()]
        return Staged(answer, self._written(written))

    def storage_failure(self, entries: Sequence[AlterEntry], staged: Staged) -> list[AlterResult]:
        """ZkAdminManager.alterClientQuotas catches what ``changeConfigs`` throws per entity
        (a ``KeeperException`` when ZooKeeper cannot store it): ``ApiError.fromThrowable``, so
        UNKNOWN_SERVER_ERROR with a null message on each entity it would have written; the
        entities refused before any write keep their own error."""
        del entries
        return [AlterResult(UNKNOWN_SERVER_ERROR, None, r.entity) if r.error_code == NONE else r
                for r in staged.results]

    def _values(self, entity: Entity) -> dict[str, float]:
        row = self._rows.get(entity)
        return row.values if row is not None else {}

    def _alter_entity(self, pairs: WireEntity, ops: Sequence[WireOp],
                      current: Mapping[str, float]) -> dict[str, float] | Error:
        """alterEntityQuotas: the entity's new config, or its error."""
        error = _entity_error(pairs)
        if error is not None:
            return INVALID_REQUEST, error
        names = dict(pairs)
        nodes = [node_name(names[t]) for t in (USER, CLIENT_ID, IP) if t in names]
        if IP in names:
            if len(names) > 1:
                return INVALID_REQUEST, MSG_IP_COMBINATION
            # DynamicConfig.Ip.isValidIpEntity on the *sanitized* name: "::1" is "%3A%3A1"
            if names[IP] is not None and not self._resolve_host(nodes[0]):
                return INVALID_REQUEST, f"{nodes[0]} is not a valid IP or resolvable host."
            keys = _IP_CONFIG
        else:  # a user, or a user and client-id, takes DynamicConfig.User's keys
            keys = _USER_CONFIG if USER in names else _CLIENT_CONFIG
        if not all(_valid_path_element(node) for node in nodes):
            return UNKNOWN_SERVER_ERROR, None  # fetchEntityConfig: an invalid ZooKeeper path
        props = dict(current)
        for op in ops:  # in request order: the first bad op is the one reported
            if op.remove:  # never validated
                props.pop(op.key, None)
                continue
            value_type = keys.get(op.key)
            if value_type is None:
                return INVALID_REQUEST, f"Invalid configuration key {op.key}"
            if value_type == STRING:
                return UNKNOWN_SERVER_ERROR, None
            if value_type == ValueType.DOUBLE.value:
                props[op.key] = float(op.value)  # Double.toString, parsed back exactly
                continue
            stored = stored_whole(op.value, value_type)
            if stored is None:
                return INVALID_REQUEST, f"Configuration {op.key} must be a {value_type} value"
            props[op.key] = stored
        # changeConfigs then validates with ConfigDef: user/client keys have no validator, and
        # connection_creation_rate's atLeast(0) cannot fail (no negative passes the conversion).
        return props

    def _written(self, written: Mapping[Entity, dict[str, float]]) -> dict[Entity, _Row] | None:
        """The rows once each written entity's config is replaced, an empty one deleted
        (tryCleanQuotaNodes); None when nothing changes. The committed rows are not touched."""
        rows: dict[Entity, _Row] | None = None
        for entity, values in written.items():
            if _same_config(values, self._values(entity)):
                continue
            if rows is None:
                rows = dict(self._rows)
            if values:
                rows[entity] = _zk_row(entity, values)
            else:
                rows.pop(entity, None)
        return rows


def _same_config(a: Mapping[str, float], b: Mapping[str, float]) -> bool:
    """The same keys and, bit for bit, the same values (NaN equals NaN, 0.0 is not -0.0)."""
    return a.keys() == b.keys() and all(a[k].hex() == b[k].hex() for k in a)


def _entity_error(pairs: WireEntity) -> str | None:
    """parseAndSanitizeQuotaEntity: empty entity; then per pair, in HashMap order, the type
    before the empty name."""
    if not pairs:
        return MSG_EMPTY_ENTITY
    for entity_type, name in pairs:
        if entity_type not in (USER, CLIENT_ID, IP):
            return f"Unhandled client quota entity type: {entity_type}"
        if name is not None and name == "":
            return f"Empty {entity_type} not supported"
    return None


def _fetched(exact: Mapping[str, Name], seen: Mapping[str, DescribeComponent],
             strict: bool) -> list[Name]:
    """The names handleDescribeClientQuotas/handleDescribeIpQuotas read by path (not by
    listing): an exact user without client-id under strict, likewise a client-id, both when
    both are exact, and an exact ip always. Their nodes must be valid ZooKeeper paths."""
    if IP in exact:
        return [exact[IP]]
    user, client = USER in exact, CLIENT_ID in exact
    exclude_user = strict and USER not in seen
    exclude_client = strict and CLIENT_ID not in seen
    names: list[Name] = []
    if user and exclude_client:
        names.append(exact[USER])
    if exclude_user and client:
        names.append(exact[CLIENT_ID])
    if user and client:
        names += [exact[USER], exact[CLIENT_ID]]
    return names
