"""Which ``kqplan.toml`` a command reads: the one ``--config`` names, or the nearest at or above the
working directory. Light on purpose: a directory without one reads nothing, and a file is read
by :mod:`kqplan.config.reader` only when there is one."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from kqplan.config.model import CONFIG_NAME, ProjectConfig
from kqplan.files import display_path, shown_path

if TYPE_CHECKING:
    from kqplan.core.diagnostics import Diagnostic


def load_config(path: Path, problems: list[Diagnostic] | None = None) -> ProjectConfig:
    """Read and validate a ``kqplan.toml``; every problem located (DiagnosticsError).

    ``problems``: a command that can go on with the rest (``validate`` reports the manifests'
    problems beside the file's) passes a list; every problem found is added to it instead, and
    the file is returned as far as it is valid (a wrong value's default in its place)."""
    from kqplan.config.reader import check_config  # pydantic: only when there is a file
    from kqplan.core.diagnostics import DiagnosticsError

    path = shown_path(path)  # opened as the user would name it: relative here when under here
    config, found = check_config(path)
    found = _shown(found, str(path), display_path(path))
    if problems is None:
        if found:
            raise DiagnosticsError(found)
        return config
    problems.extend(found)
    return config


def _shown(found: list[Diagnostic], opened: str, shown: str) -> list[Diagnostic]:
    """The file's problems located as output shows paths (from the repository root)."""
    if opened == shown:
        return found
    return [replace(d, span=replace(d.span, path=shown)) if d.span.path == opened else d for d in found]


def nearest_config(start: Path) -> Path | None:
    """The nearest ``kqplan.toml`` at or above ``start``, if any."""
    here = start.resolve()
    for directory in (here, *here.parents):
        candidate = directory / CONFIG_NAME
        if candidate.is_file():
            return candidate
    return None


def find_config(start: Path, problems: list[Diagnostic] | None = None) -> ProjectConfig:
    """The nearest ``kqplan.toml`` at or above ``start``, or the defaults (``problems``: as
    :func:`load_config`)."""
    candidate = nearest_config(start)
    return load_config(candidate, problems) if candidate is not None else ProjectConfig()
