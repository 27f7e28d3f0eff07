"""Canonical manifests (``kqplan fmt``), like ``terraform fmt``: fixed key order, quota keys sorted,
byte rates in the shortest exact unit, quotes only where YAML needs them — comments kept.

Entities keep the author's order (as terraform keeps block order): grouping is often meaningful
and a sort would turn every first ``fmt`` into a large diff. ``fmt`` never changes meaning: the
result compiles to the same desired state, and a file that does not load is left alone.
"""

from __future__ import annotations

import copy
import io
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.util import load_yaml_guess_indent

from kqplan.core.quotas import QUOTA_KEYS
from kqplan.manifest.yamlio import number_of, scalar

TOP_ORDER = ("apiVersion", "kind", "cluster", "metadata", "ownership", "profiles", "released", "entities")
ENTITY_ORDER = ("user", "client-id", "ip")
ENTITY_TAIL = ("profile", "override", "protect", "expires", "metadata", "quotas")


def _reorder(mapping: CommentedMap, first: tuple[str, ...], last: tuple[str, ...] = ()) -> None:
    """Keys of ``first`` at the front, ``last`` at the end, the rest (custom types) between."""
    keys = list(mapping)
    middle = [k for k in keys if k not in first and k not in last]
    wanted = [k for k in first if k in mapping] + middle + [k for k in last if k in mapping]
    if not keys or wanted == keys:
        return
    for key in wanted:
        mapping.move_to_end(key)
    _keep_trailing_comment(mapping, keys[-1], wanted[-1])


def _keep_trailing_comment(mapping: CommentedMap, old_last: Any, new_last: Any) -> None:
    """ruamel hangs the comment lines after a mapping on its last key; when another key becomes
    last, those lines move to it (the key's own end-of-line comment stays where it was)."""
    if old_last == new_last:
        return
    items = mapping.ca.items
    old = items.get(old_last)
    token = old[2] if old and len(old) > 2 else None
    if token is None or "\n" not in token.value.rstrip("\n"):
        return
    eol, _, rest = token.value.partition("\n")
    if eol.strip():
        token.value = eol + "\n"
    else:
        old[2] = None
    tail = copy.copy(token)
    new = items.setdefault(new_last, [None, None, None, None])
    own = new[2]
    tail.value = (own.value if own is not None else "\n") + rest
    new[2] = tail


def _canonical_quotas(quotas: Any) -> None:
    if not isinstance(quotas, CommentedMap):
        return
    for key in sorted(quotas, key=str):
        quotas.move_to_end(key)
        if isinstance(quotas[key], CommentedMap):  # a budget, {per-cluster: VALUE}: its value alike
            _canonical_value(quotas[key], key, "per-cluster")
        else:
            _canonical_value(quotas, key, key)


def _canonical_value(mapping: CommentedMap, key: str, field: str) -> None:
    """A byte rate in the shortest exact unit (a number that has none stays a number)."""
    if field not in mapping:
        return
    spec = QUOTA_KEYS.get(key)
    value = number_of(mapping[field])
    if spec is not None and spec.bytes_per_second and value is not None:
        shown = scalar(key, value)
        if isinstance(shown, str) or not isinstance(mapping[field], str):
            mapping[field] = shown


def _yaml(sequence: int, offset: int) -> YAML:
    yaml = YAML(typ="rt")
    yaml.width = 4096
    mapping = sequence - offset if sequence > offset else sequence
    yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
    return yaml


def format_text(text: str) -> str:
    """The canonical form of a manifest's text (unchanged when it is not a YAML mapping)."""
    _, indent, offset = load_yaml_guess_indent(text)
    yaml = _yaml(indent or 4, offset if offset is not None else 2)
    doc = yaml.load(text)
    if not isinstance(doc, CommentedMap):
        return text
    _reorder(doc, TOP_ORDER)
    profiles = doc.get("profiles")
    if isinstance(profiles, CommentedMap):
        for quotas in profiles.values():
            _canonical_quotas(quotas)
    entities = doc.get("entities")
    if isinstance(entities, CommentedSeq):
        for entry in entities:
            if isinstance(entry, CommentedMap):
                _reorder(entry, ENTITY_ORDER, ENTITY_TAIL)
                _canonical_quotas(entry.get("quotas"))
    out = io.StringIO()
    yaml.dump(doc, out)
    return out.getvalue()
