"""What the manifests ask for: the compiled desired state, and where each entity came from."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

from kqplan.core.diagnostics import Diagnostic, Loc, Source
from kqplan.core.entity import Entity
from kqplan.core.expiry import show_when
from kqplan.core.metadata import Metadata
from kqplan.core.ownership import Ownership

if TYPE_CHECKING:
    from kqplan.core.intent import QuotaTest


class Origin(NamedTuple):
    """Where an entity was declared, for diagnostics and plan annotations (a named tuple holding
    the entry's index, not its path: compile makes one per entry, and this one costs a sixth
    of a frozen dataclass's time and no tuple of its own)."""

    source: Source
    entry: int
    """The entry's index in its file's ``entities`` list."""
    layer: int = 0
    """Index of the manifests layer (the path given) the entry came from."""
    overrides: Origin | None = None
    """The earlier layer's entry this one overrides (``override: true``)."""

    @property
    def loc(self) -> Loc:
        """The entry's data path, ``("entities", index)``."""
        return ("entities", self.entry)

    @property
    def here(self) -> str:
        """``overlays/prod/q.yaml:5:5``: the entry's own place (found by one line scan, never by
        composing)."""
        place = self.source.entity_place(self.entry)
        return f"{self.source.path}:{place[0]}:{place[1]}" if place else self.source.path

    @property
    def display(self) -> str:
        """``overlays/prod/q.yaml:5:5`` (``… (overrides base/q.yaml:3:5)``), for plans: the file
        names the layer, the place the entry."""
        if self.overrides is None:
            return self.here
        return f"{self.here} (overrides {self.overrides.display})"


class Release(NamedTuple):
    """A ``released:`` item: an entity kqplan no longer manages, and where it says so."""

    source: Source
    loc: Loc

    @property
    def here(self) -> str:
        """``q.yaml:12:5``."""
        span = self.source.span(self.loc)
        return f"{span.path}:{span.line}:{span.column}"


@dataclass(frozen=True, slots=True)
class Expiry:
    """An entry with ``expires:`` (:mod:`kqplan.core.expiry`): its entity, when, and the entry.
    An ``override: true`` entry's expiry makes the entity fall back to the layer beneath."""

    entity: Entity
    at: datetime
    origin: Origin
    override: bool = False

    @property
    def loc(self) -> tuple[str | int, ...]:
        """The entry's ``expires`` field."""
        return (*self.origin.loc, "expires")

    def expired_text(self) -> str:
        """``expired 2026-12-01T00:00Z (q.yaml:12:5)``; ``override expired …`` for an override."""
        what = "override expired" if self.override else "expired"
        return f"{what} {show_when(self.at)} ({self.origin.here})"


@dataclass(slots=True)
class DesiredState:
    """What the manifests ask for, plus where each entity came from."""

    quotas: dict[Entity, dict[str, float]] = field(default_factory=dict)
    origins: dict[Entity, Origin] = field(default_factory=dict)
    absent: set[Entity] = field(default_factory=set)
    """Entities a later layer overrode down to no keys: listed, and meant not to exist."""
    protected: set[Entity] = field(default_factory=set)
    """Entities with ``protect: true``: a plan deleting one is refused."""
    metadata: dict[Entity, Metadata] = field(default_factory=dict)
    with_default: set[Entity] = field(default_factory=set)
    """Entities with a ``<default>`` part ever put in ``quotas`` (one an override removed may
    remain): lint indexes only these, without asking each of 100k entities."""
    budgets: dict[Entity, dict[str, float]] = field(default_factory=dict)
    """Keys written as cluster-wide budgets (``{per-cluster: 300MiB}``), per-cluster values: not in
    ``quotas`` until divided by a broker count (:func:`kqplan.core.budgets.divide`)."""
    now: datetime | None = None
    """The clock expiries were judged by (``KQPLAN_NOW`` or the system's)."""
    expiring: list[Expiry] = field(default_factory=list)
    """Entries in effect that carry ``expires``, in compile order."""
    expired: list[Expiry] = field(default_factory=list)
    """Entries whose ``expires`` has passed: treated as absent (an override falls back)."""
    ownership: Ownership = field(default_factory=Ownership)
    released: dict[Entity, Release] = field(default_factory=dict)
    """``released:``: entities left on the cluster as they are, never deleted, changed or reported."""
    cluster_guard: str | None = None
    files: int = 0
    tests: list[QuotaTest] = field(default_factory=list)
    """The ``kind: QuotaTests`` documents' tests, read beside the manifests (valid ones)."""
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.is_error]

    @property
    def next_expiry(self) -> datetime | None:
        """When the first entry in effect expires: the desired state changes then by itself."""
        return min((e.at for e in self.expiring), default=None)
