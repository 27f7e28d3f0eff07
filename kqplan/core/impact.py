"""The blast radius of a plan: whose effective quota changes, key by key (DESIGN §4).

With a principals list, :func:`blast_radius` resolves each principal before and after the
plan and keeps those whose winning value or source changes. Without one,
:func:`default_warnings` names every changed ``<default>`` entity, since it reaches every
principal that has no more specific entry.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kqplan.core.entity import Entity, EntityKind
from kqplan.core.plan import Plan, same_value
from kqplan.core.principals import Principal
from kqplan.core.resolve import Effective, QuotaIndex, effective, resolve_key_set
from kqplan.core.state import QuotaState
from kqplan.core.units import format_number


@dataclass(frozen=True, slots=True)
class Side:
    """One side of a key's change: the winning value and entity, or None/None (unlimited)."""

    value: float | None
    source: Entity | None

    def show(self) -> str:
        if self.value is None or self.source is None:
            return "unlimited"
        return f"{format_number(self.value)} {self.source.display}"


@dataclass(frozen=True, slots=True)
class KeyImpact:
    key: str
    before: Side
    after: Side

    @property
    def marker(self) -> str:
        """``-`` loses its limit, ``+`` gains one, ``~`` value or source changes."""
        if self.after.value is None:
            return "-"
        return "+" if self.before.value is None else "~"


@dataclass(frozen=True, slots=True)
class PrincipalImpact:
    principal: Principal
    keys: tuple[KeyImpact, ...]
    """Only the keys whose value or source changes, in registry order."""

    @property
    def entity(self) -> Entity:
        return Entity.user_client(self.principal.user, self.principal.client_id)

    @property
    def loses_limit(self) -> bool:
        return any(k.marker == "-" for k in self.keys)

    @property
    def gains_limit(self) -> bool:
        return any(k.marker == "+" for k in self.keys)


@dataclass(frozen=True, slots=True)
class ImpactSummary:
    checked: int
    changed: int
    lose_limit: int
    """Principals with at least one key going from a value to unlimited."""
    gain_limit: int
    """Principals with at least one key going from unlimited to a value."""

    @property
    def line(self) -> str:
        """``12 principals change effective quota; 3 lose a limit; 1 gains a limit.``"""
        def verb(n: int, one: str, many: str) -> str:
            return f"{n} {one if n == 1 else many}"
        return (f"{verb(self.changed, 'principal changes', 'principals change')} effective quota "
                f"(of {self.checked} checked); {verb(self.lose_limit, 'loses', 'lose')} a limit; "
                f"{verb(self.gain_limit, 'gains', 'gain')} a limit.")


@dataclass(frozen=True, slots=True)
class Impact:
    principals: tuple[PrincipalImpact, ...]
    """Changed principals, sorted by (user, client-id)."""
    summary: ImpactSummary


def _differs(a: tuple[float | None, Entity | None], b: tuple[float | None, Entity | None]) -> bool:
    if a[1] != b[1]:
        return True
    return a[0] is not None and b[0] is not None and not same_value(a[0], b[0])


def _key_impacts(before: Effective, after: Effective) -> tuple[KeyImpact, ...]:
    keys = resolve_key_set(EntityKind.CLIENT)
    return tuple(KeyImpact(key, Side(*b), Side(*a))
                 for key, b, a in zip(keys, before, after, strict=True) if _differs(b, a))


def blast_radius(before: QuotaState, after: QuotaState,
                 principals: Iterable[Principal]) -> Impact:
    """Resolve every principal against both states; keep those whose effective quota changes."""
    old, new = QuotaIndex.of(before), QuotaIndex.of(after)
    unique = sorted(set(principals))
    changed = []
    for p in unique:
        b = effective(old, p.user, p.client_id)
        a = effective(new, p.user, p.client_id)
        if b != a and (keys := _key_impacts(b, a)):  # tuple != is C-fast; NaN needs _differs
            changed.append(PrincipalImpact(p, keys))
    summary = ImpactSummary(len(unique), len(changed), sum(c.loses_limit for c in changed),
                            sum(c.gains_limit for c in changed))
    return Impact(tuple(changed), summary)


@dataclass(frozen=True, slots=True)
class DefaultWarning:
    """A changed entity with a ``<default>`` part: it reaches principals nobody listed."""

    entity: Entity
    keys: tuple[str, ...]

    @property
    def message(self) -> str:
        keys = ", ".join(self.keys)
        if self.entity.kind is EntityKind.IP:
            reach = "every address without its own {ip=...} entry"
        else:
            reach = "every principal without a more specific entry for these keys"
        return (f"warning: the change to {self.entity.display} ({keys}) affects {reach}; "
                "pass --principals FILE to see who")


def default_warnings(plan: Plan) -> list[DefaultWarning]:
    """One warning per changed entity naming a ``<default>``, with the keys that change."""
    return [DefaultWarning(c.entity, tuple(op.key for op in c.ops))
            for c in plan.changes if c.entity.has_default and c.ops]
