"""Protected principals (``[policy] protected-principals``): no plan may give one of them a quota it
did not have, or lower one it had (KQP157). Typically an operator or a canary that a change to a
``<default>`` entity would throttle by accident.

The rule is judged on Kafka's own resolution (:mod:`kqplan.core.resolve`, the eight levels and the
empty client-id rule), before and after the plan, key by key. A principal without a client-id
stands for every client-id it may connect with; resolution depends on the client-id only through
the entities that name it, so checking every client-id named beside the user (``{user=U,
client-id=C}``, ``{user=<default>, client-id=C}``, ``{client-id=C}``), one client-id named nowhere,
and the empty client-id covers them all.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from kqplan.core.desired import DesiredState
from kqplan.core.diagnostics import Diagnostic, Pending, Span, locate
from kqplan.core.entity import USER, Entity, EntityKind
from kqplan.core.policy import PROTECTED_PRINCIPAL, Policy, ProtectedPrincipal, rule_name
from kqplan.core.quotas import amount
from kqplan.core.resolve import UNNAMED, ClientIds, QuotaIndex, applies, resolve
from kqplan.core.state import Quotas, QuotaState


@dataclass(frozen=True, slots=True)
class Breach:
    """One key of one protected principal that the plan gives a new or a lower value."""

    principal: ProtectedPrincipal
    client_id: str
    """The client-id it was found for: the principal's own, a named one, ``""`` (none sent), or
    :data:`UNNAMED`."""
    key: str
    before: float | None
    before_source: Entity | None
    after: float | None
    after_source: Entity | None
    cause: Entity
    """The changed entity that makes the difference."""

    @property
    def lowered(self) -> bool:
        return self.before is not None

    def context(self) -> str | None:
        """Which connections of a principal without a client-id it was found for (None: the
        principal names its client-id)."""
        if self.principal.client_id is not None:
            return None
        if self.client_id == UNNAMED:
            return "any client-id no entity names"
        if self.client_id == "":
            return "no client-id"
        return f"client-id {self.client_id}"

    def change_text(self) -> str:
        before = "none" if self.before is None else amount(self.key, self.before)
        after = "none" if self.after is None else amount(self.key, self.after)
        return f"{self.key} {before} -> {after} ({'lowered' if self.lowered else 'a new limit'})"


def _relevant(entity: Entity, users: Collection[str]) -> bool:
    """Whether ``entity`` can apply to some connection of one of ``users``."""
    if entity.kind is not EntityKind.CLIENT:
        return False
    user = entity.get(USER, None) if USER in entity else None
    return USER not in entity or user is None or user in users


def breaches(before: QuotaState, changes: Mapping[Entity, Quotas | None],
             principals: Sequence[ProtectedPrincipal]) -> list[Breach]:
    """Every key of a protected principal that ``changes`` (entity → quotas after, None: deleted)
    give a new or a lower value, judged by resolution of ``before`` and of ``before`` changed."""
    users = {p.user for p in principals}
    if not principals or not any(_relevant(e, users) for e in changes):
        return []
    near = {e: q for e, q in before.items() if _relevant(e, users)}
    after: dict[Entity, Quotas] = dict(near)
    for entity, quotas in changes.items():
        if not _relevant(entity, users):
            continue
        if quotas:
            after[entity] = quotas
        else:
            after.pop(entity, None)
    old, new = QuotaIndex.of(near), QuotaIndex.of(after)
    named = ClientIds.of(old, new)
    changed = [e for e in changes if _relevant(e, users)]
    found: list[Breach] = []
    for principal in principals:
        own = principal.client_id
        for client_id in [own] if own is not None else named.every(principal.user):
            found += _breaches_of(principal, client_id, old, new, changed)
    return found


def _breaches_of(principal: ProtectedPrincipal, client_id: str, old: QuotaIndex, new: QuotaIndex,
                 changed: Sequence[Entity]) -> list[Breach]:
    was = resolve(old, principal.user, client_id, overridden=False)
    now = resolve(new, principal.user, client_id, overridden=False)
    out = []
    for b, a in zip(was.keys, now.keys, strict=True):
        if a.value is None or not (b.value is None or a.value < b.value):
            continue
        out.append(Breach(principal, client_id, a.key, b.value, b.source, a.value, a.source,
                          _cause(principal.user, client_id, a.source, b.source, changed)))
    return out


def _cause(user: str, client_id: str, after: Entity | None, before: Entity | None,
           changed: Sequence[Entity]) -> Entity:
    """The changed entity behind a difference: the new source if it changed, else the old one
    (deleted, or its key removed), else the most specific changed entity that applies."""
    changed_set = set(changed)
    for candidate in (after, before):
        if candidate is not None and candidate in changed_set:
            return candidate
    matches = [e for e in changed if applies(e, user, client_id)]
    return matches[0] if matches else (after or changed[0])


def diagnostics(found: Sequence[Breach], desired: DesiredState | None, policy: Policy) -> list[Diagnostic]:
    """One located error per protected principal and cause: at the cause's manifest entry (the
    policy's file when the cause is no entry, e.g. a deletion under prune), every key with its
    resolved value before and after (and, for a principal without a client-id, the connections
    it holds for when not all of them)."""
    groups: dict[tuple[ProtectedPrincipal, Entity], list[Breach]] = {}
    for breach in found:
        groups.setdefault((breach.principal, breach.cause), []).append(breach)
    out = []
    for (principal, cause), items in groups.items():
        texts: dict[str, list[Breach]] = {}
        for b in items:
            texts.setdefault(b.change_text(), []).append(b)
        # a principal without a client-id: say which connections, unless any client-id is hit
        keys = "; ".join(text if any(b.client_id in (UNNAMED, principal.client_id) for b in hit) else
                         f"{text} with {', '.join(str(b.context()) for b in hit)}"
                         for text, hit in texts.items())
        message = (f"protected principal {principal.display} would get a new or lower quota through "
                   f"{cause.display}: {keys} ({rule_name(policy, 'protected-principals')})")
        own = Entity.user(principal.user) if principal.client_id is None else \
            Entity.user_client(principal.user, principal.client_id)
        hint = (f"give {own.display} an entity of its own that keeps its current values (it wins over "
                f"{cause.display}), or remove the principal from [policy] protected-principals")
        origin = desired.origins.get(cause) if desired is not None else None
        if origin is not None:
            out.append(locate(origin.source, Pending(PROTECTED_PRINCIPAL, message, origin.loc, hint=hint)))
        else:
            where = str(policy.source) if policy.source is not None else "kqplan.toml"
            out.append(Diagnostic(PROTECTED_PRINCIPAL, message, Span(where, 0, 0), hint=hint))
    return out
