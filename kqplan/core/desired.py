"""What the manifests ask for: the compiled desired state, and where each entity came from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from kqplan.core.diagnostics import Diagnostic, Loc, Source
from kqplan.core.entity import Entity
from kqplan.core.metadata import Metadata
from kqplan.core.ownership import Ownership


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
    def display(self) -> str:
        """``overlays/prod/q.yaml:5:5`` (``… (overrides base/q.yaml:3:5)``), for plans: the file
        names the layer, the place the entry (found by one line scan, never by composing)."""
        place = self.source.entity_place(self.entry)
        here = f"{self.source.path}:{place[0]}:{place[1]}" if place else self.source.path
        if self.overrides is None:
            return here
        return f"{here} (overrides {self.overrides.display})"


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
    ownership: Ownership = field(default_factory=Ownership)
    cluster_guard: str | None = None
    files: int = 0
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.is_error]
