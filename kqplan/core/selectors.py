"""KIP-546's entity flags: ``--names type=name,...``, ``--defaults type,...``, ``--any type,...``.

Names are opaque strings, as in the KIP; ``\\`` escapes a comma (``\\,``), a backslash (``\\\\``)
or a leading ``<`` (``\\<default>`` is a principal literally named ``<default>``). A bare
``<default>`` in ``--names`` is refused: the default entity is ``--defaults TYPE``.
"""

from __future__ import annotations

from collections.abc import Sequence

from kqplan.core.cluster import DescribeFilter, FilterComponent, MatchType
from kqplan.core.entity import BUILTIN_TYPES, DEFAULT_NAME, Entity, Name
from kqplan.core.errors import KqplanError


def split_escaped(text: str) -> list[str]:
    """Split on commas not preceded by a backslash; keep escapes for the next step."""
    parts, current, escaped = [], [], False
    for ch in text:
        if escaped:
            current.append("\\" + ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == ",":
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if escaped:
        current.append("\\")
    parts.append("".join(current))
    return parts


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            out.append(text[i + 1])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _check_type(entity_type: str, flag: str, custom: frozenset[str]) -> str:
    entity_type = entity_type.strip()
    if entity_type in BUILTIN_TYPES or entity_type in custom:
        return entity_type
    raise KqplanError(f"{flag}: unknown entity type '{entity_type}'",
                      hint=f"entity types: {', '.join(BUILTIN_TYPES)}")


def parse_names(text: str | None, *, custom: frozenset[str] = frozenset()) -> list[tuple[str, str]]:
    """``user=alice,client-id=app`` → ``[("user", "alice"), ("client-id", "app")]``."""
    if not text:
        return []
    pairs = []
    for item in split_escaped(text):
        entity_type, sep, raw_name = item.partition("=")
        if not sep:
            raise KqplanError(f"--names: '{item}' is not TYPE=NAME",
                              hint="e.g. --names user=alice,client-id=app")
        if raw_name == DEFAULT_NAME:
            raise KqplanError(
                f"--names: '{item}' is ambiguous",
                hint=f"for the default {entity_type} use --defaults {entity_type}; for a principal "
                f"literally named <default> write --names '{entity_type}=\\<default>'")
        name = _unescape(raw_name)
        if name == "":
            raise KqplanError(f"--names: empty name for {entity_type}",
                              hint=f"for the default entity use --defaults {entity_type}")
        pairs.append((_check_type(entity_type, "--names", custom), name))
    return pairs


def parse_types(text: str | None, flag: str, *, custom: frozenset[str] = frozenset()) -> list[str]:
    if not text:
        return []
    return [_check_type(t, flag, custom) for t in text.split(",") if t.strip()]


def _no_repeats(types: Sequence[str]) -> None:
    seen: set[str] = set()
    for t in types:
        if t in seen:
            raise KqplanError(f"entity type '{t}' is given more than once")
        seen.add(t)


def entity_from_flags(names: str | None, defaults: str | None, *,
                      custom: frozenset[str] = frozenset()) -> Entity:
    """The one entity that ``--names``/``--defaults`` designate (alter, resolve)."""
    pairs: list[tuple[str, Name]] = list(parse_names(names, custom=custom))
    pairs += [(t, None) for t in parse_types(defaults, "--defaults", custom=custom)]
    if not pairs:
        raise KqplanError("no entity given", hint="use --names TYPE=NAME,... and/or --defaults TYPE,...")
    _no_repeats([t for t, _ in pairs])
    return Entity.of(pairs)


def filter_from_flags(names: str | None, defaults: str | None, any_types: str | None, *,
                      strict: bool, custom: frozenset[str] = frozenset()) -> DescribeFilter:
    """A DescribeClientQuotas filter: names EXACT, defaults DEFAULT, ``--any`` SPECIFIED."""
    components = [FilterComponent(t, MatchType.EXACT, n) for t, n in parse_names(names, custom=custom)]
    components += [FilterComponent(t, MatchType.DEFAULT) for t in
                   parse_types(defaults, "--defaults", custom=custom)]
    components += [FilterComponent(t, MatchType.SPECIFIED) for t in
                   parse_types(any_types, "--any", custom=custom)]
    _no_repeats([c.entity_type for c in components])
    return DescribeFilter(tuple(components), strict)


def matches(flt: DescribeFilter, entity: Entity) -> bool:
    """Kafka's filter matching (ClientQuotasImage.matches; reference §3.2).

    EXACT compares names literally (null only matches DEFAULT); SPECIFIED matches any name,
    the default included; strict means the entity has no other types.
    """
    if flt.strict and len(entity) != len(flt.components):
        return False
    for c in flt.components:
        if c.entity_type not in entity:
            return False
        if c.match_type is not MatchType.SPECIFIED and entity.name(c.entity_type) != c.match:
            return False
    return True
