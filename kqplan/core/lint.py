"""Warnings for ``kqplan validate``: quotas Kafka will never (or hardly ever) apply.

**Shadowing.** An entry sits at one level of Kafka's precedence table (reference §4.1). The
principals it can match are those whose free names (the parts it leaves to the connection)
are anything at all. A more specific level whose entity depends on a free name misses for a
name nobody configured, so the entry is shadowed for a key exactly when a more specific
level that depends only on the entry's own names sets that key. This is checked for a
principal with a non-empty client-id and, at the two levels that also serve an empty
client-id (``{user=U}``, ``{user=<default>}``), for one without: an entry beaten only for
non-empty client-ids still applies to clients that send none, and gets its own warning.

**Names.** Kafka matches ``principal.getName``, which has no ``User:`` prefix (KQP172). Its
default entity is spelled exactly ``<default>``: ``default``, ``<Default>`` or ``"<default >"`` is
a name like any other (KQP173). And an entity name is never a pattern: ``*`` or ``.*`` matches
only a client literally called so (KQP174). All three are legal names, so they are warnings, and
each looks at one name alone: :func:`name_warnings` is meaningful on manifests with errors too.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from kqplan.core.desired import DesiredState
from kqplan.core.diagnostics import Diagnostic, Pending, Severity, locate, sort_key
from kqplan.core.entity import CLIENT_ID, DEFAULT_NAME, IP, USER, Entity, visible
from kqplan.core.resolve import CLIENT_LEVELS, Level, Match, QuotaIndex, level_of
from kqplan.core.state import QuotaState

SHADOWED = "KQP170"
"""A key of an entry that never takes effect."""
EMPTY_CLIENT_ID_ONLY = "KQP171"
"""A key that takes effect only for connections without a client-id."""
USER_PREFIX = "KQP172"
"""A user name written with Kafka's ``User:`` principal-type prefix."""
PRINCIPAL_PREFIX = "User:"
DEFAULT_NEAR_MISS = "KQP173"
"""A name that looks like Kafka's ``<default>`` but is not it (``default``, ``<Default>``)."""
WILDCARD_NAME = "KQP174"
"""A name made only of wildcard characters (``*``, ``.*``): Kafka has no wildcard."""

_WRAPPING = " \t<>[]{}()\"'`"
"""What a near-miss of ``<default>`` may be wrapped in, or padded with."""
_WILDCARDS = frozenset("*.%?+")
_SUSPECT = frozenset((*_WRAPPING, *_WILDCARDS, "d", "D", "U"))
"""The first character of every name :func:`name_mistake` may warn about: the rest are let go
at one lookup (100k names)."""
_EVERY = {USER: "every user", CLIENT_ID: "every client-id", IP: "every address"}


@dataclass(frozen=True, slots=True)
class Shadowing:
    """``key`` of ``entity`` loses to ``by``, the most specific entry that always wins."""

    entity: Entity
    key: str
    by: Entity
    empty_client_id_only: bool
    """True: the key still applies to connections without a client-id (KQP171)."""


def _cover(index: QuotaIndex, entity: Entity, level: Level, key: str,
           *, empty: bool) -> Entity | None:
    """The most specific earlier level, fixed by ``entity``'s own names, that sets ``key``.

    ``empty``: the connection sent no client-id, so only levels that serve one count.
    """
    user = entity.get(USER) or ""
    client_id = entity.get(CLIENT_ID) or ""
    for earlier in CLIENT_LEVELS[:level.rank - 1]:
        if empty and not earlier.empty_client_id:
            continue
        # A NAME part the entry leaves free can be a name nobody configured: no cover.
        if earlier.user is Match.NAME and level.user is not Match.NAME:
            continue
        if earlier.client_id is Match.NAME and level.client_id is not Match.NAME:
            continue
        hit = index.at(earlier, user, client_id)
        if hit is not None and key in hit[1]:
            return hit[0]
    return None


def shadowed_keys(state: QuotaState, only: Collection[Entity] | None = None, *,
                  with_default: Iterable[Entity] | None = None) -> list[Shadowing]:
    """Every (entity, key) of ``state`` (of ``only``, if given) that a more specific entry beats
    for every principal; ``with_default``: the entities of ``state`` with a default part, when
    known (others may be named too)."""
    # Every level that can beat another ({user=U, client-id=<default>}, {user=<default>, ...},
    # {client-id=<default>}) has a default part: {user=U, client-id=C}, {user=U} and
    # {client-id=C} never come before a level fixed by the same names. Indexing only entries
    # with a default is exact, and spares a 100k-name state the full index.
    index = QuotaIndex.of({e: q for e, q in state.items() if e.has_default} if with_default is None else
                          {e: q for e in with_default if (q := state.get(e)) is not None and e.has_default})
    if not index.clients:
        return []
    found = []
    entries = state.items() if only is None else ((e, state[e]) for e in only if e in state)
    for entity, quotas in entries:
        level = level_of(entity)
        if level is None or level.rank == 1:
            continue
        for key in quotas:
            by = _cover(index, entity, level, key, empty=False)
            if by is None:
                continue
            empty_only = level.empty_client_id and \
                _cover(index, entity, level, key, empty=True) is None
            found.append(Shadowing(entity, key, by, empty_only))
    return found


def _shadow_hint(s: Shadowing) -> str:
    if s.empty_client_id_only:
        return (f"{s.entity.display} is one budget shared by all client-ids of the user, "
                f"{s.by.display} a budget per client-id; keep the one you mean")
    if s.by.types == (USER,):
        client = s.entity.display.removeprefix("{")
        return (f"every connection has a user, so {s.by.display} is checked first; to limit "
                f"this client-id for every user, set {s.key} on {{user=<default>, {client} "
                "instead, or remove it here")
    return f"remove {s.key} here: {s.by.display} already sets it for every principal this matches"


def _shadow_message(s: Shadowing) -> str:
    if s.empty_client_id_only:
        return (f"{s.key} of {s.entity.display} applies only to connections without a "
                f"client-id: {s.by.display} sets it for every other client-id")
    return (f"{s.key} of {s.entity.display} never takes effect: {s.by.display} sets it and "
            "wins for every principal this entry matches")


def _shadow_diagnostic(desired: DesiredState, s: Shadowing) -> Diagnostic | None:
    origin = desired.origins.get(s.entity)
    if origin is None:
        return None
    winner = desired.origins.get(s.by)
    related = ((winner.source, winner.loc, f"{s.by.display} is listed"),) if winner else ()
    code = EMPTY_CLIENT_ID_ONLY if s.empty_client_id_only else SHADOWED
    return locate(origin.source, Pending(
        code, _shadow_message(s), (*origin.loc, "quotas", s.key), at_key=True,
        hint=_shadow_hint(s), severity=Severity.WARNING, related=related))


def _near_default(name: str) -> bool:
    """``default``, ``<Default>``, ``"<default >"``, ``<defualt>``: not Kafka's ``<default>``."""
    if name == DEFAULT_NAME:  # written escaped (``\\<default>``): the literal name, on purpose
        return False
    inner = name.strip(_WRAPPING).casefold()
    if inner == "default":
        return True
    return name[:1] == "<" and name[-1:] == ">" and \
        difflib.SequenceMatcher(None, inner, "default").ratio() >= 0.75


def name_mistake(entity_type: str, name: str) -> tuple[str, str, str] | None:
    """The likely mistake in one name, as (code, message, hint), or None."""
    if entity_type == USER and name.startswith(PRINCIPAL_PREFIX):
        return (USER_PREFIX, f"user '{visible(name)}' will never match: Kafka compares the principal "
                f"name without the '{PRINCIPAL_PREFIX}' prefix",
                f"write `user: {visible(name.removeprefix(PRINCIPAL_PREFIX))}`")
    if name[:1] not in _SUSPECT or entity_type not in _EVERY:
        return None
    every = _EVERY[entity_type]
    if _near_default(name):
        return (DEFAULT_NEAR_MISS, f"{entity_type} '{visible(name)}' is a name, not the default "
                f"{entity_type}: Kafka's default entity is spelled exactly {DEFAULT_NAME}",
                f"write `{entity_type}: {DEFAULT_NAME}` for {every} without an entry of its own "
                f"(keep '{visible(name)}' only if one is really named so)")
    stripped = name.strip()
    if stripped and set(stripped) <= _WILDCARDS and set(stripped) - {"."}:
        return (WILDCARD_NAME, f"{entity_type} '{visible(name)}' is a name, not a wildcard: Kafka "
                f"has no wildcards in quota entities, this matches only the {entity_type} named "
                f"'{visible(name)}'",
                f"write `{entity_type}: {DEFAULT_NAME}` for {every} without an entry of its own, "
                f"or list each {entity_type} by name")
    return None


def name_warnings(desired: DesiredState, only: Collection[Entity] | None = None) -> list[Diagnostic]:
    """``User:`` prefixes (KQP172), near-misses of ``<default>`` (KQP173) and wildcard names
    (KQP174), at the name; each judges one name alone, so they hold for manifests with errors
    too (every entry that compiled)."""
    out = []
    for entity in desired.origins if only is None else only:  # the name first: 100k entities
        for entity_type, name in entity:
            if name is None:
                continue
            first = name[:1]
            if first not in _SUSPECT or (first in "dD" and name[:7].casefold() != "default") or \
                    (first == "U" and not name.startswith(PRINCIPAL_PREFIX)):
                continue  # the usual name (``data-…``, ``User-svc``): one look
            found = name_mistake(entity_type, name)
            origin = desired.origins.get(entity) if found is not None else None
            if found is None or origin is None:
                continue
            code, message, hint = found
            out.append(locate(origin.source, Pending(code, message, (*origin.loc, entity_type),
                                                     hint=hint, severity=Severity.WARNING)))
    return sorted(out, key=sort_key)


def lint(desired: DesiredState, only: Collection[Entity] | None = None) -> list[Diagnostic]:
    """Shadowing and name warnings for compiled manifests, located at their entries
    (``only``: for these entries, e.g. the ones a plan changes)."""
    diags = [d for s in shadowed_keys(desired.quotas, only, with_default=desired.with_default)
             if (d := _shadow_diagnostic(desired, s)) is not None]
    diags += name_warnings(desired, only)
    return sorted(diags, key=sort_key)
