"""Ownership: which cluster entities kqplan manages besides the ones manifests list.

A listed entity is always owned whole. An unlisted entity is touched only when it falls in
a scope of an ``ownership`` block with ``prune: true`` — then plan deletes it.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass

from kqplan.core.entity import Entity, unescape_name


@dataclass(frozen=True, slots=True)
class ScopePattern:
    """Entity type → name glob. ``<default>`` matches only the default entity, globs only names.

    Matching is like a non-strict Kafka filter: the entity must carry every listed type with a
    matching name; types the pattern does not list are ignored.
    """

    parts: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, mapping: dict[str, str]) -> ScopePattern:
        return cls(tuple(sorted(mapping.items())))

    def matches(self, entity: Entity) -> bool:
        for entity_type, glob in self.parts:
            if entity_type not in entity:
                return False
            name = entity.name(entity_type)
            wanted = unescape_name(glob)
            if wanted is None or name is None:
                if wanted is not name:
                    return False
            elif not _compiled(wanted).match(name):
                return False
        return True

    @property
    def display(self) -> str:
        return "{" + ", ".join(f"{t}={g}" for t, g in self.parts) + "}"


_CACHE: dict[str, re.Pattern[str]] = {}


def _compiled(glob: str) -> re.Pattern[str]:
    pattern = _CACHE.get(glob)
    if pattern is None:
        pattern = _CACHE[glob] = re.compile(fnmatch.translate(glob))
    return pattern


@dataclass(frozen=True, slots=True)
class Ownership:
    prune: tuple[ScopePattern, ...] = ()
    """Scopes whose unlisted entities are deleted."""
    watch: tuple[ScopePattern, ...] = ()
    """Scopes without prune: unlisted entities are only reported."""

    @classmethod
    def of(cls, blocks: Iterable[tuple[bool, Iterable[ScopePattern]]]) -> Ownership:
        prune: list[ScopePattern] = []
        watch: list[ScopePattern] = []
        for do_prune, patterns in blocks:
            (prune if do_prune else watch).extend(patterns)
        return cls(tuple(dict.fromkeys(prune)), tuple(dict.fromkeys(watch)))

    def prunes(self, entity: Entity) -> bool:
        return any(p.matches(entity) for p in self.prune)

    def watches(self, entity: Entity) -> bool:
        return any(p.matches(entity) for p in self.watch)
