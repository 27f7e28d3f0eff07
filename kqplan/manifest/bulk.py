"""The bulk path of compile: plain entries (``user``/``client-id`` with plain names and quotas
already seen valid), one at a time (:meth:`BulkPath.add_plain`) or a whole list read from its
text at once (:meth:`BulkPath.add_plain_list`). It adds only what the general path
(:mod:`kqplan.manifest.compiler`) would add, and answers False for anything else, which that path
then takes: the one place rules and messages live."""

from __future__ import annotations

import functools
import itertools
from typing import Any

from kqplan.core.desired import Origin
from kqplan.core.entity import CLIENT_ID, DEFAULT_NAME, USER, Name, canonical
from kqplan.core.quotas import CLIENT_KEYS
from kqplan.manifest.compiling import Compiling
from kqplan.manifest.fast.plain import PlainEntries
from kqplan.manifest.source import SourceFile

_SHARED_LIMIT = 4096  # distinct quota sets kept for sharing: a manifest of unique values pays little
_ORIGIN_NEW = functools.partial(tuple.__new__, Origin)
_CLIENT_KEY_NAMES = {key: key for key in CLIENT_KEYS}


class BulkPath(Compiling):
    """The bulk path's part of the compiler."""

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
        try:
            quotas = self.shared.get(items)
        except TypeError:  # a mapping among the values (a budget, {per-cluster: …}): the general path
            return False
        if quotas is None:
            cached = self.values.cache.get
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
        """A list read from its text (:mod:`kqplan.manifest.fast.plain`), all at once: what
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
            fresh = cache_key not in self.values.cache
            value = None if name is None else self.values.valid(source, ("entities",), key, value_raw)
            if name is None or value is None or len(self.pending) > reported:
                del self.pending[reported:]
                if fresh:  # a value cached with a warning (2^53 itself) would warn no more
                    self.values.cache.pop(cache_key, None)
                return None
            quotas[name] = value
        if len(self.shared) < _SHARED_LIMIT:
            self.shared[items] = quotas
        return quotas


def _name(text: str | None) -> Name:
    """A name as read from a plain list (:mod:`kqplan.manifest.fast.plain`): ``<default>`` is None."""
    return None if text == DEFAULT_NAME else text


_ABSENT: Any = object()
