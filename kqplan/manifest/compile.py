"""Validated manifests → desired state, ownership and cluster guard, applying Kafka's rules.

Every check that Kafka's controller makes on an alter is made here first, with the same
rule (``kqplan.core.quotas``), so ``kqplan validate`` passing means the broker will accept it.
Offline checks are stricter in three places: NaN and infinity are refused (Kafka stores
them, but they are never what a manifest means), an ip that looks numeric must be a real
address, and an entity with no quotas is refused (list it nowhere, or prune it).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from kqplan.config.model import ProjectConfig
from kqplan.core.desired import DesiredState, Origin
from kqplan.core.diagnostics import Diagnostic, Loc, Pending, Severity, did_you_mean, locate, sort_key
from kqplan.core.entity import (
    BUILTIN_TYPES,
    CLIENT_ID,
    DEFAULT_NAME,
    IP,
    USER,
    Entity,
    EntityKind,
    Name,
    canonical,
    name_problem,
    unescape_name,
    visible,
)
from kqplan.core.ipnames import literal_verdict
from kqplan.core.metadata import Metadata
from kqplan.core.ownership import Ownership, ScopePattern
from kqplan.core.quotas import CLIENT_KEYS, QUOTA_KEYS, entity_error, key_error, keys_for, value_error
from kqplan.core.units import UnitError, parse_bytes
from kqplan.manifest.loader import iter_load
from kqplan.manifest.plain import PlainEntries
from kqplan.manifest.slices import SlicedEntries, Unsliceable
from kqplan.manifest.source import LoadedManifest, SourceFile
from kqplan.perf import paused_gc

_ENTRY_FIELDS = ("user", "client-id", "ip", "profile", "override", "protect", "metadata", "quotas")
_ENTRY_FIELD_SET = frozenset(_ENTRY_FIELDS)
_PLAIN_FIELDS = frozenset({USER, CLIENT_ID, "quotas"})
_ABSENT: Any = object()
_CLIENT_KEY_NAMES = {key: key for key in CLIENT_KEYS}
_KEY_NAMES = {key: key for key in QUOTA_KEYS}
"""The registry's own key strings: a compiled state holds them, not one parsed copy per entry
(250k strings, 17 MiB, in a 100k-entity plan)."""


_EXACT_DOUBLE_LIMIT = 2**53


@dataclass(frozen=True, slots=True)
class _Profile:
    quotas: dict[str, float]
    source: SourceFile
    loc: Loc


class _Compiler:
    def __init__(self, config: ProjectConfig) -> None:
        self.config = config
        self.state = DesiredState()
        self.profiles: dict[str, _Profile] = {}
        self.scopes: list[tuple[bool, list[ScopePattern]]] = []
        self.guard: tuple[str, SourceFile, Loc] | None = None
        self.pending: list[tuple[SourceFile, Pending]] = []
        self.values: dict[tuple[str, type, Any], float] = {}
        self.shared: dict[tuple[tuple[Any, Any], ...], dict[str, float]] = {}
        """Plain entries' quotas by their parsed items: entries that repeat a set of quotas share
        one dict (desired quotas are never changed in place; an override copies)."""
        self.removed: dict[Entity, Origin] = {}
        self.read_rest: Callable[[], None] | None = None
        """Adds the profiles of the files not compiled yet (see :func:`compile_manifests`)."""
        self.journal: list[_Saved] | None = None
        """While a sliced file compiles: what its overrides replaced, to undo (:meth:`undo`)."""

    def report(self, source: SourceFile, pending: Pending) -> None:
        self.pending.append((source, pending))

    # -- values ---------------------------------------------------------------------------
    def parse_value(self, source: SourceFile, loc: Loc, key: str, raw: Any) -> float | None:
        """A quota value as Kafka's double, or None after reporting why it is not one."""
        spec = QUOTA_KEYS.get(key)
        if isinstance(raw, bool) or not isinstance(raw, int | float | str):
            self.report(source, Pending("KQP021", f"{key}: value must be a number", loc))
            return None
        if isinstance(raw, str):
            if spec is None or not spec.bytes_per_second:
                self.report(source, Pending(
                    "KQP116", f"{key} takes a plain number, not '{raw}'", loc,
                    hint="units are accepted only for producer_byte_rate and consumer_byte_rate"))
                return None
            try:
                exact = parse_bytes(raw)
            except UnitError as exc:
                self.report(source, Pending("KQP116", str(exc), loc, hint=exc.hint))
                return None
            if exact != exact.to_integral_value():
                self.report(source, Pending(
                    "KQP113", f"{key} = {raw} is {exact.normalize():f} bytes, not a whole number",
                    loc, hint="byte rates are whole bytes per second; adjust the number or unit"))
                return None
            return self.exact_float(source, loc, key, int(exact))
        if isinstance(raw, int):
            return self.exact_float(source, loc, key, raw)
        if math.isnan(raw) or math.isinf(raw):
            self.report(source, Pending(
                "KQP115", f"{key} = {raw}: NaN and infinity are not quotas", loc,
                hint="for no limit, remove the key"))
            return None
        return raw

    def exact_float(self, source: SourceFile, loc: Loc, key: str, value: int) -> float:
        if value.bit_length() > 64:  # past any Kafka type: "too large" (and never turned into text:
            return math.inf if value > 0 else -math.inf  # Python refuses str() of 4300+ digits)
        as_float = float(value)
        if abs(value) > _EXACT_DOUBLE_LIMIT and Decimal(as_float) != value:
            self.report(source, Pending(
                "KQP160", f"{key} = {value} cannot be stored exactly (Kafka keeps quotas as "
                f"doubles); it becomes {Decimal(as_float):f}", loc, severity=Severity.WARNING,
                hint="use a value below 2^53 or a multiple of a power of two"))
        return as_float

    def check_value(self, source: SourceFile, loc: Loc, key: str, value: float) -> bool:
        problem = value_error(key, value)
        if problem is None:
            return True
        code = {"must be greater": "KQP112", "too large": "KQP114"}
        hint = None
        if "fractional" in problem:
            kind = "bytes per second" if QUOTA_KEYS[key].bytes_per_second else "a whole number"
            self.report(source, Pending("KQP113", f"{key} must be {kind}: {value!r} is fractional "
                                        f"(Kafka: \"{problem}\")", loc,
                                        hint="round it to a whole number"))
            return False
        if "greater than 0" in problem:
            hint = "quotas are positive; for no limit, remove the key"
        elif "too large" in problem:
            hint = "for no limit, remove the key"
        the_code = next((c for k, c in code.items() if k in problem), "KQP112")
        self.report(source, Pending(the_code, f"{key}: {problem}", loc, hint=hint))
        return False

    def known_key(self, key: str) -> bool:
        return key in QUOTA_KEYS or key in self.config.custom_keys

    def unknown_key(self, source: SourceFile, loc: Loc, key: str, choices: Sequence[str]) -> None:
        guess = did_you_mean(key, choices)
        hint = f"did you mean '{guess}'?" if guess else f"valid keys: {', '.join(choices)}"
        if not guess:
            hint += " (declare custom keys under [custom] keys in kqplan.toml)"
        self.report(source, Pending("KQP110", f"unknown quota key '{key}'", loc, at_key=True,
                                    hint=hint))

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
            for key, raw in values.items():
                kloc = (*loc, key)
                if not self.known_key(key):
                    self.unknown_key(source, kloc, key, list(QUOTA_KEYS))
                    continue
                value = self.parse_value(source, kloc, key, raw)
                if value is not None and (key not in QUOTA_KEYS
                                          or self.check_value(source, kloc, key, value)):
                    quotas[_KEY_NAMES.get(key, key)] = value
            self.profiles[name] = _Profile(quotas, source, loc)

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

    def add_guard(self, loaded: LoadedManifest) -> None:
        guard = loaded.manifest.cluster
        if guard is None:
            return
        if self.guard is None:
            self.guard = (guard, loaded.source, ("cluster",))
        elif self.guard[0] != guard:
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
            if not raw.keys() <= _ENTRY_FIELD_SET:
                for extra in sorted(raw.keys() - _ENTRY_FIELD_SET):
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

    def add_plain(self, source: SourceFile, index: int, raw: dict[str, Any], layer: int) -> bool:
        """The common entry, fast: ``user``/``client-id`` with plain names and quotas whose values
        were seen valid before. Anything else (a first-seen value, an escape, a repeat, a
        problem) answers False without reporting, and the general path below takes the entry:
        it is the one place rules and messages live (this adds nothing it would not)."""
        user = raw.get(USER, _ABSENT)
        client = raw.get(CLIENT_ID, _ABSENT)
        quotas_raw = raw.get("quotas")
        if quotas_raw.__class__ is not dict or not quotas_raw:
            return False
        # plain names: non-empty, printable (check_names has nothing to say), no escape to undo
        # ("<default>" is fine); `user: null` and odd names go the general way
        if user is not _ABSENT and (user.__class__ is not str or user == "" or not user.isprintable()
                                    or user[0] == "\\"):
            return False
        if client is not _ABSENT and (client.__class__ is not str or client == ""
                                      or not client.isprintable() or client[0] == "\\"):
            return False
        if client is _ABSENT:
            if user is _ABSENT:
                return False
            parts: tuple[tuple[str, Name], ...] = ((USER, None if user == DEFAULT_NAME else user),)
        elif user is _ABSENT:
            parts = ((CLIENT_ID, None if client == DEFAULT_NAME else client),)
        else:
            parts = ((USER, None if user == DEFAULT_NAME else user),
                     (CLIENT_ID, None if client == DEFAULT_NAME else client))
        # Entries repeat a few sets of quotas (tiers): one dict each, ~200 bytes less per entity.
        # The parsed values were shape-checked (int, float or str: no bool, which would equal 1).
        items = tuple(quotas_raw.items())
        quotas = self.shared.get(items)
        if quotas is None:
            cached = self.values.get
            names = _CLIENT_KEY_NAMES.get
            quotas = {}
            for key, value_raw in items:
                name = names(key)
                if name is None:
                    return False
                value = cached((key, value_raw.__class__, value_raw))
                if value is None:
                    return False
                quotas[name] = value  # the registry's string: the parsed one is let go
            if len(self.shared) < _SHARED_LIMIT:
                self.shared[items] = quotas
        entity = canonical(parts)  # built in display order above
        state = self.state
        if state.absent and entity in state.absent:
            return False  # an override: the general path merges it
        origin = Origin(source, index, layer)
        if state.origins.setdefault(entity, origin) is not origin:
            return False  # a repeat: the general path reports it
        state.quotas[entity] = quotas
        if DEFAULT_NAME in (user, client):
            state.with_default.add(entity)
        return True

    def add_plain_list(self, source: SourceFile, entries: PlainEntries, layer: int, base: int = 0) -> bool:
        """A list read from its text (:mod:`kqplan.manifest.plain`), all at once: what
        :meth:`add_plain` does per entry, for a file whose entries are all new and all of whose
        quotas blocks are valid (one compiled dict per block). Anything else — a repeat, an
        override, a value to report, even a warning — answers False having changed nothing, and
        the entry-by-entry path takes the file: the one place rules and messages live."""
        tiers: dict[str, dict[str, float]] = {}
        for block, quotas_raw in entries.tiers.items():
            quotas = self.quiet_quotas(source, quotas_raw)
            if quotas is None:
                return False
            tiers[block] = quotas
        users, clients, only = entries.users, entries.clients, entries.only_clients
        named = DEFAULT_NAME not in users and DEFAULT_NAME not in clients and DEFAULT_NAME not in only
        # the names are plain (see plain.py): printable, no escape; "<default>" only if not `named`
        entities = [canonical(((USER, u), (CLIENT_ID, c)) if c is not None else ((USER, u),) if u is not None
                              else ((CLIENT_ID, o),))
                    for u, c, o in zip(users, clients, only, strict=True)] if named else [
            canonical(((USER, _name(u)), (CLIENT_ID, _name(c))) if c is not None else ((USER, _name(u)),)
                      if u is not None else ((CLIENT_ID, _name(o)),))
            for u, c, o in zip(users, clients, only, strict=True)]
        state = self.state
        origins = state.origins
        if not origins.keys().isdisjoint(entities):  # an entity overridden away keeps its origin
            return False  # a repeat or an override: the entry-by-entry path reports or merges it
        # Origin(source, i, layer) built by tuple.__new__ in C (a named tuple's own __new__ is a
        # Python function: 100k calls)
        fields = zip(itertools.repeat(source), range(base, base + len(entities)), itertools.repeat(layer),
                     itertools.repeat(None), strict=False)
        known = len(origins)
        origins.update(zip(entities, map(_ORIGIN_NEW, fields), strict=True))
        if len(origins) != known + len(entities):  # an entity listed twice in the file
            for entity in entities:
                origins.pop(entity, None)  # all were new: the rest are as they were
            return False
        state.quotas.update(zip(entities, map(tiers.__getitem__, entries.blocks), strict=True))
        if not named:
            state.with_default.update(e for e in entities if e.has_default)
        return True

    def quiet_quotas(self, source: SourceFile, quotas_raw: dict[str, Any]) -> dict[str, float] | None:
        """Plain quotas of a user/client-id entry as :meth:`add_plain` compiles them (shared by
        their parsed items); None, reporting nothing, for anything to report (the entry-by-entry
        path reports it where it is)."""
        items = tuple(quotas_raw.items())
        quotas = self.shared.get(items)
        if quotas is not None:
            return quotas
        reported = len(self.pending)
        quotas = {}
        for key, value_raw in items:
            name = _CLIENT_KEY_NAMES.get(key)
            cache_key = (key, value_raw.__class__, value_raw)
            fresh = cache_key not in self.values
            value = None if name is None else self.value(source, ("entities",), key, value_raw)
            if name is None or value is None or len(self.pending) > reported:
                del self.pending[reported:]
                if fresh:  # a value cached with a warning (2^53 itself) would warn no more
                    self.values.pop(cache_key, None)
                return None
            quotas[name] = value
        if len(self.shared) < _SHARED_LIMIT:
            self.shared[items] = quotas
        return quotas

    def add_entry(self, source: SourceFile, loc: Loc, entity: Entity, raw: dict[str, Any], *,
                  layer: int, doc_meta: Metadata | None) -> None:
        """One valid entity entry: new, a duplicate, or an override of an earlier layer."""
        state = self.state
        override = raw.get("override") is True
        first = state.origins.get(entity)
        if first is None and state.absent and entity in state.absent:
            first = self.removed.get(entity)
        earlier: dict[str, float] | None = None
        if first is not None:
            if not override or first.layer == layer:
                hint = ("merge the two entries into one" if first.layer == layer else
                        "to change it in this layer, add `override: true` to this entry")
                self.report(source, Pending(
                    "KQP102", f"entity {entity.display} is listed twice", loc,
                    related=((first.source, first.loc, "first listed"),), hint=hint))
                return
            earlier = state.quotas.get(entity, {})
        elif override:
            self.report(source, Pending(
                "KQP122", f"override: true, but no earlier layer lists {entity.display}", (*loc, "override"),
                at_key=True, hint="remove `override: true`, or list the entity in an earlier layer "
                "(layers are the paths given, in order, or a cluster's `manifests` in kqplan.toml)"))
            return
        quotas = self.entity_quotas(source, loc, entity, entity.kind, raw, earlier=earlier)
        if quotas is None:
            return
        index = loc[1]  # loc is ("entities", index)
        assert isinstance(index, int)
        origin = Origin(source, index, layer, first)
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
        if quotas:
            state.quotas[entity] = quotas
            if entity.has_default:
                state.with_default.add(entity)
            if state.absent:
                state.absent.discard(entity)
        else:  # an override removed every key: the entity must not exist
            state.quotas.pop(entity, None)
            state.absent.add(entity)
            self.removed[entity] = origin

    def check_names(self, source: SourceFile, loc: Loc, entity: Entity) -> bool:
        """Names a reviewer can read: a control or invisible character (a tab, a bidi mark) may be
        part of a name only as a visible escape in a double-quoted string (``"a\\u202eb"``); raw
        in the file it would make the manifest read differently from what it sends."""
        for entity_type, name in entity.parts:
            if name is None or name.isprintable():
                continue  # the common case needs no closer look
            # TAB, LF and CR are also YAML layout: written raw they show in any diff as what they are
            raw = next((ch for ch in name if not ch.isprintable() and ch not in "\t\n\r"
                        and ch in source.text), None)
            problem = name_problem(raw) if raw is not None else None
            if raw is not None and problem is not None:
                self.report(source, Pending(
                    "KQP106", f"{entity_type} name {problem}, written raw in the file", (*loc, entity_type),
                    hint=f"write the name in double quotes with the character escaped "
                    f"(\"...{visible(raw)}...\") so reviewers see it, or use the plain name"))
                return False
        return True

    def add_custom_part(self, source: SourceFile, loc: Loc, extra: str, value: Any,
                        parts: list[tuple[str, Name]]) -> bool:
        """An entity field that is not a built-in one: a declared custom type, or a mistake."""
        custom_types = self.config.custom_entity_types
        if extra in custom_types and isinstance(value, str):
            parts.append((extra, unescape_name(value)))
            return True
        if extra in custom_types:
            self.report(source, Pending("KQP021", f"{extra} name must be a string", (*loc, extra)))
            return False
        choices = (*_ENTRY_FIELDS, *sorted(custom_types))
        guess = did_you_mean(extra, choices)
        self.report(source, Pending(
            "KQP020", f"unknown field '{extra}' in entity", (*loc, extra), at_key=True,
            hint=f"did you mean '{guess}'?" if guess else
            f"entity fields: {', '.join(choices)} (declare custom entity types "
            "under [custom] entity-types in kqplan.toml)"))
        return False

    def check_entity(self, source: SourceFile, loc: Loc, entity: Entity) -> bool:
        if entity.kind is EntityKind.CUSTOM:
            for entity_type, name in entity.parts:
                if name == "":
                    self.report(source, Pending("KQP101", f"empty {entity_type} name",
                                                (*loc, entity_type)))
                    return False
            return True
        problem = entity_error(entity.parts)
        if problem is not None:
            if "combination" in problem:
                self.report(source, Pending(
                    "KQP103", "ip cannot be combined with user or client-id", loc,
                    hint="ip quotas (connection_creation_rate) stand alone; split this entry"))
            else:
                bad = next((t for t, n in entity.parts if n == ""), None)
                self.report(source, Pending(
                    "KQP101", f"empty {bad} name (Kafka: \"{problem}\")",
                    (*loc, bad) if bad else loc,
                    hint=f"write `{bad}: <default>` for the default {bad}" if bad else None))
            return False
        if IP in entity:
            name = entity.name(IP)
            # Offline: refuse what the JDK refuses as a literal, and names no resolver takes
            # (digits and dots that are no address, whitespace); other host names need DNS.
            verdict = literal_verdict(name) if name is not None else True
            if verdict is False or (verdict is None and name is not None and (
                    all(c.isdigit() or c == "." for c in name) or any(c.isspace() for c in name))):
                self.report(source, Pending(
                    "KQP105", f"'{name}' is not a valid IP address", (*loc, IP),
                    hint="write an IPv4/IPv6 address or a resolvable host name"))
                return False
        return True

    def value(self, source: SourceFile, loc: Loc, key: str, raw: Any) -> float | None:
        """A valid value for a known key, memoized: big manifests repeat a few values."""
        cache_key = (key, raw.__class__, raw)  # the class keeps 1, 1.0 and True apart
        cached = self.values.get(cache_key)
        if cached is not None:
            return cached
        value = self.parse_value(source, loc, key, raw)
        if value is None or (key in QUOTA_KEYS and not self.check_value(source, loc, key, value)):
            return None
        if abs(value) <= _EXACT_DOUBLE_LIMIT:  # larger ones carry a per-use warning
            self.values[cache_key] = value
        return value

    def entity_quotas(self, source: SourceFile, loc: Loc, entity: Entity, kind: EntityKind,
                      raw: dict[str, Any], *, earlier: dict[str, float] | None = None
                      ) -> dict[str, float] | None:
        """The entry's quotas (over ``earlier`` for an override); None after reporting a problem."""
        custom = kind is EntityKind.CUSTOM
        valid_keys = keys_for(kind)
        quotas: dict[str, float] = dict(earlier) if earlier is not None else {}
        ok = True
        profile = raw.get("profile")
        if profile is not None:
            inherited = self.apply_profile(source, loc, entity, profile, quotas)
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
                continue
            if key not in valid_keys and not self.key_allowed(source, kloc, entity, key, custom):
                ok = False
                continue
            value = self.value(source, kloc, key, value_raw)
            if value is None:
                ok = False
                continue
            quotas[_KEY_NAMES.get(key, key)] = value
        if ok and not quotas and earlier is None:
            self.report(source, Pending(
                "KQP118", f"entity {entity.display} sets no quotas", loc,
                hint="add a `quotas:` map or a `profile:`; to delete an entity from the cluster, "
                "remove it from the manifests and use ownership.prune"))
            return None
        return quotas if ok else None

    def key_allowed(self, source: SourceFile, loc: Loc, entity: Entity, key: str,
                    custom: bool) -> bool:
        """A key outside the entity kind's built-in set: custom (allowed) or an error."""
        if custom or key in self.config.custom_keys:
            return True
        valid_keys = keys_for(entity.kind)
        if key in QUOTA_KEYS:
            self.report(source, Pending(
                "KQP111", f"{key} does not apply to {_kind_name(entity)} entities", loc,
                at_key=True, hint=f"{_kind_name(entity)} entities take {', '.join(valid_keys)}"))
        else:
            self.unknown_key(source, loc, key, valid_keys or list(QUOTA_KEYS))
        return False

    def apply_profile(self, source: SourceFile, loc: Loc, entity: Entity, profile: str,
                      quotas: dict[str, float]) -> bool | None:
        """Start ``quotas`` from a profile; None if the profile does not exist."""
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
        for key, inherited in found.quotas.items():
            if kind is not EntityKind.CUSTOM and key in QUOTA_KEYS and key_error(key, kind):
                self.report(source, Pending(
                    "KQP111", f"profile '{profile}' sets {key}, which {_kind_name(entity)} "
                    f"entities do not take", (*loc, "profile"),
                    hint=f"{_kind_name(entity)} entities take {', '.join(keys_for(kind))}"))
                ok = False
            quotas[key] = inherited
        return ok

    def check_guard_known(self) -> None:
        """With an inventory, a ``cluster:`` guard must name one of its clusters (or an id)."""
        clusters = self.config.clusters
        if self.guard is None or not clusters:
            return
        guard, source, loc = self.guard
        if guard in clusters or any(e.id == guard for e in clusters.values()):
            return
        guess = did_you_mean(guard, clusters)
        self.report(source, Pending(
            "KQP141", f"cluster '{guard}' is not in the inventory ({self.config.source})", loc,
            hint=f"did you mean '{guess}'?" if guess else
            f"clusters: {', '.join(sorted(clusters))}; or add [clusters.{guard}] to kqplan.toml"))

    # -- a sliced file read whole after all --------------------------------------------------
    def mark(self, item: LoadedManifest) -> _Mark:
        """Where the compile stands before ``item``, a sliced file, adds anything; starts the journal."""
        self.journal = []
        return _Mark(item.source, len(self.pending), len(self.profiles), len(self.scopes), self.guard)

    def saved(self, entity: Entity) -> _Saved:
        state = self.state
        return _Saved(entity, state.origins.get(entity), state.quotas.get(entity),
                      state.metadata.get(entity), self.removed.get(entity),
                      (entity in state.absent, entity in state.protected, entity in state.with_default))

    def undo(self, mark: _Mark) -> None:
        """Everything added since ``mark``: the file's entities, the overrides it made (restored
        from the journal), its profiles, scope and guard, every problem reported since (profiles
        read ahead meanwhile included: the caller adds them again, in file order)."""
        state = self.state
        for saved in reversed(self.journal or ()):
            saved.restore(self)
        self.journal = None
        for entity in [e for e, o in state.origins.items() if o.source is mark.source]:
            _Saved(entity, None, None, None, None, (False, False, False)).restore(self)  # gone
        del self.pending[mark.pending:]
        for name in list(self.profiles)[mark.profiles:]:
            del self.profiles[name]
        del self.scopes[mark.scopes:]
        self.guard = mark.guard

    def finish(self) -> DesiredState:
        self.check_guard_known()
        self.state.ownership = Ownership.of(self.scopes)
        self.state.cluster_guard = self.guard[0] if self.guard else None
        self.state.diagnostics.extend(locate(source, p) for source, p in self.pending)
        self.state.diagnostics.sort(key=sort_key)
        return self.state


_SHARED_LIMIT = 4096  # distinct quota sets kept for sharing: a manifest of unique values pays little
_ORIGIN_NEW = functools.partial(tuple.__new__, Origin)


def _name(text: str | None) -> Name:
    """A name as read from a plain list (:mod:`kqplan.manifest.plain`): ``<default>`` is None."""
    return None if text == DEFAULT_NAME else text


_V = TypeVar("_V")


class _Mark(NamedTuple):
    source: SourceFile
    pending: int
    profiles: int
    scopes: int
    guard: tuple[str, SourceFile, Loc] | None


class _Saved(NamedTuple):
    """One entity's compiled state (None: absent), as an override found it."""

    entity: Entity
    origin: Origin | None
    quotas: dict[str, float] | None
    metadata: Metadata | None
    removed: Origin | None
    sets: tuple[bool, bool, bool]
    """Membership of ``absent``, ``protected`` and ``with_default``."""

    def restore(self, compiler: _Compiler) -> None:
        state, entity = compiler.state, self.entity
        _put(state.origins, entity, self.origin)
        _put(state.quotas, entity, self.quotas)
        _put(state.metadata, entity, self.metadata)
        _put(compiler.removed, entity, self.removed)
        for members, present in zip((state.absent, state.protected, state.with_default), self.sets,
                                    strict=True):
            (members.add if present else members.discard)(entity)


def _put(table: dict[Entity, _V], entity: Entity, value: _V | None) -> None:
    if value is None:
        table.pop(entity, None)
    else:
        table[entity] = value


def _metadata(raw: Any) -> Metadata | None:
    """A ``metadata:`` mapping (shape checked by pydantic already) as a value."""
    if not isinstance(raw, dict):
        return None
    labels = raw.get("labels") or {}
    description = raw.get("description")
    return Metadata.of({str(k): str(v) for k, v in labels.items()},
                       description if isinstance(description, str) else None)


def _kind_name(entity: Entity) -> str:
    return "ip" if entity.kind is EntityKind.IP else "user/client-id"


def compile_manifests(loaded: Iterable[LoadedManifest], config: ProjectConfig, *,
                      layers: Iterable[int] | None = None) -> DesiredState:
    """Profiles, guard, ownership and entities of each file in turn, layer by layer
    (``layers[i]`` is the layer of ``loaded[i]``; all 0 when not given)."""
    if layers is None:
        return _compile(((item, 0) for item in loaded), config)
    return _compile(zip(loaded, layers, strict=True), config)


def _compile(files: Iterable[tuple[LoadedManifest, int]], config: ProjectConfig) -> DesiredState:
    """Each file is asked for only when the one before is compiled (its parsed entries let go as
    they compile), so a lazy ``files`` (:func:`kqplan.manifest.loader.iter_load`) holds one batch
    parsed at a time. Any file may use any file's profile: the first entry naming a profile not
    seen yet reads the remaining files (and their profiles) first, which keeps every outcome and
    message as if all profiles came first."""
    compiler = _Compiler(config)
    stream = iter(files)
    ahead: deque[tuple[LoadedManifest, int]] = deque()

    def read_rest() -> None:
        compiler.read_rest = None
        for item, layer in stream:
            settled = _settled(item)
            if settled is not None:
                compiler.add_profiles(settled)
                ahead.append((settled, layer))

    compiler.read_rest = read_rest
    count = 0
    try:
        while True:
            mark = None
            if ahead:
                item, layer = ahead.popleft()  # its profiles were added, and a sliced one checked
            else:
                following = next(stream, None)
                if following is None:
                    break
                item, layer = following
                if item.raw.get("entities").__class__ is SlicedEntries:
                    mark = compiler.mark(item)
                compiler.add_profiles(item)
            compiler.add_guard(item)
            compiler.add_ownership(item)
            try:
                compiler.add_entities(item, layer)
            except Unsliceable:
                assert mark is not None
                count += _read_whole(compiler, mark, item, layer, ahead)
            else:
                compiler.journal = None
                count += 1
            del item
    finally:
        # read_rest refers to the compiler: left set, the cycle would keep the whole compiled
        # state alive until a collection walks it (measured: 0.34 s at 100k entities)
        compiler.read_rest = None
    compiler.state.files = count
    return compiler.finish()


def _settled(item: LoadedManifest) -> LoadedManifest | None:
    """``item`` with its slices known usual, else read whole (None: its problems are reported)."""
    entries = item.raw.get("entities")
    if entries.__class__ is not SlicedEntries or entries.check():
        return item
    whole: LoadedManifest | None = entries.whole()
    return whole


def _read_whole(compiler: _Compiler, mark: _Mark, item: LoadedManifest, layer: int,
                ahead: deque[tuple[LoadedManifest, int]]) -> int:
    """A sliced file found unusual midway: undo it and compile it read whole, as if it had never
    been sliced; 1 if it compiled, 0 if reading it whole found it invalid (already reported)."""
    compiler.undo(mark)
    entries = item.raw.get("entities")
    assert isinstance(entries, SlicedEntries)
    whole = entries.whole()
    if whole is not None:
        compiler.add_profiles(whole)
    for later, _ in ahead:  # profiles read ahead while the sliced file compiled: after its own
        compiler.add_profiles(later)
    if whole is None:
        return 0
    compiler.add_guard(whole)
    compiler.add_ownership(whole)
    compiler.add_entities(whole, layer)
    return 1


def load_desired(paths: Sequence[Path], config: ProjectConfig) -> DesiredState:
    """Load, shape-check and compile manifests; ``.diagnostics`` holds every problem found.

    Each path is a layer, in order: an entity of a later layer may override the same entity of
    an earlier one with ``override: true`` (a cluster's ``manifests`` in kqplan.toml are layers).
    Files are read one at a time as they compile (:func:`kqplan.manifest.loader.iter_load`).
    """
    diagnostics: list[Diagnostic] = []
    seen: set[Path] = set()

    def files() -> Iterator[tuple[LoadedManifest, int]]:
        for layer, path in enumerate(paths):
            for item in iter_load([path], config, diagnostics):
                key = Path(item.source.path).resolve()
                if key in seen:  # a file in two layers (nested paths) is read once, in the first
                    continue
                seen.add(key)
                yield item, layer

    with paused_gc():
        state = _compile(files(), config)
    state.files += len(diagnostics and {d.span.path for d in diagnostics})
    state.diagnostics = sorted([*diagnostics, *state.diagnostics], key=sort_key)
    if not state.errors:
        from kqplan.core.policy import policy_diagnostics

        state.diagnostics = sorted([*state.diagnostics, *policy_diagnostics(state, config.policy)],
                                   key=sort_key)
    return state
