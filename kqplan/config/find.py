"""Which ``kqplan.toml`` a command reads: the one ``--config`` names, or the nearest at or above the
working directory. Light on purpose: a directory without one reads nothing, and a file is read
by :mod:`kqplan.config.reader` only when there is one."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from kqplan.config.model import CONFIG_NAME, ProjectConfig
from kqplan.files import shown_path

if TYPE_CHECKING:
    from kqplan.core.diagnostics import Diagnostic


def load_config(path: Path, problems: list[Diagnostic] | None = None) -> ProjectConfig:
    """Read and validate a ``kqplan.toml``; every problem located (DiagnosticsError).

    ``problems``: a command that can go on with the rest (``validate`` reports the manifests'
    problems beside the file's) passes a list; every problem found is added to it instead, and
    the file is returned as far as it is valid (a wrong value's default in its place)."""
    from kqplan.config.reader import check_config, read_config  # pydantic: only when there is a file

    path = shown_path(path)  # messages name it as the user would: relative here when under here
    if problems is None:
        return read_config(path)
    config, found = check_config(path)
    problems.extend(found)
    return config


def find_config(start: Path, problems: list[Diagnostic] | None = None) -> ProjectConfig:
    """The nearest ``kqplan.toml`` at or above ``start``, or the defaults (``problems``: as
    :func:`load_config`)."""
    here = start.resolve()
    for directory in (here, *here.parents):
        candidate = directory / CONFIG_NAME
        if candidate.is_file():
            return load_config(candidate, problems)
    return ProjectConfig()
