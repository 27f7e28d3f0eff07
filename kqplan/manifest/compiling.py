"""What a compile holds while it runs: the desired state built so far, the problems found (still
data paths), profiles, ownership scopes, the cluster guard, the quota dicts entries share, and a
journal to undo a sliced file that turns out unusual midway (:meth:`Compiling.undo`). The
compiler's parts (:mod:`kqplan.manifest.entries`, :mod:`kqplan.manifest.bulk`,
:mod:`kqplan.manifest.compiler`) extend :class:`Compiling`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, TypeVar

from kqplan.config.model import ProjectConfig
from kqplan.core.desired import DesiredState, Origin
from kqplan.core.diagnostics import Loc, Pending
from kqplan.core.entity import Entity
from kqplan.core.metadata import Metadata
from kqplan.core.ownership import ScopePattern
from kqplan.core.quotas import QUOTA_KEYS
from kqplan.manifest.source import LoadedManifest, SourceFile
from kqplan.manifest.values import Values


@dataclass(frozen=True, slots=True)
class Profile:
    """A named set of quotas (``profiles:``), and where it was defined."""

    quotas: dict[str, float]
    source: SourceFile
    loc: Loc
    budgets: dict[str, float] = field(default_factory=dict)
    """Keys written as cluster-wide budgets (per-cluster values)."""


class Compiling:
    """The compile's state; the compiler's parts extend it (:mod:`kqplan.manifest.entries`,
    :mod:`kqplan.manifest.bulk`, :mod:`kqplan.manifest.compiler`)."""

    def __init__(self, config: ProjectConfig, now: datetime | None = None) -> None:
        self.config = config
        self.state = DesiredState(now=now)
        self.now = now
        """The clock ``expires:`` is judged by (None: the first entry with one reads it)."""
        self.lapsed: dict[Entity, Origin] = {}
        """Entities listed only by entries that expired (KQP102 still applies to them; an
        override of one is inert)."""
        self.profiles: dict[str, Profile] = {}
        self.scopes: list[tuple[bool, list[ScopePattern]]] = []
        self.guard: tuple[str, SourceFile, Loc] | None = None
        self.pending: list[tuple[SourceFile, Pending]] = []
        self.values = Values(self.pending)
        self.shared: dict[tuple[tuple[Any, Any], ...], dict[str, float]] = {}
        """Plain entries' quotas by their parsed items: entries that repeat a set of quotas share
        one dict (desired quotas are never changed in place; an override copies)."""
        self.removed: dict[Entity, Origin] = {}
        self.read_rest: Callable[[], None] | None = None
        """Adds the profiles of the files not compiled yet (see
        :func:`kqplan.manifest.compile.compile_manifests`)."""
        self.journal: list[Saved] | None = None
        """While a sliced file compiles: what its overrides replaced, to undo (:meth:`undo`)."""

    def report(self, source: SourceFile, pending: Pending) -> None:
        self.pending.append((source, pending))

    def known_key(self, key: str) -> bool:
        return key in QUOTA_KEYS or key in self.config.custom_keys

    def mark(self, item: LoadedManifest) -> Mark:
        """Where the compile stands before ``item``, a sliced file, adds anything; starts the journal."""
        self.journal = []
        state = self.state
        return Mark(item.source, len(self.pending), len(self.profiles), len(self.scopes), self.guard,
                    len(state.expiring), len(state.expired))

    def saved(self, entity: Entity) -> Saved:
        state = self.state
        return Saved(entity, state.origins.get(entity), state.quotas.get(entity),
                     state.metadata.get(entity), self.removed.get(entity),
                     (entity in state.absent, entity in state.protected, entity in state.with_default),
                     state.budgets.get(entity))

    def undo(self, mark: Mark) -> None:
        """Everything added since ``mark``: the file's entities, the overrides it made (restored
        from the journal), its profiles, scope and guard, every problem reported since (profiles
        read ahead meanwhile included: the caller adds them again, in file order)."""
        state = self.state
        for saved in reversed(self.journal or ()):
            saved.restore(self)
        self.journal = None
        for entity in [e for e, o in state.origins.items() if o.source is mark.source]:
            Saved(entity, None, None, None, None, (False, False, False)).restore(self)  # gone
        for entity in [e for e, o in self.lapsed.items() if o.source is mark.source]:
            del self.lapsed[entity]
        del state.expiring[mark.expiring:]
        del state.expired[mark.expired:]
        del self.pending[mark.pending:]
        for name in list(self.profiles)[mark.profiles:]:
            del self.profiles[name]
        del self.scopes[mark.scopes:]
        self.guard = mark.guard
        for entity in [e for e, r in state.released.items() if r.source is mark.source]:
            del state.released[entity]


_V = TypeVar("_V")


class Mark(NamedTuple):
    """Where a compile stood before a sliced file added anything (:meth:`Compiling.mark`)."""

    source: SourceFile
    pending: int
    profiles: int
    scopes: int
    guard: tuple[str, SourceFile, Loc] | None
    expiring: int = 0
    expired: int = 0


class Saved(NamedTuple):
    """One entity's compiled state (None: absent), as an override found it."""

    entity: Entity
    origin: Origin | None
    quotas: dict[str, float] | None
    metadata: Metadata | None
    removed: Origin | None
    sets: tuple[bool, bool, bool]
    """Membership of ``absent``, ``protected`` and ``with_default``."""
    budgets: dict[str, float] | None = None

    def restore(self, compiler: Compiling) -> None:
        state, entity = compiler.state, self.entity
        _put(state.origins, entity, self.origin)
        _put(state.quotas, entity, self.quotas)
        _put(state.metadata, entity, self.metadata)
        _put(compiler.removed, entity, self.removed)
        _put(state.budgets, entity, self.budgets)
        for members, present in zip((state.absent, state.protected, state.with_default), self.sets,
                                    strict=True):
            (members.add if present else members.discard)(entity)


def _put(table: dict[Entity, _V], entity: Entity, value: _V | None) -> None:
    if value is None:
        table.pop(entity, None)
    else:
        table[entity] = value
