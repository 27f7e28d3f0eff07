"""A plain entity list read straight from its text, without parsing it as YAML (issue 15).

Big manifests are mostly machine-written lists of one shape (``kqplan export`` writes it)::

    entities:
      - user: alice
        client-id: app
        quotas: {producer_byte_rate: 1MiB, consumer_byte_rate: 2097152}
      - user: bob
        quotas:
          producer_byte_rate: 1048576

Parsing that builds a Python object for every scalar, and compile then reads them one by one
(0.5 s for 100k entities). A file of :data:`PLAIN_FILE_CHARS` or more whose *whole* list has
that shape is read here by one regex split instead (a file big enough to be read in slices,
each slice of that shape: :mod:`kqplan.manifest.fast.slices`). Each item is a ``user`` line and/or a
``client-id`` line, in that order, then ``quotas:`` with ``key: value`` pairs of plain values,
in a flow mapping on its line or one per line below it; names are letters, digits and
``._@-``, start with a letter and spell no YAML keyword, or are ``<default>``; nothing else
anywhere in the list (a comment, quote, blank line, tab, CR, anchor, other field, other order).
Every name so spelled is the string YAML reads (core schema or 1.1), and each distinct
``quotas`` text (files repeat a few tiers) is parsed by yaml_rs itself, once, so the entries
equal what the whole parse gives (``tests/manifest/fast/plain_test.py`` compares the two on
generated files, whole and sliced). A list with anything else in it is parsed, as before.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterator
from typing import Any

import yaml_rs

from kqplan.manifest.head import ManifestHead, document_head
from kqplan.manifest.items import entity_list

PLAIN_FILE_CHARS = 64 << 10
"""Files from this size are tried here (a small file parses in well under a millisecond)."""

_NAME = r"[A-Za-z][A-Za-z0-9._@-]*|<default>"
_KEYWORDS = ("null", "true", "false", "yes", "no", "on", "off", "y", "n", "nan", "inf", "infinity")
"""Words YAML 1.2 or 1.1 may read as other than a string, in any case (``NULL``, ``True``): a
name spelled so is not plain (yaml_rs reads only null, true and false so; the rest are margin)."""
_VALUE_TYPES = (int, float, str)  # what the plain shape check passes as a quota value (not null)


class PlainEntries:
    """A file's entity list as read from its text: the names of each entry, and its ``quotas``
    block's text, whose parsed form (:attr:`tiers`) the entries share."""

    __slots__ = ("blocks", "clients", "only_clients", "tiers", "users")

    def __init__(self, users: list[str | None], clients: list[str | None],
                 only_clients: list[str | None], blocks: list[str], tiers: dict[str, dict[str, Any]]) -> None:
        self.users, self.clients, self.only_clients = users, clients, only_clients
        """Per entry: ``user``, the ``client-id`` beside it, or the ``client-id`` alone (else None)."""
        self.blocks, self.tiers = blocks, tiers
        """Per entry its ``quotas`` block's text; per distinct text, the mapping yaml_rs reads."""

    def __len__(self) -> int:
        return len(self.blocks)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """Each entry as the whole-file parse gives it (for compile's entry-by-entry path)."""
        tiers = self.tiers
        for user, client, only, block in zip(self.users, self.clients, self.only_clients, self.blocks,
                                             strict=True):
            quotas = dict(tiers[block])
            if only is not None:
                yield {"client-id": only, "quotas": quotas}
            elif client is None:
                yield {"user": user, "quotas": quotas}
            else:
                yield {"user": user, "client-id": client, "quotas": quotas}

    def __setitem__(self, index: int, value: object) -> None:
        """Compile lets each parsed entry go once compiled: there is none to let go here."""


def read_plain(text: str, alias_limits: Any) -> tuple[ManifestHead, dict[str, Any]] | None:
    """The document-level fields and the raw document (its ``entities`` a :class:`PlainEntries`)
    of a manifest whose whole entity list is plain; None for any other."""
    found = entity_list(text)
    if found is None:
        return None
    head, first, item, end = found
    entries = plain_entries(text, first, end, len(item) - 3, alias_limits)  # "\n", the column, "- "
    if entries is None:
        return None
    read = document_head(text, head, end, alias_limits)
    if read is None:
        return None
    document, raw = read
    raw["entities"] = entries
    return document, raw


def plain_entries(text: str, start: int, end: int, indent: int, alias_limits: Any) -> PlainEntries | None:
    """The items of a block list at column ``indent`` that ``text[start:end]`` holds (whole
    items, from the first's ``-``), when all are plain; None otherwise."""
    entry = _entry_pattern(indent)
    # Cheapest refusal first: most lists that are not plain show it in their first entry.
    if entry.match(text, start) is None:
        return None
    listed = text[start:end]
    if not listed.endswith("\n"):  # the last line of the file, unterminated
        listed += "\n"
    pieces = entry.split(listed)
    # split() alternates the text between matches with the 4 groups of each: the items must
    # follow one another with nothing between them (no line inside a match starts an item)
    if any(pieces[::5]):
        return None
    users, clients, only, blocks = pieces[1::5], pieces[2::5], pieces[3::5], pieces[4::5]
    if not (_keywords().isdisjoint(users) and _keywords().isdisjoint(clients)
            and _keywords().isdisjoint(only)):
        return None
    tiers = _tiers(blocks, alias_limits)
    if tiers is None:
        return None
    return PlainEntries(users, clients, only, blocks, tiers)


@functools.cache
def _keywords() -> frozenset[str]:
    """Every spelling of :data:`_KEYWORDS` in any mix of cases (370 strings)."""
    return frozenset("".join(spelling) for word in _KEYWORDS
                     for spelling in itertools.product(*({c.lower(), c.upper()} for c in word)))


@functools.lru_cache(maxsize=8)
def _entry_pattern(indent: int) -> re.Pattern[str]:
    """One item of a list whose items start at column ``indent`` (groups: user, client-id beside
    it, client-id alone, what follows ``quotas:`` — a flow mapping on its line, or the lines of a
    block mapping, each deeper than the item's keys)."""
    item = " " * indent + "- "
    keys = " " * (indent + 2)
    pair = r"[a-z_]+: [0-9A-Za-z.+-]+"
    return re.compile(
        rf"{item}(?:user: ({_NAME})\n(?:{keys}client-id: ({_NAME})\n)?|client-id: ({_NAME})\n)"
        rf"{keys}quotas:( \{{{pair}(?:, {pair})*\}}\n|\n(?: {{{indent + 3},}}{pair}\n)+)")


def _tiers(blocks: list[str], alias_limits: Any) -> dict[str, dict[str, Any]] | None:
    """Each distinct ``quotas`` text as yaml_rs reads it, all in one parse: each text a list
    item, whose lines are deeper than its ``-`` as they are deeper than ``quotas:`` in the file,
    so it reads as it does there (uneven lines or a repeated key are a YAML error in both
    places). None if one is not a mapping of plain quota values."""
    distinct = list(dict.fromkeys(blocks))
    try:
        parsed = yaml_rs.loads("".join(["-" + block for block in distinct]), parse_datetime=False,
                               alias_limits=alias_limits)
    except yaml_rs.YAMLDecodeError:
        return None  # the whole parse reports it where it is
    if parsed.__class__ is not list or len(parsed) != len(distinct):
        return None
    for quotas in parsed:
        if quotas.__class__ is not dict or not all(
                key.__class__ is str and value.__class__ in _VALUE_TYPES for key, value in quotas.items()):
            return None
    return dict(zip(distinct, parsed, strict=True))
