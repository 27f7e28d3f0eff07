"""Effective-quota resolution: what Kafka enforces for a connection, and which entity says so.

Kafka resolves **each quota key on its own** (reference §4.1, surprise §6.20): every key has
its own ``ClientQuotaManager`` whose ``DefaultQuotaCallback`` walks the eight levels of
:data:`CLIENT_LEVELS` and takes the first entity that sets *that key*. ip addresses walk
:data:`IP_LEVELS` for ``connection_creation_rate`` (§4.2). The levels are data so that the
fleet engine (Spark) can build the same joins; :class:`QuotaIndex` indexes a state once so
that resolving many principals costs a few dict lookups each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from kqplan.core.entity import CLIENT_ID, IP, USER, Entity, EntityKind, Name
from kqplan.core.quotas import keys_for
from kqplan.core.state import Quotas, QuotaState


class Match(StrEnum):
    """How one entity part of a level relates to the connection being resolved."""

    NAME = "name"  # the connection's own name (principal U, client-id C, address A)
    DEFAULT = "default"  # the <default> entity of that type
    ABSENT = "absent"  # the entity has no part of that type


@dataclass(frozen=True, slots=True)
class Level:
    """One row of Kafka's precedence table (reference §4.1), most specific first."""

    rank: int
    user: Match
    client_id: Match
    empty_client_id: bool
    """Whether this level applies when the client sent an empty client-id. Kafka's
    ``quotaLimit`` then looks only at ``{user=U}`` and ``{user=<default>}`` (§4.1 edge case)."""

    def entity(self, user: str, client_id: str) -> Entity:
        """The entity this level looks up for the connection (U, C)."""
        parts: list[tuple[str, Name]] = []
        if self.user is not Match.ABSENT:
            parts.append((USER, user if self.user is Match.NAME else None))
        if self.client_id is not Match.ABSENT:
            parts.append((CLIENT_ID, client_id if self.client_id is Match.NAME else None))
        return Entity(tuple(parts))


_N, _D, _A = Match.NAME, Match.DEFAULT, Match.ABSENT

CLIENT_LEVELS: tuple[Level, ...] = (
    Level(1, _N, _N, False),  # {user=U, client-id=C}
    Level(2, _N, _D, False),  # {user=U, client-id=<default>}
    Level(3, _N, _A, True),  # {user=U}
    Level(4, _D, _N, False),  # {user=<default>, client-id=C}
    Level(5, _D, _D, False),  # {user=<default>, client-id=<default>}
    Level(6, _D, _A, True),  # {user=<default>}
    Level(7, _A, _N, False),  # {client-id=C}
    Level(8, _A, _D, False),  # {client-id=<default>}
)
"""Kafka's user/client-id precedence (``DefaultQuotaCallback.quotaLimit``/``quotaMetricTags``)."""

IP_LEVELS: tuple[Match, ...] = (Match.NAME, Match.DEFAULT)
"""``ConnectionQuotas.connectionRateForIp``: the address's own entity, then the default ip."""


def level_of(entity: Entity) -> Level | None:
    """The level at which a user/client-id entity is looked up; None for other kinds."""
    if entity.kind is not EntityKind.CLIENT:
        return None
    user = _match(entity, USER)
    client_id = _match(entity, CLIENT_ID)
    return next(lv for lv in CLIENT_LEVELS if (lv.user, lv.client_id) == (user, client_id))


def _match(entity: Entity, entity_type: str) -> Match:
    if entity_type not in entity:
        return Match.ABSENT
    return Match.DEFAULT if entity.name(entity_type) is None else Match.NAME


def resolve_key_set(kind: EntityKind) -> tuple[str, ...]:
    """The quota keys resolution reports for an entity kind (client: four keys; ip: one)."""
    return keys_for(kind)


@dataclass(frozen=True, slots=True)
class Overridden:
    """A less specific entry that also sets the key but loses (KIP-546's ``*`` lines)."""

    source: Entity
    value: float


@dataclass(frozen=True, slots=True)
class ResolvedKey:
    """One key's effective value: ``value``/``source`` are None when nothing applies (unlimited)."""

    key: str
    value: float | None
    source: Entity | None
    overridden: tuple[Overridden, ...] = ()

    @property
    def unlimited(self) -> bool:
        return self.source is None


@dataclass(frozen=True, slots=True)
class Resolution:
    """The effective quotas of one connection: ``{user=U, client-id=C}`` or ``{ip=A}``."""

    parts: tuple[tuple[str, str], ...]
    """The connection's names: ``(("user", U), ("client-id", C))`` or ``(("ip", A),)``."""
    keys: tuple[ResolvedKey, ...]
    """One per key of :func:`resolve_key_set`, in registry order."""

    @property
    def entity(self) -> Entity:
        """Built on demand: resolving many principals should not pay for entities unused."""
        return Entity(self.parts)

    def __getitem__(self, key: str) -> ResolvedKey:
        for resolved in self.keys:
            if resolved.key == key:
                return resolved
        raise KeyError(key)


_ABSENT = object()  # an index slot for "the entity has no part of this type"
_Slot = tuple[object, object]


def _part_slot(match: Match) -> object:
    return None if match is Match.DEFAULT else _ABSENT


def _level_slot(level: Level, user: str, client_id: str) -> _Slot:
    return (user if level.user is Match.NAME else _part_slot(level.user),
            client_id if level.client_id is Match.NAME else _part_slot(level.client_id))


def _templates(levels: Iterable[Level]) -> tuple[tuple[bool, object, bool, object], ...]:
    """Per level: (user is the name?, else its slot, client is the name?, else its slot)."""
    return tuple((lv.user is Match.NAME, _part_slot(lv.user),
                  lv.client_id is Match.NAME, _part_slot(lv.client_id)) for lv in levels)


_CLIENT_SLOTS = _templates(CLIENT_LEVELS)
_EMPTY_CLIENT_SLOTS = _templates(lv for lv in CLIENT_LEVELS if lv.empty_client_id)


@dataclass(frozen=True, slots=True)
class QuotaIndex:
    """A state indexed for resolution: build once with :meth:`of`, resolve many times."""

    clients: Mapping[_Slot, tuple[Entity, Quotas]]
    ips: Mapping[Name, tuple[Entity, Quotas]]

    @classmethod
    def of(cls, state: QuotaState) -> QuotaIndex:
        clients: dict[_Slot, tuple[Entity, Quotas]] = {}
        ips: dict[Name, tuple[Entity, Quotas]] = {}
        for entity, quotas in state.items():
            # a user/client-id entity's slot: (user, client-id), _ABSENT for a missing part; an
            # ip entity by its name; read from the parts (canonical: user first), not Entity.kind:
            # 10 clusters of 10k entities, both sides of a plan, are indexed for every fleet impact
            if len(entity) == 2:
                (first, user), (second, client_id) = entity
                if first == USER and second == CLIENT_ID:
                    clients[user, client_id] = (entity, quotas)
            elif len(entity) == 1:
                [(entity_type, name)] = entity
                if entity_type == USER:
                    clients[name, _ABSENT] = (entity, quotas)
                elif entity_type == CLIENT_ID:
                    clients[_ABSENT, name] = (entity, quotas)
                elif entity_type == IP:
                    ips[name] = (entity, quotas)
        return cls(clients, ips)

    def at(self, level: Level, user: str, client_id: str) -> tuple[Entity, Quotas] | None:
        """The entity ``level`` looks up for (U, C), with its quotas, if configured."""
        return self.clients.get(_level_slot(level, user, client_id))

    def client_matches(self, user: str, client_id: str) -> list[tuple[Entity, Quotas]]:
        """The configured entities that apply to (U, C), most specific first."""
        get = self.clients.get
        found = []
        for user_named, user_slot, client_named, client_slot in (
                _EMPTY_CLIENT_SLOTS if client_id == "" else _CLIENT_SLOTS):
            hit = get((user if user_named else user_slot, client_id if client_named else client_slot))
            if hit is not None:
                found.append(hit)
        return found

    def moved(self, after: QuotaIndex) -> Callable[[str, str], bool]:
        """Whether a connection (user, client_id) may resolve differently on ``after`` than on
        this index: whether a slot its levels look up (:meth:`client_matches`) holds another entry
        there. False proves ``effective(after, U, C) == effective(self, U, C)``: a plan changes a
        few entries, and most principals need resolving once for both of its sides."""
        changed = {slot for slot in self.clients.keys() | after.clients.keys()
                   if self.clients.get(slot) != after.clients.get(slot)}
        if not changed:
            return lambda user, client_id: False

        def touched(user: str, client_id: str) -> bool:
            return any((user if user_named else user_slot, client_id if client_named else client_slot)
                       in changed for user_named, user_slot, client_named, client_slot in (
                           _EMPTY_CLIENT_SLOTS if client_id == "" else _CLIENT_SLOTS))
        return touched

    def ip_matches(self, address: str) -> list[tuple[Entity, Quotas]]:
        """The configured ip entities that apply to ``address``, most specific first."""
        # Names are compared as strings, as Describe does; the broker also merges names that
        # resolve to one InetAddress (§4.2), which needs DNS and is left out here.
        return [hit for name in (address, None) if (hit := self.ips.get(name)) is not None]


def _resolve_keys(matches: Sequence[tuple[Entity, Quotas]], keys: Iterable[str],
                  *, overridden: bool) -> tuple[ResolvedKey, ...]:
    out = []
    for key in keys:
        source: Entity | None = None
        value: float | None = None
        losers: list[Overridden] = []
        for entity, quotas in matches:
            if key not in quotas:
                continue
            if source is None:
                source, value = entity, quotas[key]
            elif overridden:
                losers.append(Overridden(entity, quotas[key]))
            else:
                break
        out.append(ResolvedKey(key, value, source, tuple(losers)))
    return tuple(out)


def _index(state: QuotaState | QuotaIndex) -> QuotaIndex:
    return state if isinstance(state, QuotaIndex) else QuotaIndex.of(state)


def resolve(state: QuotaState | QuotaIndex, user: str, client_id: str, *,
            overridden: bool = True) -> Resolution:
    """Effective user/client-id quotas of principal ``user`` connecting as ``client_id``.

    ``client_id`` may be ``""`` (the client sent none). Pass a :class:`QuotaIndex` when
    resolving many principals against one state.
    """
    if not user:
        raise ValueError("a principal name is never empty (Kafka's is ANONYMOUS without auth)")
    index = _index(state)
    keys = _resolve_keys(index.client_matches(user, client_id),
                         resolve_key_set(EntityKind.CLIENT), overridden=overridden)
    return Resolution(((USER, user), (CLIENT_ID, client_id)), keys)


def resolve_ip(state: QuotaState | QuotaIndex, address: str, *,
               overridden: bool = True) -> Resolution:
    """Effective ``connection_creation_rate`` of connections from ``address``."""
    index = _index(state)
    keys = _resolve_keys(index.ip_matches(address), resolve_key_set(EntityKind.IP),
                         overridden=overridden)
    return Resolution(((IP, address),), keys)


def resolve_entity(state: QuotaState | QuotaIndex, entity: Entity, *,
                   overridden: bool = True) -> Resolution:
    """Resolve a connection given as ``{user=U, client-id=C}`` or ``{ip=A}`` (named parts only)."""
    if entity.types == (USER, CLIENT_ID):
        user, client_id = entity.name(USER), entity.name(CLIENT_ID)
        if user is not None and client_id is not None:
            return resolve(state, user, client_id, overridden=overridden)
    elif entity.types == (IP,):
        address = entity.name(IP)
        if address is not None:
            return resolve_ip(state, address, overridden=overridden)
    raise ValueError(f"cannot resolve {entity.display}: give user and client-id, or ip, by name")


Effective = tuple[tuple[float | None, Entity | None], ...]
"""Per key of :func:`resolve_key_set` (registry order): (value, source); cheap to compare."""


def effective(index: QuotaIndex, user: str, client_id: str) -> Effective:
    """The winning (value, source) per client key, without overridden entries or objects."""
    matches = index.client_matches(user, client_id)
    out: list[tuple[float | None, Entity | None]] = []
    for key in resolve_key_set(EntityKind.CLIENT):
        for entity, quotas in matches:
            value = quotas.get(key)
            if value is not None:
                out.append((value, entity))
                break
        else:
            out.append((None, None))
    return tuple(out)


UNNAMED = "\x00any other client-id"
"""The client-id standing for every client-id no entity names (no real one holds a NUL)."""


@dataclass(frozen=True, slots=True)
class ClientIds:
    """The client-ids that stand for every connection of a user, whatever client-id it sends
    (:meth:`every`), for the users of one or more indexed states: the client-ids each user's
    entities name, and those named for every user (beside ``<default>``, or alone), found in one
    pass over each index. Resolution depends on the client-id only through the entities that name
    it, so a principal without a client-id (a protected principal, a quota test) is judged for
    each of these and holds for every client-id."""

    shared: frozenset[str]
    by_user: Mapping[str, frozenset[str]]

    @classmethod
    def of(cls, *indexes: QuotaIndex) -> ClientIds:
        shared: set[str] = set()
        by_user: dict[str, set[str]] = {}
        for user, client in (slot for index in indexes for slot in index.clients):
            if client.__class__ is not str:  # <default> or no client-id part
                continue
            if user.__class__ is str:
                by_user.setdefault(user, set()).add(client)
            else:
                shared.add(client)
        return cls(frozenset(shared), {u: frozenset(c) for u, c in by_user.items()})

    def every(self, user: str) -> list[str]:
        """None sent (``""``), one no entity names (:data:`UNNAMED`), and each named beside ``user``."""
        return ["", UNNAMED, *sorted(self.shared | self.by_user.get(user, frozenset()))]


def applies(entity: Entity, user: str, client_id: str) -> bool:
    """Whether a user/client-id entity is one of the levels Kafka looks up for (U, C)."""
    u = entity.get(USER) if USER in entity else ""
    c = entity.get(CLIENT_ID) if CLIENT_ID in entity else ""
    return (USER not in entity or u in (None, user)) and (CLIENT_ID not in entity or c in (None, client_id))
