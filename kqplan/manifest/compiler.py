"""The compiler: each file's profiles, cluster guard, ownership scopes and entity entries (new,
repeated, or overriding an earlier layer's) added to the desired state, every problem reported
where it is; its parts check values (:mod:`kqplan.manifest.values`), single entries
(:mod:`kqplan.manifest.entries`) and take plain entries in bulk (:mod:`kqplan.manifest.bulk`).
"""

from __future__ import annotations

from typing import Any, cast

from kqplan.config.model import toml_string, toml_table
from kqplan.core.desired import DesiredState, Origin, Release
from kqplan.core.diagnostics import Loc, Pending, Severity, did_you_mean, locate, sort_key
from kqplan.core.entity import (
    BUILTIN_TYPES,
    CLIENT_ID,
    IP,
    USER,
    Entity,
    EntityKind,
    Name,
    unescape_name,
)
from kqplan.core.metadata import Metadata
from kqplan.core.ownership import Ownership, ScopePattern
from kqplan.core.quotas import QUOTA_KEYS, key_error, keys_for
from kqplan.manifest.bulk import BulkPath
from kqplan.manifest.compiling import Profile
from kqplan.manifest.entries import ENTRY_FIELD_SET, EntryChecks, kind_name
from kqplan.manifest.fast.plain import PlainEntries
from kqplan.manifest.fast.slices import SlicedEntries
from kqplan.manifest.source import LoadedManifest, SourceFile
from kqplan.manifest.temporary import Temporary

_PLAIN_FIELDS = frozenset({USER, CLIENT_ID, "quotas"})
RELEASED = "KQP203"
"""A ``released:`` item that contradicts the manifests: released twice, or also listed."""
_KEY_NAMES = {key: key for key in QUOTA_KEYS}
"""The registry's own key strings: a compiled state holds them, not one parsed copy per entry
(250k strings, 17 MiB, in a 100k-entity plan)."""


class Compiler(EntryChecks, BulkPath, Temporary):
    """Adds each file's profiles, guard, ownership and entities to the desired state, reporting
    every problem where it is; :meth:`finish` locates them and returns the state."""

    # -- profiles, ownership, guard -------------------------------------------------------
    def add_profiles(self, loaded: LoadedManifest) -> None:
        source = loaded.source
        for name, values in loaded.manifest.profiles.items():
            loc: Loc = ("profiles", name)
            if name in self.profiles:
                first = self.profiles[name]
                self.report(source, Pending(
                    "KQP121", f"profile '{name}' is defined twice", loc, at_key=True,
                    related=((first.source, first.loc, "first defined"),),
                    hint="profiles share one namespace across all files; rename one"))
                continue
            quotas: dict[str, float] = {}
            budgets: dict[str, float] = {}
            for key, raw in values.items():
                kloc = (*loc, key)
                if not self.known_key(key):
                    self.unknown_key(source, kloc, key, list(QUOTA_KEYS))
                    continue
                if raw.__class__ is dict:
                    budget = self.budget(source, kloc, key, raw)
                    if budget is not None:
                        budgets[_KEY_NAMES.get(key, key)] = budget
                    continue
                value = self.values.parse(source, kloc, key, raw)
                if value is not None and (key not in QUOTA_KEYS
                                          or self.values.check(source, kloc, key, value)):
                    quotas[_KEY_NAMES.get(key, key)] = value
            self.profiles[name] = Profile(quotas, source, loc, budgets)

    def add_ownership(self, loaded: LoadedManifest) -> None:
        ownership = loaded.manifest.ownership
        if ownership is None:
            return
        types = (*BUILTIN_TYPES, *sorted(self.config.custom_entity_types))
        patterns = []
        for i, mapping in enumerate(ownership.scope):
            loc: Loc = ("ownership", "scope", i)
            ok = bool(mapping)
            if not mapping:
                self.report(loaded.source, Pending("KQP130", "empty scope pattern", loc,
                                                   hint="e.g. {user: \"payments-*\"}"))
            for entity_type, glob in mapping.items():
                if entity_type not in types:
                    guess = did_you_mean(entity_type, types)
                    self.report(loaded.source, Pending(
                        "KQP104", f"unknown entity type '{entity_type}' in scope", (*loc, entity_type),
                        at_key=True, hint=f"did you mean '{guess}'?" if guess else
                        f"entity types: {', '.join(types)}"))
                    ok = False
                elif glob == "":
                    self.report(loaded.source, Pending(
                        "KQP130", "empty name pattern", (*loc, entity_type),
                        hint="use '*' for every name, or <default> for the default entity"))
                    ok = False
            if ok:
                patterns.append(ScopePattern.of(mapping))
        self.scopes.append((ownership.prune, patterns))

    def add_released(self, loaded: LoadedManifest) -> None:
        """``released:``: entities left on the cluster as they are (checked against the listed
        ones in :meth:`finish`, once every file is read)."""
        released = loaded.manifest.released
        if not released:
            return
        types = (*BUILTIN_TYPES, *sorted(self.config.custom_entity_types))
        for i, mapping in enumerate(released):
            loc: Loc = ("released", i)
            unknown = [t for t in mapping if t not in types]
            if not mapping or unknown:
                guess = did_you_mean(unknown[0], types) if unknown else None
                self.report(loaded.source, Pending(
                    "KQP104" if unknown else "KQP100",
                    f"unknown entity type '{unknown[0]}' in released" if unknown else "released entity "
                    "names no entity type", (*loc, unknown[0]) if unknown else loc, at_key=bool(unknown),
                    hint=f"did you mean '{guess}'?" if guess else
                    "write it as in entities, e.g. {user: legacy}"))
                continue
            entity = Entity([(t, unescape_name(n)) for t, n in mapping.items()])
            if entity.kind is not EntityKind.CUSTOM and not self.check_entity(loaded.source, loc, entity):
                continue
            first = self.state.released.get(entity)
            if first is not None:
                self.report(loaded.source, Pending(
                    RELEASED, f"{entity.display} is released twice", loc,
                    related=((first.source, first.loc, "first released"),),
                    hint="release it once, in the layer that stops managing it"))
                continue
            self.state.released[entity] = Release(loaded.source, loc)

    def check_released(self) -> None:
        """An entity both listed (in any layer, in effect or expired) and released is refused."""
        for entity, release in self.state.released.items():
            listed = self.state.origins.get(entity) or self.lapsed.get(entity)
            if listed is None:
                continue
            self.report(cast(SourceFile, release.source), Pending(
                RELEASED, f"{entity.display} is both listed and released", release.loc,
                related=((listed.source, listed.loc, "listed"),),
                hint="remove its entry to stop managing it, or the released item to keep managing it"))

    def add_guard(self, loaded: LoadedManifest) -> None:
        guard = loaded.manifest.cluster
        if guard is None:
            return
        if self.guard is None:
            self.guard = (guard, loaded.source, ("cluster",))
        elif self._guard_name(self.guard[0]) != self._guard_name(guard):  # a name and its id are one
            self.report(loaded.source, Pending(
                "KQP140", f"cluster guard '{guard}' conflicts with '{self.guard[0]}'", ("cluster",),
                related=((self.guard[1], self.guard[2], "other guard"),),
                hint="plan each cluster's manifests separately"))

    # -- entities -------------------------------------------------------------------------
    def add_entities(self, loaded: LoadedManifest, layer: int = 0) -> None:
        source = loaded.source
        doc_meta = _metadata(loaded.raw.get("metadata"))
        entries = loaded.raw.get("entities") or []
        if entries.__class__ is SlicedEntries:
            for base, piece in entries.slices():
                self.add_list(source, piece, layer, doc_meta, base)
        else:
            self.add_list(source, entries, layer, doc_meta)

    def add_list(self, source: SourceFile, entries: Any, layer: int, doc_meta: Metadata | None,
                 base: int = 0) -> None:
        """Entity entries of ``source``, the first at index ``base``: in bulk when read from the
        text and all new and valid, else one by one."""
        plain = self.add_plain if doc_meta is None else None
        if plain is not None and entries.__class__ is PlainEntries and self.add_plain_list(
                source, entries, layer, base):
            return
        for i, raw in enumerate(entries, base):
            # Each parsed entry is let go once compiled (nothing reads it later; positions come
            # from the text): the parsed and compiled forms of a 100k-entity file are not both
            # held at the peak (measured: 260 -> 214 MiB for a 12 MiB file, benchmarks/manifest_memory.py).
            entries[i - base] = None
            if plain is not None and raw.keys() <= _PLAIN_FIELDS and plain(source, i, raw, layer):
                continue
            loc: Loc = ("entities", i)
            parts: list[tuple[str, Name]] = []
            ok = True
            for entity_type in (USER, CLIENT_ID, IP):  # display order: Entity needs no sort
                if entity_type not in raw:
                    continue
                text = raw[entity_type]
                if text is None:
                    self.report(source, Pending(
                        "KQP101", f"{entity_type} has no name", (*loc, entity_type),
                        hint=f"write `{entity_type}: <default>` for the default {entity_type}"))
                    ok = False
                    continue
                parts.append((entity_type, unescape_name(text)))
            if not raw.keys() <= ENTRY_FIELD_SET:
                for extra in sorted(raw.keys() - ENTRY_FIELD_SET):
                    ok = self.add_custom_part(source, loc, extra, raw[extra], parts) and ok
            if not ok:
                continue
            if not parts:
                self.report(source, Pending(
                    "KQP100", "entity names no entity type", loc,
                    hint="add `user:`, `client-id:` or `ip:` (e.g. `user: alice`)"))
                continue
            entity = Entity(parts)
            kind = entity.kind
            if (kind is not EntityKind.CLIENT or any(n == "" for _, n in parts)) and \
                    not self.check_entity(source, loc, entity):
                continue
            if not self.check_names(source, loc, entity):
                continue
            self.add_entry(source, loc, entity, raw, layer=layer, doc_meta=doc_meta)

    def add_entry(self, source: SourceFile, loc: Loc, entity: Entity, raw: dict[str, Any], *,
                  layer: int, doc_meta: Metadata | None) -> None:
        """One valid entity entry: new, a duplicate, or an override of an earlier layer; one whose
        ``expires`` passed takes no effect (:mod:`kqplan.manifest.temporary`)."""
        state = self.state
        override = raw.get("override") is True
        at = self.entry_expiry(source, loc, raw) if "expires" in raw else None
        if at is False:
            return
        first = state.origins.get(entity)
        if first is None and state.absent and entity in state.absent:
            first = self.removed.get(entity)
        lapsed = self.lapsed.get(entity) if first is None and self.lapsed else None
        earlier: tuple[dict[str, float], dict[str, float]] | None = None
        base = first or lapsed
        if base is not None:
            if not override or base.layer == layer:
                hint = ("merge the two entries into one" if base.layer == layer else
                        "to change it in this layer, add `override: true` to this entry")
                self.report(source, Pending(
                    "KQP102", f"entity {entity.display} is listed twice", loc,
                    related=((base.source, base.loc, "first listed"),), hint=hint))
                return
            earlier = (state.quotas.get(entity, {}), state.budgets.get(entity, {}))
        elif override:
            self.report(source, Pending(
                "KQP122", f"override: true, but no earlier layer lists {entity.display}", (*loc, "override"),
                at_key=True, hint="remove `override: true`, or list the entity in an earlier layer "
                "(layers are the paths given, in order, or a cluster's `manifests` in kqplan.toml)"))
            return
        compiled = self.entity_quotas(source, loc, entity, entity.kind, raw, earlier=earlier)
        if compiled is None:
            return
        index = loc[1]  # loc is ("entities", index)
        assert isinstance(index, int)
        origin = Origin(source, index, layer, base)
        if (at is not None or lapsed is not None) and self.settle_expiry(
                entity, at, origin, override=override, listed=first is not None, lapsed=lapsed is not None):
            return
        if first is not None and self.journal is not None:
            self.journal.append(self.saved(entity))
        state.origins[entity] = origin
        meta = _metadata(raw["metadata"]) if "metadata" in raw else None
        if meta is not None or doc_meta is not None or (override and entity in state.metadata):
            merged = (meta or Metadata()).merged_over(state.metadata.get(entity) if override else doc_meta)
            if merged.labels or merged.description is not None:
                state.metadata[entity] = merged
        if "protect" in raw:
            (state.protected.add if raw["protect"] is True else state.protected.discard)(entity)
        self.put(entity, origin, *compiled)

    def put(self, entity: Entity, origin: Origin, quotas: dict[str, float],
            budgets: dict[str, float]) -> None:
        """The entry's keys as the entity's desired state (none: it must not exist)."""
        state = self.state
        if budgets:
            state.budgets[entity] = budgets
        elif state.budgets:
            state.budgets.pop(entity, None)
        if quotas or budgets:
            state.quotas[entity] = quotas
            if entity.has_default:
                state.with_default.add(entity)
            if state.absent:
                state.absent.discard(entity)
        else:  # an override removed every key: the entity must not exist
            state.quotas.pop(entity, None)
            state.absent.add(entity)
            self.removed[entity] = origin

    def entity_quotas(self, source: SourceFile, loc: Loc, entity: Entity, kind: EntityKind,
                      raw: dict[str, Any], *,
                      earlier: tuple[dict[str, float], dict[str, float]] | None = None
                      ) -> tuple[dict[str, float], dict[str, float]] | None:
        """The entry's quotas and budgets (over ``earlier``'s for an override); None after
        reporting a problem. A key is either a per-broker value or a budget, never both."""
        custom = kind is EntityKind.CUSTOM
        valid_keys = keys_for(kind)
        quotas: dict[str, float] = dict(earlier[0]) if earlier is not None else {}
        budgets: dict[str, float] = dict(earlier[1]) if earlier is not None else {}
        ok = True
        profile = raw.get("profile")
        if profile is not None:
            inherited = self.apply_profile(source, loc, entity, profile, quotas, budgets=budgets)
            if inherited is None:
                return None
            ok = inherited
        for key, value_raw in (raw.get("quotas") or {}).items():
            kloc: Loc = (*loc, "quotas", key)
            if value_raw is None:
                if earlier is None:
                    self.report(source, Pending(
                        "KQP021", f"{key}: value must be a number, got null", kloc,
                        hint="null removes a key only in an entry with `override: true`; "
                        "to remove the key here, delete the line"))
                    ok = False
                else:
                    quotas.pop(key, None)
                    budgets.pop(key, None)
                continue
            if key not in valid_keys and not self.key_allowed(source, kloc, entity, key, custom):
                ok = False
                continue
            is_budget = value_raw.__class__ is dict
            value = (self.budget(source, kloc, key, value_raw) if is_budget
                     else self.values.valid(source, kloc, key, value_raw))
            if value is None:
                ok = False
                continue
            name = _KEY_NAMES.get(key, key)
            (budgets if is_budget else quotas)[name] = value
            (quotas if is_budget else budgets).pop(name, None)
        if ok and not quotas and not budgets and earlier is None:
            self.report(source, Pending(
                "KQP118", f"entity {entity.display} sets no quotas", loc,
                hint="add a `quotas:` map or a `profile:`; to delete an entity from the cluster, "
                "remove it from the manifests and use ownership.prune"))
            return None
        return (quotas, budgets) if ok else None

    def apply_profile(self, source: SourceFile, loc: Loc, entity: Entity, profile: str,
                      quotas: dict[str, float], *, budgets: dict[str, float]) -> bool | None:
        """Start ``quotas`` (and ``budgets``) from a profile; None if the profile does not exist."""
        kind = entity.kind
        found = self.profiles.get(profile)
        if found is None and self.read_rest is not None:  # perhaps a file not compiled yet has it
            self.read_rest()
            found = self.profiles.get(profile)
        if found is None:
            guess = did_you_mean(profile, self.profiles)
            self.report(source, Pending(
                "KQP120", f"unknown profile '{profile}'", (*loc, "profile"),
                hint=f"did you mean '{guess}'?" if guess else (
                    f"defined profiles: {', '.join(sorted(self.profiles))}" if self.profiles
                    else "define it under `profiles:`")))
            return None
        ok = True
        for key, inherited, into, other in [*((k, v, quotas, budgets) for k, v in found.quotas.items()),
                                            *((k, v, budgets, quotas) for k, v in found.budgets.items())]:
            if kind is not EntityKind.CUSTOM and key in QUOTA_KEYS and key_error(key, kind):
                self.report(source, Pending(
                    "KQP111", f"profile '{profile}' sets {key}, which {kind_name(entity)} "
                    f"entities do not take", (*loc, "profile"),
                    hint=f"{kind_name(entity)} entities take {', '.join(keys_for(kind))}"))
                ok = False
            into[key] = inherited
            other.pop(key, None)
        return ok

    def _guard_name(self, guard: str) -> str:
        """The inventory name of a guard (a cluster id recorded in the inventory reads as its
        cluster's name), or the guard itself."""
        return self.config.cluster_name_for(guard) or guard

    def check_guard_known(self) -> None:
        """With an inventory, a ``cluster:`` guard must name one of its clusters (or an id). While
        some cluster has no ``id``, an unknown guard may be its live id: a warning then (plan
        checks it against the live cluster)."""
        clusters = self.config.clusters
        if self.guard is None or not clusters:
            return
        guard, source, loc = self.guard
        if self.config.cluster_name_for(guard) is not None:
            return
        guess = did_you_mean(guard, clusters)
        without_id = sorted(name for name, entry in clusters.items() if entry.id is None)
        if without_id and guess is None:
            self.report(source, Pending(
                "KQP141", f"cluster '{guard}' is not in the inventory ({self.config.source}); it may "
                f"be the id of {', '.join(without_id)}, which record none", loc,
                severity=Severity.WARNING,
                hint=f"write the cluster's inventory name (`cluster: {without_id[0]}`), or record its "
                f"id: id = {toml_string(guard)} under {toml_table('clusters', without_id[0])}"))
            return
        self.report(source, Pending(
            "KQP141", f"cluster '{guard}' is not in the inventory ({self.config.source})", loc,
            hint=f"did you mean '{guess}'?" if guess else
            f"clusters: {', '.join(sorted(clusters))}; or add {toml_table('clusters', guard)} to "
            "kqplan.toml"))

    def finish(self) -> DesiredState:
        self.check_guard_known()
        self.check_released()
        self.state.ownership = Ownership.of(self.scopes)
        self.state.cluster_guard = self.guard[0] if self.guard else None
        self.state.diagnostics.extend(locate(source, p) for source, p in self.pending)
        self.state.diagnostics.sort(key=sort_key)
        return self.state


def _metadata(raw: Any) -> Metadata | None:
    """A ``metadata:`` mapping (shape checked by pydantic already) as a value."""
    if not isinstance(raw, dict):
        return None
    labels = raw.get("labels") or {}
    description = raw.get("description")
    return Metadata.of({str(k): str(v) for k, v in labels.items()},
                       description if isinstance(description, str) else None)
