"""A manifest's document-level fields (everything but ``entities``) read without pydantic.

A valid manifest of the usual shape never needs the pydantic models: :func:`plain_head` checks
the few document-level fields by hand and returns them as plain values. It accepts only what
:class:`kqplan.manifest.models.Manifest` accepts, unchanged (``tests/manifest/fast/shape_test.py``
checks both on generated documents); anything else answers None, and the loader validates with
pydantic, which locates every error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml_rs

API_VERSION = "kqplan/v1"
KIND = "ClientQuotas"
TESTS_KIND = "QuotaTests"
"""Tests on resolved quotas (:mod:`kqplan.manifest.intent`), read beside the manifests."""

OWNERSHIP_FIELDS = ("prune", "scope")
"""The fields of ``ownership`` (``models.Ownership``), for the "valid fields here" hint."""

QuotaValue = int | float | str


@dataclass(frozen=True, slots=True)
class OwnershipHead:
    scope: list[dict[str, str]]
    prune: bool = False


@dataclass(frozen=True, slots=True)
class ManifestHead:
    """The fields compile reads from a validated manifest (as ``models.Manifest`` names them)."""

    cluster: str | None = None
    ownership: OwnershipHead | None = None
    profiles: dict[str, dict[str, QuotaValue]] = field(default_factory=dict)
    released: list[dict[str, str]] = field(default_factory=list)


_HEAD_FIELDS = frozenset({"apiVersion", "kind", "cluster", "metadata", "ownership", "profiles", "released",
                          "entities"})
_PROFILE_VALUE_TYPES = (int, float, str)  # exactly these: StrictInt refuses a bool, the union a null
_MISSING: Any = object()


def _str_map(value: Any) -> bool:
    """A mapping of strings to strings (``dict[str, StrictStr]``)."""
    return value.__class__ is dict and all(
        k.__class__ is str and v.__class__ is str for k, v in value.items())


def plain_head(raw: dict[Any, Any]) -> ManifestHead | None:
    """The document-level fields of a parsed manifest, when they are plainly valid; else None."""
    if not raw.keys() <= _HEAD_FIELDS:
        return None
    if raw.get("apiVersion").__class__ is not str or raw["apiVersion"] != API_VERSION:
        return None
    if raw.get("kind").__class__ is not str or raw["kind"] != KIND:
        return None
    cluster = raw.get("cluster")
    if cluster is not None and cluster.__class__ is not str:
        return None
    metadata = raw.get("metadata")
    if metadata is not None and not (
            metadata.__class__ is dict and metadata.keys() <= {"labels", "description"}
            and _str_map(metadata.get("labels", {}))
            and (metadata.get("description") is None or metadata["description"].__class__ is str)):
        return None
    ownership = raw.get("ownership")
    head_ownership = None
    if ownership is not None:
        if ownership.__class__ is not dict or not ownership.keys() <= {"prune", "scope"}:
            return None
        scope = ownership.get("scope")
        prune = ownership.get("prune", False)
        if scope.__class__ is not list or not scope or not all(map(_str_map, scope)) \
                or prune.__class__ is not bool:
            return None
        head_ownership = OwnershipHead(scope, prune)
    profiles = raw.get("profiles", _MISSING)
    if profiles is _MISSING:
        profiles = {}
    elif profiles.__class__ is not dict or not all(
            name.__class__ is str and values.__class__ is dict and all(
                key.__class__ is str and value.__class__ in _PROFILE_VALUE_TYPES
                for key, value in values.items())
            for name, values in profiles.items()):
        return None
    released = raw.get("released", _MISSING)
    if released is _MISSING:
        released = []
    elif released.__class__ is not list or not all(map(_str_map, released)):
        return None
    return ManifestHead(cluster, head_ownership, profiles, released)


def document_head(text: str, head: re.Match[str], end: int, alias_limits: Any
                  ) -> tuple[ManifestHead, dict[str, Any]] | None:
    """The document with its entity list (``head`` to ``end``) as ``entities: []``: its
    document-level fields and raw form, when they are plainly valid; else None (no error of this
    parse is reported: the whole-file parse locates it)."""
    blanked = text[:head.start()] + "entities: []\n" + text[end:]  # `end` starts a line
    try:
        raw = yaml_rs.loads(blanked, parse_datetime=False, alias_limits=alias_limits)
    except yaml_rs.YAMLDecodeError:
        return None
    if raw.__class__ is not dict or raw.get("entities") != []:
        return None
    document = plain_head(raw)
    if document is None:
        return None
    return document, raw
