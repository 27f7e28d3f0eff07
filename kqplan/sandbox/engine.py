"""The sandbox broker's semantics: DescribeClientQuotas (48) and AlterClientQuotas (49) as a
KRaft cluster answers them, rule for rule and message for message (reference §1.3–§3, §6).

No kafka-python, and no I/O but one: the default ip resolver asks DNS, as the controller does
(inject ``resolve_host`` to avoid it). The wire server decodes a request into the types below,
calls :class:`QuotaEngine` (one call at a time: it is not thread-safe) and encodes what it
returns; describe entries are shared, read-only snapshots. Key and value rules and their texts
come from :mod:`kqplan.core.quotas`; what is specific to the two RPCs (filter errors, duplicate
handling, the record cap, whole-request errors) lives here.

Orders. Kafka answers in Java ``HashMap`` order, which no client may rely on (ref §6.14).
Where that order shows in *text* (the entity in ``Ignoring duplicate entity …``) or decides
*which* error is reported (several bad keys in one entity, several bad entity types), it is
reproduced exactly by :func:`_java_order`. Entity pairs in responses follow it too
(``client-id`` before ``user``). The order of response entries and of describe values is
deterministic here but not Kafka's (that depends on the hashes of every name and on the
map's history).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from kqplan.core.entity import CLIENT_ID, IP, USER, Entity, EntityKind, Name
from kqplan.core.quotas import entity_error, ip_error, key_error, value_error
from kqplan.core.state import QuotaState

WireEntity = tuple[tuple[str, str | None], ...]
"""(entity_type, entity_name) pairs as they travel; a None name is the default entity."""

# Error codes (ref §1.4).
NONE = 0
CLUSTER_AUTHORIZATION_FAILED = 31
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
POLICY_VIOLATION = 44
KAFKA_STORAGE_ERROR = 56

# Kafka's generic ``Errors`` texts, which whole-request alter failures carry (ref §1.4, §6.6).
MSG_CLUSTER_AUTHORIZATION_FAILED = "Cluster authorization failed."
MSG_POLICY_VIOLATION = "Request parameters do not satisfy the configured policy."
MSG_KAFKA_STORAGE_ERROR = "Disk error when trying to access log file on the disk."

MAX_RECORDS_PER_USER_OP = 10_000
"""QuorumController's cap on the records one alter may produce (ref §2.7)."""

DESCRIBE_SUCCESS_MESSAGE = ""
"""A successful describe carries "" (the generated default), not null (ref §3.3)."""

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
_KNOWN_TYPES = frozenset((USER, CLIENT_ID, IP))

# Describe filter errors, word for word (ref §3.1; ClientQuotasImage.describe).
MSG_EMPTY_FILTER_TYPE = "Invalid empty entity type."
MSG_EXACT_NULL = "Request specified MATCH_TYPE_EXACT, but set match string to null."
MSG_DEFAULT_WITH_MATCH = "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
MSG_SPECIFIED_WITH_MATCH = "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
MSG_FILTER_IP_COMBINATION = (
    "Invalid entity filter component combination. IP filter component should not be used with "
    "user or clientId filter component."
)


@dataclass(frozen=True, slots=True)
class WireOp:
    """One op as sent; ``value`` is ignored when ``remove`` (ref §1.3)."""

    key: str
    value: float
    remove: bool


@dataclass(frozen=True, slots=True)
class AlterEntry:
    entity: WireEntity
    ops: tuple[WireOp, ...]


@dataclass(frozen=True, slots=True)
class AlterResult:
    error_code: int
    error_message: str | None
    entity: WireEntity


@dataclass(frozen=True, slots=True)
class Staged:
    """An alter computed but not committed: its answer, and the state after it (``rows``, None
    when the state does not change). The server persists ``state`` first, then commits it."""

    results: list[AlterResult]
    rows: dict[Entity, _Row] | None

    @property
    def changed(self) -> bool:
        return self.rows is not None

    @property
    def state(self) -> QuotaState:
        """The state after the alter, ``{Entity: {key: value}}`` (requires ``changed``)."""
        return {entity: row.values for entity, row in (self.rows or {}).items()}


@dataclass(frozen=True, slots=True)
class DescribeComponent:
    entity_type: str
    match_type: int
    match: str | None


@dataclass(frozen=True, slots=True)
class DescribeResult:
    error_code: int
    error_message: str | None
    entries: list[tuple[WireEntity, list[tuple[str, float]]]] | None


# -- Java HashMap iteration order -------------------------------------------------------------

@lru_cache(maxsize=4096)
def _java_hash(text: str) -> int:
    """``HashMap.hash(key)``: String.hashCode over UTF-16 units, high bits spread down."""
    data = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h ^ (h >> 16)


def _table_size(initial_capacity: int | None, count: int) -> int:
    """Bucket count of a HashMap after ``count`` distinct puts (resizes at 0.75 load)."""
    if initial_capacity is None:  # new HashMap<>(): 16 buckets at the first put
        capacity, threshold = 16, 12
    else:  # new HashMap<>(n): tableSizeFor(n) buckets at the first put
        capacity = 1 << max(0, initial_capacity - 1).bit_length()
        threshold = int(capacity * 0.75)
    for size in range(1, count + 1):
        if size > threshold:
            threshold = threshold * 2 if capacity >= 16 else int(capacity * 2 * 0.75)
            capacity *= 2
    return capacity


@lru_cache(maxsize=4096)
def _java_order(keys: tuple[str, ...], initial_capacity: int | None) -> tuple[int, ...]:
    """Indices of ``keys`` (distinct, in insertion order) in the map's iteration order.

    Resizing splits each bucket keeping its order, so the order is by bucket, then by
    insertion (tree bins need 8 collisions in one bucket: not reachable with these maps).
    """
    mask = _table_size(initial_capacity, len(keys)) - 1
    return tuple(sorted(range(len(keys)), key=lambda i: _java_hash(keys[i]) & mask))


def _java_map_items(pairs: Iterable[tuple[str, Name]], sent: int) -> tuple[tuple[str, Name], ...]:
    """``new HashMap<>(sent)`` filled with ``pairs`` (a repeated key: last value, first place)."""
    collapsed = dict(pairs)
    keys = tuple(collapsed)
    return tuple((keys[i], collapsed[keys[i]]) for i in _java_order(keys, sent))


def _java_map_text(pairs: WireEntity) -> str:
    """``AbstractMap.toString``: ``{k=v, k2=v2}``, null printed as ``null``."""
    return "{" + ", ".join(f"{t}={'null' if n is None else n}" for t, n in pairs) + "}"


def _java_equals(current: float | None, new: float) -> bool:
    """``Objects.equals(Double, Double)``: bitwise-ish, so NaN equals NaN and 0.0 != -0.0."""
    if current is None:
        return False
    if current == new:
        return current != 0.0 or math.copysign(1.0, current) == math.copysign(1.0, new)
    return math.isnan(current) and math.isnan(new)


def _value_rank(item: tuple[str, float]) -> int:
    """Describe lists values in the order of a fresh 16-bucket HashMap (one of Kafka's)."""
    return _java_hash(item[0]) & 15


# -- state --------------------------------------------------------------------------------------

DescribeEntry = tuple[WireEntity, list[tuple[str, float]]]


class _Row(NamedTuple):
    """One stored entity: its type→name map, and its describe entry built once.

    The entry is built at write time and handed out as is, so that a describe of 100,000
    entities allocates one list, not 200,000 objects for the garbage collector to scan.
    """

    names: dict[str, Name]
    entry: DescribeEntry

    @property
    def values(self) -> dict[str, float]:
        return dict(self.entry[1])


def _row(entity: Entity, values: Mapping[str, float]) -> _Row:
    parts = entity.parts
    order = _java_order(tuple([t for t, _ in parts]), len(parts))
    wire = tuple([parts[i] for i in order])
    items = list(values.items())
    if len(items) > 1:
        items.sort(key=_value_rank)
    return _Row(dict(parts), (wire, items))


def _resolvable(name: str) -> bool:
    """``InetAddress.getByName`` as the controller runs it (kqplan.core.ipnames, ref §2.3 D)."""
    return ip_error(name) is None


Change = tuple[str, float | None]  # (key, new value or None to remove): one metadata record


@dataclass(slots=True)
class _Outcome:
    """The running result of one alter request (ClientQuotaControlManager.alterClientQuotas)."""

    results: dict[Entity, tuple[int, str | None]]
    echoes: dict[Entity, WireEntity]  # the first entry's entity map, as Kafka keeps that key
    changes: dict[Entity, list[Change]]
    records: int = 0


class QuotaEngine:
    """The quota store of one KRaft cluster: committed state plus the two RPCs' rules."""

    def __init__(self, state: QuotaState | None = None, *,
                 resolve_host: Callable[[str], bool] | None = None) -> None:
        self._resolve_host = resolve_host or _resolvable
        self._rows: dict[Entity, _Row] = {}
        if state is not None:
            self.load(state)

    # -- state ----------------------------------------------------------------------------------

    @property
    def state(self) -> QuotaState:
        """A copy of the committed state, ``{Entity: {key: value}}``."""
        return {entity: row.values for entity, row in self._rows.items()}

    def load(self, state: QuotaState) -> None:
        """Replace the committed state; entities without values do not exist (ref §2.3)."""
        self._rows = {entity: _row(entity, quotas) for entity, quotas in state.items() if quotas}

    # -- DescribeClientQuotas (ref §3) ----------------------------------------------------------

    def describe(self, components: Sequence[DescribeComponent], strict: bool, *,
                 version: int) -> DescribeResult:
        """Answer a DescribeClientQuotas request (v0 and v1 carry the same fields, ref §1.1)."""
        del version
        parsed = _parse_filter(components)
        if isinstance(parsed, DescribeResult):
            return parsed
        exact, specified = parsed
        return DescribeResult(NONE, DESCRIBE_SUCCESS_MESSAGE, self._matching(exact, specified, strict))

    def describe_denied(self) -> DescribeResult:
        """No DESCRIBE_CONFIGS on the cluster: 31 with a null message (ref §1.5, §6.6)."""
        return DescribeResult(CLUSTER_AUTHORIZATION_FAILED, None, None)

    def _matching(self, exact: dict[str, Name], specified: set[str],
                  strict: bool) -> list[tuple[WireEntity, list[tuple[str, float]]]]:
        """ClientQuotasImage.matches over the whole state (ref §3.2)."""
        rows: Iterable[_Row]
        if not exact and not specified:
            # all() is everything; strict and empty matches only the (never stored) empty entity
            rows = self._rows.values() if not strict else ()
        elif strict and not specified:
            found = self._rows.get(Entity.of(exact.items()))  # exactly one entity can match
            rows = () if found is None else (found,)
        else:
            size = len(exact) + len(specified)
            rows = (r for r in self._rows.values()
                    if (not strict or len(r.names) == size) and _row_matches(r.names, exact, specified))
        return [row.entry for row in rows]  # shared, read-only: the server only encodes them

    # -- AlterClientQuotas (ref §2) -------------------------------------------------------------

    def alter(self, entries: Sequence[AlterEntry], validate_only: bool, *,
              version: int) -> tuple[list[AlterResult], bool]:
        """Answer an AlterClientQuotas request and commit it; the flag tells whether the state
        changed. A server with storage calls :meth:`stage`, persists, then :meth:`commit`."""
        staged = self.stage(entries, validate_only, version=version)
        self.commit(staged)
        return staged.results, staged.changed

    def stage(self, entries: Sequence[AlterEntry], validate_only: bool, *, version: int) -> Staged:
        """The answer to an AlterClientQuotas request and the state it leaves, without changing
        the committed state (validateOnly and a request that changes nothing leave ``rows`` None)."""
        del version  # v0 and v1 carry the same fields (ref §1.1)
        if not entries:  # QuorumController returns an empty map at once (ref §2.1 step 3)
            return Staged([], None)
        outcome = _Outcome({}, {}, {})
        for entry in entries:
            self._alter_entry(entry, outcome)
            if outcome.records > MAX_RECORDS_PER_USER_OP:
                # BoundedList overflow fails the whole request, validateOnly too (ref §2.1 step 6)
                refused = self._whole_request_error(entries, POLICY_VIOLATION, MSG_POLICY_VIOLATION)
                return Staged(refused, None)
        results = [AlterResult(code, message, outcome.echoes[entity])
                   for entity, (code, message) in outcome.results.items()]
        if validate_only:  # result.withoutRecords() (ref §2.1 step 5)
            return Staged(results, None)
        return Staged(results, self._replayed(outcome.changes))

    def commit(self, staged: Staged) -> None:
        """Make a staged alter's state the committed one (after the server persisted it)."""
        if staged.rows is not None:
            self._rows = staged.rows

    def storage_failure(self, entries: Sequence[AlterEntry], staged: Staged) -> list[AlterResult]:
        """The answer to an alter whose records could not be written. A KRaft controller that
        fails the request answers ``AlterClientQuotasRequest.getErrorResponse``: every wire entry
        gets the error's code and its generic text, ``KafkaStorageException`` giving
        KAFKA_STORAGE_ERROR (an ApiException passes ``EventHandlerExceptionInfo`` unchanged)."""
        del staged
        return self._whole_request_error(entries, KAFKA_STORAGE_ERROR, MSG_KAFKA_STORAGE_ERROR)

    def alter_denied(self, entries: Sequence[AlterEntry]) -> list[AlterResult]:
        """No ALTER_CONFIGS on the cluster: 31 on every wire entry (ref §1.5, §2.1 step 2)."""
        return self._whole_request_error(entries, CLUSTER_AUTHORIZATION_FAILED,
                                         MSG_CLUSTER_AUTHORIZATION_FAILED)

    @staticmethod
    def _whole_request_error(entries: Sequence[AlterEntry], code: int, message: str) -> list[AlterResult]:
        """``getErrorResponse``: one entry per wire entry, entity echoed verbatim (ref §2.6)."""
        return [AlterResult(code, message, tuple(entry.entity)) for entry in entries]

    def _alter_entry(self, entry: AlterEntry, outcome: _Outcome) -> None:
        """One request entry: duplicate checks, then validation and records (ref §2.3 A–F)."""
        pairs = _java_map_items(entry.entity, len(entry.entity))  # repeated type: last wins (§2.2)
        entity = Entity.of(pairs)
        outcome.echoes.setdefault(entity, pairs)
        ops: dict[str, float | None] = {}
        duplicate_key = False
        for op in entry.ops:
            if op.key in ops:
                duplicate_key = True  # "Duplicate quota key …" is written, then overwritten (§2.3 A)
            else:
                ops[op.key] = None if op.remove else float(op.value)
        if duplicate_key or entity in outcome.results:
            message = f"Ignoring duplicate entity ClientQuotaEntity(entries={_java_map_text(pairs)})"
            outcome.results[entity] = (INVALID_REQUEST, message)
            return
        error = self._entity_error(pairs)
        changes: list[Change] = []
        if error is None:
            error, changes = self._changes(entity, pairs, ops, len(entry.ops))
        if error is not None:
            outcome.results[entity] = (INVALID_REQUEST, error)
            return
        outcome.results[entity] = (NONE, None)  # success carries a null message (ref §2.6)
        if changes:
            outcome.changes[entity] = changes
            outcome.records += len(changes)

    def _entity_error(self, pairs: WireEntity) -> str | None:
        """validateEntity, the combination check, then the ip lookup (ref §2.3 C–D)."""
        error = entity_error(pairs)  # pairs are already in Kafka's iteration order
        if error is not None:
            return error
        for entity_type, name in pairs:
            if entity_type == IP and name is not None and not self._resolve_host(name):
                return f"{name} is not a valid IP or resolvable host."
        return None

    def _changes(self, entity: Entity, pairs: WireEntity, ops: dict[str, float | None],
                 sent: int) -> tuple[str | None, list[Change]]:
        """The records one valid entity produces, or the first op error (ref §2.3 E, §2.4)."""
        kind = EntityKind.IP if any(t == IP for t, _ in pairs) else EntityKind.CLIENT
        row = self._rows.get(entity)
        current = row.values if row is not None else {}
        keys = tuple(ops)
        changes: list[Change] = []
        for index in _java_order(keys, sent):  # HashMap order decides which error is reported
            key = keys[index]
            value = ops[key]
            if value is None:  # removal: never validated; a missing key is a silent no-op
                if key in current:
                    changes.append((key, None))
                continue
            error = key_error(key, kind) or value_error(key, value)
            if error is not None:
                return error, []
            if not _java_equals(current.get(key), value):
                changes.append((key, value))
        return None, changes

    def _replayed(self, changes: dict[Entity, list[Change]]) -> dict[Entity, _Row] | None:
        """The rows after replaying the records (None when there are none); an entity left
        without values disappears (ref §2.3 replay). The committed rows are not touched."""
        if not changes:
            return None
        rows = dict(self._rows)
        for entity, records in changes.items():
            row = rows.get(entity)
            values = row.values if row is not None else {}
            for key, value in records:
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = value
            if values:
                rows[entity] = _row(entity, values)
            else:
                rows.pop(entity, None)
        return rows


# -- describe filters -------------------------------------------------------------------------

Filter = tuple[dict[str, Name], set[str]]  # EXACT/DEFAULT type→name (DEFAULT: None); SPECIFIED types


def _parse_filter(components: Sequence[DescribeComponent]) -> Filter | DescribeResult:
    """ClientQuotasImage.describe's checks, in request order, then the ip combination (§3.1)."""
    exact: dict[str, Name] = {}
    specified: set[str] = set()
    for component in components:
        error = _component_error(component, exact, specified)
        if error is not None:
            return error
        if component.match_type == MATCH_SPECIFIED:
            specified.add(component.entity_type)
        else:  # EXACT puts the name, DEFAULT puts null
            exact[component.entity_type] = component.match
    types = exact.keys() | specified
    if IP in types and (USER in types or CLIENT_ID in types):
        return DescribeResult(INVALID_REQUEST, MSG_FILTER_IP_COMBINATION, None)
    return exact, specified


def _component_error(component: DescribeComponent, exact: dict[str, Name],
                     specified: set[str]) -> DescribeResult | None:
    """The first check one filter component fails: type, repeat, support, then match (§3.1 a–d)."""
    entity_type, match_type, match = component.entity_type, component.match_type, component.match
    if entity_type == "":
        return DescribeResult(INVALID_REQUEST, MSG_EMPTY_FILTER_TYPE, None)
    if entity_type in exact or entity_type in specified:
        return DescribeResult(INVALID_REQUEST,
                              f"Entity type {entity_type} cannot appear more than once in the filter.", None)
    if entity_type not in _KNOWN_TYPES:  # checked before the type is recorded (§3.1 c)
        return DescribeResult(UNSUPPORTED_VERSION, f"Unsupported entity type {entity_type}", None)
    message: str | None = None
    if match_type == MATCH_EXACT:
        message = MSG_EXACT_NULL if match is None else None
    elif match_type == MATCH_DEFAULT:
        message = MSG_DEFAULT_WITH_MATCH if match is not None else None
    elif match_type == MATCH_SPECIFIED:
        message = MSG_SPECIFIED_WITH_MATCH if match is not None else None
    else:
        message = f"Unknown match type {match_type}"
    return None if message is None else DescribeResult(INVALID_REQUEST, message, None)


def _row_matches(names: dict[str, Name], exact: dict[str, Name], specified: set[str]) -> bool:
    """Every exact type present with that name (null only matches DEFAULT); every specified
    type present with any name, the default included (ref §3.2, §6.8)."""
    for entity_type, name in exact.items():
        if entity_type not in names or names[entity_type] != name:
            return False
    return all(entity_type in names for entity_type in specified)
