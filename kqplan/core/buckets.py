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

from kqplan.core.entity import CLIENT_ID, USER, Entity
from kqplan.core.resolve import Level, Match, level_of


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
