"""Cluster state → manifests that reproduce it (adoption): ``export`` then ``plan`` is "No changes".

Written by hand rather than with a YAML dumper because the round trip must be exact under
the YAML 1.2 reader kqplan loads with: a name like ``1e3``, ``0o17`` or ``true`` must stay a
string (pyyaml, a YAML 1.1 dumper, would leave some of them bare), and a value like
1235.0000001 must come back as the same double (``repr`` round-trips).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from kqplan.core.entity import BUILTIN_TYPES, DEFAULT_NAME, USER, Entity, escape_name
from kqplan.core.filenames import fit_name
from kqplan.core.quotas import QUOTA_KEYS, keys_for, value_error
from kqplan.core.state import QuotaState
from kqplan.core.units import format_number

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.@/+-]*$")
_YAML_WORDS = {"true", "false", "null", "yes", "no", "on", "off", "y", "n", "~"}
_UNITS = (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024),
          ("TB", 1000**4), ("GB", 1000**3), ("MB", 1000**2), ("KB", 1000))
SCHEMA_URL = "https://kqplan.dev/schemas/manifest-v1.json"
MODELINE = f"# yaml-language-server: $schema={SCHEMA_URL}"


class SplitBy(StrEnum):
    NONE = "none"
    USER = "user"

    @classmethod
    def found_in(cls, directory: Path) -> SplitBy:
        """The layout an export left in ``directory``: ``user`` when it holds ``users/`` or the
        files that layout writes beside it, else ``none``."""
        split = ("defaults.yaml", "no-user.yaml", "ownership.yaml")
        if (directory / "users").is_dir() or any((directory / f).is_file() for f in split):
            return cls.USER
        return cls.NONE


@dataclass(frozen=True, slots=True)
class ExportFile:
    name: str
    """Relative path inside the output directory."""
    text: str


@dataclass(frozen=True, slots=True)
class Skipped:
    entity: Entity
    key: str
    value: float
    reason: str


def yaml_string(text: str) -> str:
    """A YAML scalar that reads back as exactly ``text`` (a string) in YAML 1.2 and 1.1."""
    if (_PLAIN.fullmatch(text) and text.lower() not in _YAML_WORDS) or text == DEFAULT_NAME:
        return text
    if text.isprintable():
        return "'" + text.replace("'", "''") + "'"  # single quotes escape nothing but '
    # JSON strings are YAML double-quoted scalars. json.dumps escapes the C0 controls; what it
    # leaves raw (DEL, C1, bidi and zero-width marks) is escaped too, so the file reads as it means.
    quoted = json.dumps(text, ensure_ascii=False)
    return "".join(ch if ch.isprintable() else
                   f"\\u{ord(ch):04x}" if ord(ch) < 0x10000 else f"\\U{ord(ch):08x}" for ch in quoted)


def yaml_value(key: str, value: float) -> str:
    """Byte rates in the exact unit with the fewest digits (``50MiB``, ``1MB``, ``1000TB``;
    binary wins a tie), else the exact number."""
    spec = QUOTA_KEYS.get(key)
    if spec is not None and spec.bytes_per_second and math.isfinite(value) and value == int(value) \
            and value < 2**63:
        whole = int(value)
        exact = [(whole // size, unit) for unit, size in _UNITS if whole >= size and whole % size == 0]
        if exact:
            number, unit = min(exact, key=lambda item: len(str(item[0])))
            return f"{number}{unit}"
    return format_number(value)


def _expressible(entity: Entity, key: str, value: float) -> str | None:
    """Why a cluster value cannot be written in a manifest, or None if it can."""
    if not math.isfinite(value):
        return "NaN and infinity cannot be written in a manifest"
    if key not in keys_for(entity.kind):
        return "not a quota key for this kind of entity"
    return value_error(key, value)


def entity_lines(entity: Entity, quotas: dict[str, float],
                 skipped: Iterable[Skipped] = ()) -> list[str]:
    """One ``entities:`` item; values a manifest cannot hold are named in a comment above it."""
    lines = [f"  # not exported: {s.key}={s.value!r} on the cluster ({s.reason})" for s in skipped]
    for i, (entity_type, name) in enumerate(entity.parts):
        prefix = "  - " if i == 0 else "    "
        lines.append(f"{prefix}{entity_type}: {yaml_string(escape_name(name))}")
    body = ", ".join(f"{k}: {yaml_value(k, v)}" for k, v in sorted(quotas.items()))
    lines.append(f"    quotas: {{{body}}}")
    return lines


def _document(entries: Sequence[tuple[Entity, dict[str, float]]], guard: str | None, title: str,
              *, scope: Sequence[dict[str, str]] = (),
              skipped: Mapping[Entity, Sequence[Skipped]] | None = None) -> str:
    lines = [MODELINE, f"# {title}", "apiVersion: kqplan/v1", "kind: ClientQuotas"]
    if guard:
        lines.append(f"cluster: {yaml_string(guard)}")
    if scope:
        lines += ["ownership:  # adopted: entities in this scope that no manifest lists are deleted",
                  "  prune: true", "  scope:"]
        lines += ["    - {" + ", ".join(f"{t}: {yaml_string(g)}" for t, g in pattern.items()) + "}"
                  for pattern in scope]
    notes = dict(skipped or {})
    lines.append("entities:" if entries else "entities: []")
    for entity, quotas in entries:
        lines.extend(entity_lines(entity, quotas, notes.pop(entity, ())))
    for entity, lost in notes.items():  # nothing of the entity could be written: say so
        lines += [f"  # not exported: {entity.display} {s.key}={s.value!r} ({s.reason})" for s in lost]
    return "\n".join(lines) + "\n"


EXPORTED_FROM = "# Exported from "


def export_source(cluster_id: str | None) -> str:
    """How an export's header names the cluster it came from: ``cluster ID``, or ``the cluster``
    without an id. The id is written as it is (as exports always did) unless it holds a character
    that is not printable, a newline say, or starts with a quote: then as a quoted YAML scalar, so
    the header stays one line and two ids never read the same."""
    if not cluster_id:
        return "the cluster"
    raw = cluster_id.isprintable() and not cluster_id.startswith(("'", '"'))
    return f"cluster {cluster_id if raw else yaml_string(cluster_id)}"


def exported_from(text: str) -> str | None:
    """The cluster a file's header says export took it from (as :func:`export_source` writes
    it), or None when the file does not start as an exported manifest does."""
    head = [line.rstrip("\r") for line in text.removeprefix("\ufeff").split("\n", 2)[:2]]
    line = head[1] if head[0] == MODELINE and len(head) > 1 else head[0]
    if line.startswith(EXPORTED_FROM) and line.endswith("."):
        return line[len(EXPORTED_FROM):-1]
    return None


def adoption_scope(entities: Iterable[Entity]) -> list[dict[str, str]]:
    """Ownership patterns covering every exported entity: one per shape (types, default or named),
    so an adopted cluster is owned whole (and a pattern costs one match per entity, not a list)."""
    shapes: set[tuple[tuple[str, bool], ...]] = set()
    for entity in entities:
        shapes.add(tuple((t, n is None) for t, n in entity.parts))
    patterns = [{t: DEFAULT_NAME if default else "*" for t, default in shape} for shape in shapes]
    return sorted(patterns, key=lambda p: (len(p), sorted(p.items())))


_HASHED = re.compile(r"-[0-9a-f]{8}$")


def file_stem(user: str) -> str:
    """A safe, unique, readable file name (without ``.yaml``) for a user: letters of any script
    are kept, path-unsafe characters replaced, and then a short hash of the name keeps users that
    differ only there apart (a name that already ends like a hash gets one too). A long name is
    cut on a character boundary, hash kept, so that ``NAME.yaml`` and its temporary sibling fit a
    file system's 255 bytes."""
    slug = re.sub(r"[^\w.@+-]+", "_", user).lstrip("-._").rstrip("._") or "user"
    if slug != user or _HASHED.search(user):
        slug = f"{slug}-{hashlib.sha256(user.encode()).hexdigest()[:8]}"
    return fit_name(slug, ".yaml", key=user)[: -len(".yaml")]


def split_file(entity: Entity, split_by: SplitBy) -> str:
    """The file (relative path) export writes an entity to; import uses the same rule."""
    if split_by is SplitBy.NONE:
        return "quotas.yaml"
    user = entity.get(USER, "") if USER in entity else ""
    return ("defaults.yaml" if user is None else "no-user.yaml" if user == "" else
            f"users/{file_stem(user)}.yaml")


def export(state: QuotaState, cluster_id: str | None, *, split_by: SplitBy = SplitBy.NONE,
           adopt: bool = False, name: str | None = None) -> tuple[list[ExportFile], list[Skipped]]:
    """Manifests for every entity in ``state`` (sorted), and the values they cannot express.

    ``adopt``: add an ``ownership`` block (``prune: true``) covering what was exported, so the
    manifests own the cluster from then on (in ``quotas.yaml``, or ``ownership.yaml`` when split).
    ``name``: the cluster's inventory name, written as the ``cluster:`` guard (else its id): a
    name holds wherever the inventory says that cluster is, with or without a recorded ``id``.
    """
    guard = name or cluster_id
    skipped: list[Skipped] = []
    kept: list[tuple[Entity, dict[str, float]]] = []
    noted: dict[Entity, list[Skipped]] = {}
    for entity in sorted(state, key=Entity.sort_key):
        if any(t not in BUILTIN_TYPES for t in entity.types):
            skipped.extend(Skipped(entity, k, v, "custom entity type") for k, v in state[entity].items())
            continue
        quotas = {}
        for key, value in state[entity].items():
            reason = _expressible(entity, key, value)
            if reason is None:
                quotas[key] = value
            else:
                skipped.append(Skipped(entity, key, value, reason))
                noted.setdefault(entity, []).append(skipped[-1])
        if quotas:
            kept.append((entity, quotas))
    title = f"Exported from {export_source(cluster_id)}."
    scope = adoption_scope(state) if adopt else []
    if split_by is SplitBy.NONE:
        return [ExportFile("quotas.yaml", _document(kept, guard, title, scope=scope, skipped=noted))], \
            skipped
    groups: dict[str, list[tuple[Entity, dict[str, float]]]] = {}
    for entity, quotas in kept:
        groups.setdefault(split_file(entity, split_by), []).append((entity, quotas))
    notes_by_file: dict[str, dict[Entity, list[Skipped]]] = {}
    for entity, lost in noted.items():
        file = split_file(entity, split_by)
        groups.setdefault(file, [])
        notes_by_file.setdefault(file, {})[entity] = lost
    files = [ExportFile(file, _document(entries, guard, title, skipped=notes_by_file.get(file)))
             for file, entries in sorted(groups.items())]
    if scope:
        files.append(ExportFile("ownership.yaml", _document([], guard, title, scope=scope)))
    return files, skipped
