"""Which ``kqplan.toml`` a command reads: the one ``--config`` names, or the nearest at or above the
working directory. Light on purpose: a directory without one reads nothing, and a file is read
by :mod:`kqplan.config.reader` only when there is one."""

from __future__ import annotations

from pathlib import Path

from kqplan.config.model import CONFIG_NAME, ProjectConfig


def load_config(path: Path) -> ProjectConfig:
    """Read and validate a ``kqplan.toml``; every problem located (DiagnosticsError)."""
    from kqplan.config.reader import read_config  # pydantic: only when there is a file to read

    return read_config(path)


def find_config(start: Path) -> ProjectConfig:
    """The nearest ``kqplan.toml`` at or above ``start``, or the defaults."""
    here = start.resolve()
    for directory in (here, *here.parents):
        candidate = directory / CONFIG_NAME
        if candidate.is_file():
            return load_config(candidate)
    return ProjectConfig()
