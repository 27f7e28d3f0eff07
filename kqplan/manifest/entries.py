"""The checks of one entity entry that are not about quota values: its names (readable, no raw
control characters), its entity (Kafka's combination rules, ip addresses), extra fields (a
declared custom type or a mistake), and whether a key applies to its kind."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kqplan.core.diagnostics import Loc, Pending, did_you_mean
from kqplan.core.entity import IP, Entity, EntityKind, Name, name_problem, unescape_name, visible
from kqplan.core.ipnames import literal_verdict
from kqplan.core.quotas import QUOTA_KEYS, entity_error, keys_for
from kqplan.manifest.compiling import Compiling
from kqplan.manifest.source import SourceFile

ENTRY_FIELDS = ("user", "client-id", "ip", "profile", "override", "protect", "expires", "metadata", "quotas")


ENTRY_FIELD_SET = frozenset(ENTRY_FIELDS)


class EntryChecks(Compiling):
    """The entry checks' part of the compiler."""

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
        choices = (*ENTRY_FIELDS, *sorted(custom_types))
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

    def key_allowed(self, source: SourceFile, loc: Loc, entity: Entity, key: str,
                    custom: bool) -> bool:
        """A key outside the entity kind's built-in set: custom (allowed) or an error."""
        if custom or key in self.config.custom_keys:
            return True
        valid_keys = keys_for(entity.kind)
        if key in QUOTA_KEYS:
            self.report(source, Pending(
                "KQP111", f"{key} does not apply to {kind_name(entity)} entities", loc,
                at_key=True, hint=f"{kind_name(entity)} entities take {', '.join(valid_keys)}"))
        else:
            self.unknown_key(source, loc, key, valid_keys or list(QUOTA_KEYS))
        return False

    def unknown_key(self, source: SourceFile, loc: Loc, key: str, choices: Sequence[str]) -> None:
        guess = did_you_mean(key, choices)
        hint = f"did you mean '{guess}'?" if guess else f"valid keys: {', '.join(choices)}"
        if not guess:
            hint += " (declare custom keys under [custom] keys in kqplan.toml)"
        self.report(source, Pending("KQP110", f"unknown quota key '{key}'", loc, at_key=True,
                                    hint=hint))


def kind_name(entity: Entity) -> str:
    return "ip" if entity.kind is EntityKind.IP else "user/client-id"
