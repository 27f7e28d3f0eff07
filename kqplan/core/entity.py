"""Quota entities: an immutable map of entity type to name, where ``None`` is the default.

The display form is KIP-546's: ``{user=alice, client-id=<default>}``, user first, then
client-id, then ip, then any custom types sorted. A principal literally named ``<default>``
is written ``\\<default>`` (a leading backslash escapes the name; ``\\\\x`` is ``\\x``), so the
display form and the manifest spelling never confuse a real name with the default entity.
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Any

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
BUILTIN_TYPES: tuple[str, ...] = (USER, CLIENT_ID, IP)
DEFAULT_NAME = "<default>"
_ORDER = {USER: 0, CLIENT_ID: 1, IP: 2}

Name = str | None
"""An entity name; ``None`` is the default entity of its type (null on the wire)."""


def _type_rank(entity_type: str) -> tuple[int, str]:
    return (_ORDER.get(entity_type, 3), entity_type)


def escape_name(name: Name) -> str:
    """Spell a name the way manifests, the CLI and the display form write it."""
    if name is None:
        return DEFAULT_NAME
    if name == DEFAULT_NAME or name.startswith("\\"):
        return "\\" + name
    return name


def unescape_name(text: str) -> Name:
    """Inverse of :func:`escape_name`: ``<default>`` is the default, ``\\x`` is the name ``x``."""
    if text == DEFAULT_NAME:
        return None
    if text.startswith("\\"):
        return text[1:]
    return text


def visible(text: str) -> str:
    """``text`` with every non-printable character (controls, ESC, CR/LF, bidi and other invisible
    format characters) written as an escape (``\\n``, ``\\u202e``): what a reviewer reads in a
    plan is what will be sent, and no name can forge lines or reorder text on a terminal."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


_UNRESERVED = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")


def sanitize(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize``, how a user name is written in ZooKeeper paths and in the
    ``user`` tag of quota metrics: ``URLEncoder.encode(name, UTF-8)`` with ``*`` as ``%2A`` and the
    space as ``%20`` (URLEncoder keeps ``a-zA-Z0-9.-*_`` and writes a space as ``+``)."""
    out: list[str] = []
    for char in name:
        if char in _UNRESERVED:
            out.append(char)
        else:  # URLEncoder writes an unpaired surrogate as "?"
            data = char.encode("utf-8", "replace") if not 0xD800 <= ord(char) <= 0xDFFF else b"?"
            out.append("".join(f"%{byte:02X}" for byte in data))
    return "".join(out)


def name_problem(name: str) -> str | None:
    """Why a manifest must not use this name (Kafka would accept it), or None."""
    if name.isprintable():
        return None
    bad = next(ch for ch in name if not ch.isprintable())
    return (f"contains U+{ord(bad):04X}, a control or invisible character (shown as "
            f"{visible(bad)})")


class EntityKind(StrEnum):
    """Which family of quota keys an entity takes (Kafka's ``configKeysForEntityType``)."""

    CLIENT = "client"  # user and/or client-id
    IP = "ip"
    CUSTOM = "custom"  # declared in project config; keys pass through unvalidated
    INVALID = "invalid"  # empty, or ip combined with user/client-id


_KINDS: dict[tuple[str, ...], EntityKind] = {
    (): EntityKind.INVALID,
    (USER,): EntityKind.CLIENT,
    (CLIENT_ID,): EntityKind.CLIENT,
    (USER, CLIENT_ID): EntityKind.CLIENT,
    (IP,): EntityKind.IP,
}


if TYPE_CHECKING:
    class _Pairs:
        """What a type checker sees of an entity's base: an immutable, hashable sequence of
        (type, name) pairs. At run time it is ``tuple`` itself (whose ``in`` would ask for a
        pair, where an entity's asks for a type: the facade keeps checkers from mixing them)."""

        def __iter__(self) -> Iterator[tuple[str, Name]]: ...
        def __len__(self) -> int: ...
        def __getitem__(self, index: int) -> tuple[str, Name]: ...
        def __hash__(self) -> int: ...
        def __eq__(self, other: object) -> bool: ...
else:
    _Pairs = tuple

_new_tuple: Any = tuple.__new__
_name_of = operator.itemgetter(1)
_tuple_repr: Any = tuple.__repr__


class Entity(_Pairs):
    """A quota entity. Build it with :meth:`of`; equality does not depend on order.

    Underneath, the tuple of its (type, name) pairs in display order, each type at most once
    (``parts``): hashing and equality run in C — every state lookup of a plan ends in them — and
    an entity takes no more memory than its pairs. Immutable, as a tuple is.
    """

    __slots__ = ()

    def __new__(cls, parts: Iterable[tuple[str, Name]] = ()) -> Entity:
        self: Entity = _new_tuple(cls, parts)
        if len(self) < 2:
            return self
        # Equality and hashing compare the pairs, so their order must be canonical however built;
        # the check is cheap because almost every entity is built in order already.
        types = tuple([t for t, _ in self])
        if types in _KINDS or all(_type_rank(a) < _type_rank(b) for a, b in itertools.pairwise(types)):
            return self
        ordered: Entity = _new_tuple(cls, sorted(dict(self).items(), key=lambda p: _type_rank(p[0])))
        return ordered

    def __repr__(self) -> str:
        return f"Entity(parts={_tuple_repr(self)})"

    @classmethod
    def canonical(cls, parts: tuple[tuple[str, Name], ...]) -> Entity:
        """An entity of pairs known to be canonical — distinct types in display order, as one
        pair always is — built without the check (the bulk paths; see :data:`canonical`)."""
        return canonical(parts)

    @property
    def parts(self) -> tuple[tuple[str, Name], ...]:
        """(type, name) pairs in display order; each type at most once (the entity itself)."""
        return self  # type: ignore[return-value]  # a tuple at run time (see _Pairs)

    @classmethod
    def of(cls, entries: Mapping[str, Name] | Iterable[tuple[str, Name]]) -> Entity:
        """Build an entity from a type→name mapping or pairs (a repeated type: last wins)."""
        return cls(entries.items() if isinstance(entries, Mapping) else entries)

    @classmethod
    def user(cls, name: Name) -> Entity:
        return cls(((USER, name),))

    @classmethod
    def client(cls, name: Name) -> Entity:
        return cls(((CLIENT_ID, name),))

    @classmethod
    def user_client(cls, user: Name, client_id: Name) -> Entity:
        return cls(((USER, user), (CLIENT_ID, client_id)))

    @classmethod
    def ip(cls, name: Name) -> Entity:
        return cls(((IP, name),))

    @property
    def types(self) -> tuple[str, ...]:
        return tuple([t for t, _ in self])

    def __contains__(self, entity_type: object) -> bool:
        """Whether the entity has this entity type (not: this pair)."""
        return any(t == entity_type for t, _ in self)

    def name(self, entity_type: str) -> Name:
        """The name for ``entity_type``; raises KeyError when the type is absent."""
        for t, n in self.parts:
            if t == entity_type:
                return n
        raise KeyError(entity_type)

    def get(self, entity_type: str, default: Name = None) -> Name:
        for t, n in self.parts:
            if t == entity_type:
                return n
        return default

    @property
    def kind(self) -> EntityKind:
        types = tuple([t for t, _ in self])
        kind = _KINDS.get(types)  # the built-in combinations, all in canonical order
        if kind is None:
            kind = (EntityKind.INVALID if IP in types and (USER in types or CLIENT_ID in types)
                    else EntityKind.CUSTOM)
        return kind

    @property
    def has_default(self) -> bool:
        return None in map(_name_of, self)  # in C: lint asks it of every entry

    @property
    def display(self) -> str:
        """KIP-546's form, e.g. ``{user=alice, client-id=<default>}``."""
        # A plain name (printable, not "<default>", no leading backslash) is shown as is: the
        # test runs inline, as plans show every changed entity.
        return "{" + ", ".join([
            f"{t}={n}" if n is not None and n.isprintable() and n != DEFAULT_NAME and n[:1] != "\\"
            else f"{t}={visible(escape_name(n))}" for t, n in self.parts]) + "}"

    def __str__(self) -> str:
        return self.display

    def to_json(self) -> dict[str, Name]:
        """JSON form used by plans, snapshots and reports: ``null`` is the default entity."""
        return dict(self.parts)

    @classmethod
    def from_json(cls, data: Mapping[str, Name]) -> Entity:
        return cls.of(data)

    def sort_key(self) -> str:
        """Deterministic order of changes and listings: the display form."""
        return self.display


canonical: Callable[[Iterable[tuple[str, Name]]], Entity] = functools.partial(_new_tuple, Entity)
""":meth:`Entity.canonical` as a C call: decoding a describe or compiling manifests builds one
entity per entry, mostly of a single pair (from a list as well: the tuple is made once)."""
