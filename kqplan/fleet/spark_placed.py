"""What the Spark engine's impact (:mod:`kqplan.fleet.spark_impact`) has this process resolve,
by the core, as the reference resolves it (:func:`kqplan.fleet.impact.placements`): where every
observed principal falls, and the measured buckets' units. Plain rows, shipped to Spark as frames
(:func:`kqplan.fleet.spark.frame_of`); no Spark here.

Why here, not as Spark joins: a principal's quota is the first of eight precedence levels that
sets it. On Spark that was every principal-key crossed with the eight levels and joined to the
quota entries, per side — with ~60,000 principals and 10 clusters of 10k entries, 16 s of the
engine's time and most of the 14 s Catalyst spent planning the query (benchmarks/README.md, issue
42). The core resolves a principal in ~20 µs, each once when the plan does not move an entry its
levels look up (:meth:`kqplan.core.resolve.QuotaIndex.moved`); this process holds every impact row
afterwards anyway, so its memory grows by nothing of another order. The rule is then one
definition, the core's, proven against Kafka's own code; Spark still computes every usage, window
and bucket sum, which the differential tests hold to the reference.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kqplan.core.buckets import bucket_quota, classes, destinations, members
from kqplan.core.entity import CLIENT_ID, USER, Entity
from kqplan.core.resolve import Effective, QuotaIndex, effective
from kqplan.core.state import QuotaState
from kqplan.fleet.impact import placements
from kqplan.fleet.usage import USAGE_KEYS, Unit
from kqplan.fleet.usage_schema import USER_BUCKET

SIDES = ("before", "after")
PRINCIPALS = ", ".join(["cluster string, user string, client_id string",
                        *(f"{side}_{i}_value double, {side}_{i}_source string, {side}_{i}_tags int"
                          for side in SIDES for i in range(len(USAGE_KEYS)))])
"""A principal's row: per side and key (``i``: its place in ``USAGE_KEYS``) its quota, the entry
that sets it (display form) and its bucket's tags (1: the user, 2: the client-id, 3: both; null:
no quota, no bucket)."""


def principal_rows(states: Mapping[str, tuple[QuotaState, QuotaState]],
                   principals: Sequence[tuple[str, str, str]]) -> list[tuple[Any, ...]]:
    """The :data:`PRINCIPALS` rows of ``principals`` (cluster, user, client_id)."""
    units = [(cluster, user, client_id, "") for cluster, user, client_id in principals]
    sides = placements(states, units)
    shown: dict[Entity, str] = {}
    tags: dict[Entity, int] = {}
    rows: list[tuple[Any, ...]] = []
    for unit in units:
        row: list[Any] = [unit[0], unit[1], unit[2]]
        for side in sides:
            for key in USAGE_KEYS:
                (group,), value, origin = side[unit][key]
                if group is None or origin is None:
                    row += (None, None, None)
                    continue
                if origin not in shown:
                    shown[origin] = origin.display
                if group not in tags:
                    tags[group] = (USER in group) | (CLIENT_ID in group) << 1
                row += (value, shown[origin], tags[group])
        rows.append(tuple(row))
    return rows


PLACED = ("cluster string, user string, client_id string, bucket string, key string, side string, "
           "value double, source string, bu string, bc string, split boolean, unlimited boolean")
"""Where a unit falls, per key and side: its bucket (tags null: unlimited), with its quota and the
entry that sets it; or split (``unlimited``: some of its members in no bucket)."""
MEMBER = ("cluster string, user string, client_id string, bucket string, key string, side string, "
           "bu string, bc string, whole boolean, value double, source string")
"""A unit in a bucket, wholly or (split) in part, with the bucket's quota and its entry."""


def _tags(group: Entity | None) -> tuple[str | None, str | None]:
    if group is None:
        return None, None
    return (group.get(USER) if USER in group else None, group.get(CLIENT_ID) if CLIENT_ID in group else None)


def _resolver(indexes: tuple[QuotaIndex, QuotaIndex]) -> tuple[
        Callable[[int, str, str], Effective], Callable[[int, int], Callable[[str, str], Entity | None]]]:
    """``resolved(side, user, client_id)``, the core's resolution on one side (cached), and
    ``source(side, i)``: the entity that supplies key ``i`` of a connection on that side."""
    cache: dict[tuple[int, str, str], Effective] = {}

    def resolved(side: int, user: str, client_id: str) -> Effective:
        hit = cache.get((side, user, client_id))
        if hit is None:
            hit = cache[side, user, client_id] = effective(indexes[side], user, client_id)
        return hit

    def source(side: int, i: int) -> Callable[[str, str], Entity | None]:
        return lambda user, client_id: resolved(side, user, client_id)[i][1]

    return resolved, source


def measured_rows(states: Mapping[str, tuple[QuotaState, QuotaState]], units: Sequence[Unit],
                  usage_names: Mapping[str, tuple[set[str], set[str]]]
                  ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The :data:`PLACED` and :data:`MEMBER` rows of the measured buckets' ``units``, as
    :func:`kqplan.fleet.impact.impact_rows` resolves them: their classes of every name of the
    cluster's states and of ``usage_names`` (the users, the client-ids of its usage that the
    reference's names hold), those Kafka counted in them before the plan, where those fall."""
    placed: list[tuple[Any, ...]] = []
    found: list[tuple[Any, ...]] = []
    for cluster in sorted({u[0] for u in units}):
        before, after = states[cluster]
        users, client_ids = (set(n) for n in usage_names.get(cluster, (set(), set())))
        for entity in (*before, *after):
            if (user := entity.get(USER)) is not None:
                users.add(user)
            if (client_id := entity.get(CLIENT_ID)) is not None:
                client_ids.add(client_id)
        indexes = (QuotaIndex.of(before), QuotaIndex.of(after))
        resolved, source = _resolver(indexes)
        for unit in (u for u in units if u[0] == cluster):
            measured = Entity.user(unit[1]) if unit[3] == USER_BUCKET else Entity.client(unit[2])
            candidates = classes(measured, users, client_ids)
            for i, key in enumerate(USAGE_KEYS):
                inside = members(measured, candidates, source(0, i))
                for side, label in enumerate(SIDES):
                    where = destinations(measured, inside, source(side, i))
                    if len(where) == 1:
                        (group,) = where
                        value, origin = resolved(side, *inside[0])[i]
                        shown_origin = origin.display if origin is not None else None
                        placed.append((*unit, key, label, value, shown_origin, *_tags(group), False, False))
                        if group is not None:
                            found.append((*unit, key, label, *_tags(group), True, value, shown_origin))
                        continue
                    placed.append((*unit, key, label, None, None, None, None, True, None in where))
                    for group in sorted((g for g in where if g is not None), key=Entity.sort_key):
                        quota = bucket_quota(indexes[side], group, key)
                        assert quota is not None  # a member of it resolves to a quota of its shape
                        found.append((*unit, key, label, *_tags(group), False, quota[0], quota[1].display))
    return placed, found
