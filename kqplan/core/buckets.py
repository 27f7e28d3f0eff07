"""Quota buckets: which connections share one quota (reference §4.1, "Sharing semantics").

Kafka does not enforce a quota per connection. Each key's ``ClientQuotaManager`` records usage in
a sensor named by the *metric tags* ``DefaultQuotaCallback.quotaMetricTags`` returns, and every
connection with the same tags shares that sensor and its quota. The tags follow the level of the
precedence table (:data:`kqplan.core.resolve.CLIENT_LEVELS`) the key's quota comes from, and carry
the connection's own names for the entity types of that level:

- a level with a user and a client-id part (``{user=U, client-id=C}``, ``{user=U,
  client-id=<default>}``, ``{user=<default>, client-id=C}``, ``{user=<default>,
  client-id=<default>}``): one bucket per (U, C), ``{user=U, client-id=C}``;
- a user level (``{user=U}``, ``{user=<default>}``): one bucket for all of U's client-ids, the
  empty one included, ``{user=U}``;
- a client-id level (``{client-id=C}``, ``{client-id=<default>}``): one bucket for all users with
  client-id C, ``{client-id=C}``.

A quota of ``{user=<default>}`` is thus enforced on ``{user=alice}`` for alice and on
``{user=bob}`` for bob, never across users. Example: ``{user=alice}`` producer_byte_rate 10MB, and
three instances of alice (client-ids a1, a2, a3) each producing 5 MB/s at the same time: the three
share the bucket ``{user=alice}``, which carries 15 MB/s, and Kafka throttles all three. A key
with no quota at any level is unlimited and has no bucket.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from kqplan.core.entity import CLIENT_ID, USER, Entity
from kqplan.core.resolve import CLIENT_LEVELS, Level, Match, QuotaIndex, level_of


def bucket(level: Level, user: str, client_id: str) -> Entity:
    """The bucket of the connection (``user``, ``client_id``) for a quota found at ``level``: the
    level's entity types, with the connection's names (Kafka's metric tags)."""
    parts: list[tuple[str, str]] = []
    if level.user is not Match.ABSENT:
        parts.append((USER, user))
    if level.client_id is not Match.ABSENT:
        parts.append((CLIENT_ID, client_id))
    return Entity(tuple(parts))


def bucket_of(source: Entity | None, user: str, client_id: str) -> Entity | None:
    """The bucket in which the quota of ``source`` (the entity resolution names, None: unlimited)
    is enforced for the connection (``user``, ``client_id``)."""
    if source is None:
        return None
    level = level_of(source)
    if level is None:
        raise ValueError(f"{source.display} is not a user/client-id entity: it has no bucket")
    return bucket(level, user, client_id)


# -- a measured bucket's members -------------------------------------------------------------------

OTHERS = "\x00others"
"""The name of a class of connections no usage row or quota entity names (see :func:`classes`):
"every other" user, or client-id. It stands for many connections, each in its own bucket when
their level names them; shown as ``(others)`` (:func:`shown`)."""


def shown(of: Entity) -> str:
    """An entity's display form, with a name that is :data:`OTHERS` shown as ``(others)`` (by the
    name, not its text: a user named ``\\x00others`` is shown as that name)."""
    if OTHERS not in (of.get(USER), of.get(CLIENT_ID)):
        return of.display
    return "{" + ", ".join(f"{t}={OTHERS_SHOWN}" if n == OTHERS else Entity(((t, n),)).display[1:-1]
                           for t, n in of.parts) + "}"


OTHERS_SHOWN = "(others)"
"""How :func:`shown` writes :data:`OTHERS`."""
OTHERS_ESCAPED = Entity.user(OTHERS).display[len("{user="):-1]
""":data:`OTHERS` as a display form spells it."""
OTHERS_WHOLE = "(?<==)" + re.escape(OTHERS_ESCAPED) + "(?=[,}])"
""":data:`OTHERS_ESCAPED` as a whole name of a display form: a regular expression that Python and
Java (Spark's ``regexp_replace``) read alike."""


def classes(of: Entity, users: Iterable[str], client_ids: Iterable[str]) -> list[tuple[str, str]]:
    """The connections a measured bucket ``of`` may hold, as (user, client-id) classes: for a
    ``{user=U}`` bucket, (U, C) for every client-id C of ``client_ids`` and one (U,
    :data:`OTHERS`) for the client-ids not named; for a ``{client-id=C}`` bucket, (U, C) for every
    user of ``users`` and (:data:`OTHERS`, C); a ``{user=U, client-id=C}`` bucket is (U, C).
    Connections of one class resolve alike before and after any plan whose entities name only
    ``users`` and ``client_ids`` (the callers pass every name of the states and of the usage)."""
    user, client_id = of.get(USER), of.get(CLIENT_ID)
    if USER in of and CLIENT_ID in of:
        return [(user or "", client_id or "")]
    if USER in of:
        return [(user or "", c) for c in sorted(set(client_ids))] + [(user or "", OTHERS)]
    return [(u, client_id or "") for u in sorted(set(users))] + [(OTHERS, client_id or "")]


def destinations(of: Entity, members: Sequence[tuple[str, str]],
                 source: Callable[[str, str], Entity | None]) -> frozenset[Entity | None]:
    """The buckets the ``members`` of a measured bucket ``of`` fall in, given ``source(user,
    client_id)``: the entity that supplies a connection's quota of one key (None: unlimited, no
    bucket). One bucket: the measured usage is all of that bucket's; more: the measured bucket is
    *split*, and how its usage divides among them no metric says."""
    return frozenset(bucket_of(source(u, c), u, c) for u, c in members)


def members(of: Entity, candidates: Sequence[tuple[str, str]],
            source: Callable[[str, str], Entity | None]) -> list[tuple[str, str]]:
    """The classes among ``candidates`` whose connections Kafka counted in ``of``, given the
    ``source`` of their quota when it was measured (the state before the plan): those whose bucket
    is ``of``. None is (the state changed since the measurement): every candidate."""
    inside = [(u, c) for u, c in candidates if bucket_of(source(u, c), u, c) == of]
    return inside or list(candidates)


def bucket_levels(of: Entity) -> tuple[Level, ...]:
    """The levels whose quota Kafka enforces in buckets of this one's shape, most specific
    first: ``{user=U, client-id=C}`` levels 1, 2, 4, 5; ``{user=U}`` 3, 6; ``{client-id=C}`` 7, 8."""
    shape = (USER in of, CLIENT_ID in of)
    return tuple(lv for lv in CLIENT_LEVELS
                 if (lv.user is not Match.ABSENT, lv.client_id is not Match.ABSENT) == shape)


def bucket_quota(index: QuotaIndex, of: Entity, key: str) -> tuple[float, Entity] | None:
    """The quota Kafka enforces on bucket ``of`` for ``key`` now, and the entity that sets it
    (``DefaultQuotaCallback.quotaLimit`` given the bucket's tags); None: no quota (unlimited)."""
    user = of.get(USER) or ""
    client_id = of.get(CLIENT_ID) or ""
    for level in bucket_levels(of):
        hit = index.at(level, user, client_id)
        if hit is not None and key in hit[1]:
            return hit[1][key], hit[0]
    return None


# -- where Kafka records a connection that no quota limits -----------------------------------------

def recording_shapes(state: Iterable[tuple[Entity, Iterable[str]]], key: str) -> frozenset[tuple[bool, bool]]:
    """The shapes (a user part, a client-id part) of the entities with a quota of ``key``: what
    Kafka's ``quotaTypesEnabled`` holds for the key's quota manager (``updateQuotaTypes``)."""
    return frozenset((USER in entity, CLIENT_ID in entity) for entity, keys in state
                     if key in keys and (USER in entity or CLIENT_ID in entity))


def sensor_of(index: QuotaIndex, key: str, user: str, client_id: str,
              shapes: frozenset[tuple[bool, bool]]) -> Entity | None:
    """The bucket (metric tags) Kafka records the connection (``user``, ``client_id``) in for
    ``key``, limited or not: ``DefaultQuotaCallback.quotaMetricTags``. With one shape of entity
    (``shapes``: :func:`recording_shapes` of the state) the tags follow it whatever the quotas;
    with several, the first entity of the precedence chain that exists (levels 1-2 and 4-5 give
    ``{user=U, client-id=C}``, 3 and 6 ``{user=U}``), else ``{client-id=C}``. Tags left empty are
    left out (None: both are)."""
    both, only_user, only_client = (USER, user), (USER, user), (CLIENT_ID, client_id)
    if not shapes or shapes == {(False, True)}:
        parts: tuple[tuple[str, str], ...] = (only_client,)
    elif shapes == {(True, False)}:
        parts = (only_user,)
    elif shapes == {(True, True)}:
        parts = (both, only_client)
    else:
        parts = (only_client,)
        for level in CLIENT_LEVELS:
            hit = index.at(level, user, client_id)
            if hit is not None and key in hit[1]:
                parts = tuple(p for p, present in ((only_user, level.user is not Match.ABSENT),
                                                   (only_client, level.client_id is not Match.ABSENT))
                              if present)
                break
    named = tuple((t, n) for t, n in parts if n)
    return Entity(named) if named else None
