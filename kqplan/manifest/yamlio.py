"""Round-trip YAML editing (ruamel.yaml): change one entry of a manifest, keep every comment,
quote and flow mapping of the rest. Used by ``import``; manifests are still *read* by the loader.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.util import load_yaml_guess_indent

from kqplan.core.entity import Entity, escape_name
from kqplan.files import read_bounded_text
from kqplan.manifest.export import yaml_value


def _yaml(sequence: int, offset: int) -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096  # never fold a long line the author wrote on one
    # guess_indent reports the sequence indent and the dash's offset in it; nested mappings
    # get the step left after the dash (``  - user: a`` / ``    quotas:``: 2, 4, 2)
    mapping = sequence - offset if sequence > offset else sequence
    yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
    return yaml


def load_rt(path: Path) -> tuple[Any, YAML]:
    """A manifest as ruamel's round-trip tree, with a dumper set to the file's own indentation."""
    return parse_rt(read_bounded_text(path, what="manifest"))


def parse_rt(text: str) -> tuple[Any, YAML]:
    """:func:`load_rt` of a manifest's text already read."""
    _, indent, block_seq_indent = load_yaml_guess_indent(text)
    yaml = _yaml(indent or 4, block_seq_indent if block_seq_indent is not None else 2)
    return yaml.load(text), yaml


def dump_rt(doc: Any, yaml: YAML) -> str:
    out = io.StringIO()
    yaml.dump(doc, out)
    return out.getvalue()


def scalar(key: str, value: float) -> int | float | str:
    """A quota value as the YAML scalar export would write (``10MiB``, ``1235.0000001``, ``50``)."""
    text = yaml_value(key, value)
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text  # a byte unit


def quotas_map(quotas: dict[str, float], *, flow: bool = True) -> CommentedMap:
    mapping = CommentedMap((k, scalar(k, v)) for k, v in sorted(quotas.items()))
    if flow:
        mapping.fa.set_flow_style()
    return mapping


def entity_entry(entity: Entity, quotas: dict[str, float], *, override: bool = False,
                 removed: Iterable[str] = ()) -> CommentedMap:
    """A new ``entities:`` item; ``override`` (with ``removed`` keys as null) for a later layer."""
    entry = CommentedMap((t, escape_name(n)) for t, n in entity.parts)
    if override:
        entry["override"] = True
    entry["quotas"] = quotas_map(quotas)
    for key in sorted(removed):
        entry["quotas"][key] = None
    return entry


def new_document(path: Path, cluster_id: str | None, name: str | None = None) -> tuple[Any, YAML]:
    """An empty manifest (as export writes it) as a round-trip tree, for a file that does not exist
    (``name``: the ``cluster:`` guard to write, else the id)."""
    from kqplan.manifest.export import export

    files, _ = export({}, cluster_id, name=name)
    yaml = _yaml(4, 2)
    return yaml.load(files[0].text), yaml


def set_quotas(entry: CommentedMap, quotas: dict[str, float], *, removed: Iterable[str] = ()) -> list[str]:
    """Make ``entry`` ask for exactly ``quotas``: keys updated in place (their comments kept),
    missing ones added, extra ones removed; returns notes on what could not stay as written."""
    notes = []
    if entry.get("profile") is not None:
        notes.append(f"dropped `profile: {entry['profile']}` (the cluster's values are written out)")
        del entry["profile"]
    current = entry.get("quotas")
    if not isinstance(current, CommentedMap):
        entry["quotas"] = quotas_map(quotas)
        return notes
    for key in [k for k in current if k not in quotas and current[k] is not None]:
        del current[key]  # (a null stays: in an override it removes an earlier layer's key)
    for key, value in sorted(quotas.items()):
        if number_of(current.get(key)) != value:  # an equal value keeps the author's spelling
            current[key] = scalar(key, value)
    for key in sorted(removed):  # an override removes what an earlier layer sets: key: null
        current[key] = None
    return notes


def number_of(raw: object) -> float | None:
    """A quota value as written (number or byte size) as a float; None when it is neither."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int | float):
        return float(raw)
    if isinstance(raw, str):
        from kqplan.core.units import UnitError, parse_bytes

        try:
            return float(parse_bytes(raw))
        except UnitError:
            return None
    return None
