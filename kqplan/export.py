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
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from kqplan.entity import BUILTIN_TYPES, DEFAULT_NAME, USER, Entity, escape_name
from kqplan.quotas import QUOTA_KEYS, keys_for, value_error
from kqplan.state import QuotaState
from kqplan.units import format_number

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.@/+-]*$")
_YAML_WORDS = {"true", "false", "null", "yes", "no", "on", "off", "y", "n", "~"}
_BINARY_UNITS = (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024))


class SplitBy(StrEnum):
    NONE = "none"
    USER = "user"


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
    return json.dumps(text, ensure_ascii=False)  # JSON strings are YAML double-quoted scalars


def yaml_value(key: str, value: float) -> str:
    """Byte rates in whole binary units when exact (``50MiB``), else the exact number."""
    spec = QUOTA_KEYS.get(key)
    if spec is not None and spec.bytes_per_second and value == int(value):
        for unit, size in _BINARY_UNITS:
            if value >= size and value % size == 0:
                return f"{int(value) // size}{unit}"
    return format_number(value)


def _expressible(entity: Entity, key: str, value: float) -> str | None:
    """Why a cluster value cannot be written in a manifest, or None if it can."""
    if not math.isfinite(value):
        return "NaN and infinity cannot be written in a manifest"
    if key not in keys_for(entity.kind):
        return "not a quota key for this kind of entity"
    return value_error(key, value)


def _entity_lines(entity: Entity, quotas: dict[str, float]) -> list[str]:
    lines = []
    for i, (entity_type, name) in enumerate(entity.parts):
        prefix = "  - " if i == 0 else "    "
        lines.append(f"{prefix}{entity_type}: {yaml_string(escape_name(name))}")
    body = ", ".join(f"{k}: {yaml_value(k, v)}" for k, v in sorted(quotas.items()))
    lines.append(f"    quotas: {{{body}}}")
    return lines


def _document(entries: Iterable[tuple[Entity, dict[str, float]]], cluster_id: str | None,
              title: str) -> str:
    lines = [f"# {title}", "apiVersion: kqplan/v1", "kind: ClientQuotas"]
    if cluster_id:
        lines.append(f"cluster: {yaml_string(cluster_id)}")
    lines.append("entities:")
    for entity, quotas in entries:
        lines.extend(_entity_lines(entity, quotas))
    return "\n".join(lines) + "\n"


def _file_stem(user: str) -> str:
    """A safe, unique file name for a user (names are opaque strings: slashes, unicode…)."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", user).strip("._")[:60] or "user"
    if slug == user:
        return slug
    return f"{slug}-{hashlib.sha256(user.encode()).hexdigest()[:8]}"


def export(state: QuotaState, cluster_id: str | None, *,
           split_by: SplitBy = SplitBy.NONE) -> tuple[list[ExportFile], list[Skipped]]:
    """Manifests for every entity in ``state`` (sorted), and the values they cannot express."""
    skipped: list[Skipped] = []
    kept: list[tuple[Entity, dict[str, float]]] = []
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
        if quotas:
            kept.append((entity, quotas))
    source = f"cluster {cluster_id}" if cluster_id else "the cluster"
    if split_by is SplitBy.NONE:
        return [ExportFile("quotas.yaml", _document(kept, cluster_id, f"Exported from {source}."))], skipped
    groups: dict[str, list[tuple[Entity, dict[str, float]]]] = {}
    for entity, quotas in kept:
        user = entity.get(USER, "") if USER in entity else ""
        name = ("defaults.yaml" if user is None else
                "no-user.yaml" if user == "" else f"users/{_file_stem(user)}.yaml")
        groups.setdefault(name, []).append((entity, quotas))
    files = [ExportFile(name, _document(entries, cluster_id, f"Exported from {source}."))
             for name, entries in sorted(groups.items())]
    return files, skipped
