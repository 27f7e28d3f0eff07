"""Quota state (entity → key → value) and its fingerprint; its file form is
:mod:`kqplan.snapshot.codec`'s."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import orjson

from kqplan.core.entity import Entity

Quotas = Mapping[str, float]
QuotaState = Mapping[Entity, Quotas]
"""What a cluster holds, or what manifests want: every entity with at least one key."""


def fingerprint(state: QuotaState) -> str:
    """A stable digest of a state (whatever the order of entities and keys), recorded in plans
    to tell whether the cluster moved (apply itself checks each change's ``before``). orjson
    sorts and writes it in C, faster than a formatted line per entity; values differ from
    kqplan 0.2's."""
    doc = dict(zip(map(tuple.__repr__, state), state.values(), strict=True))  # repr(entity.parts)
    return "sha256:" + hashlib.sha256(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]
