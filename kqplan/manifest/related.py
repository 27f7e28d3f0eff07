"""For pre-commit: a changed manifest file -> the manifest set it must be validated with.

Profiles, ownership scopes and layers are spread across files, so a file alone may not validate
(or may validate wrongly). The set is every inventory cluster's layers that contain the file
(``kqplan.toml`` above it), else the file's own directory with everything below it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kqplan.config.model import ProjectConfig
from kqplan.files import shown_path


def _inside(path: Path, layer: Path) -> bool:
    return path == layer or layer in path.parents


def manifest_sets(files: Sequence[Path], config: ProjectConfig) -> list[tuple[Path, ...]]:
    """The distinct path lists (layers, in order) to validate so every file is checked in context."""
    sets: dict[tuple[Path, ...], None] = {}
    for file in files:
        resolved = file.resolve()
        clusters = [entry.manifests for entry in config.clusters.values()
                    if any(_inside(resolved, layer.resolve()) for layer in entry.manifests)]
        for layers in clusters or [(file.parent,)]:
            sets.setdefault(tuple(shown_path(layer) for layer in layers), None)
    return list(sets)
