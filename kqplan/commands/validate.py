"""``kqplan validate``: check manifests offline; every problem reported with its location."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path

from kqplan.config import ProjectConfig
from kqplan.console import Streams
from kqplan.diagnostics import render_github, render_json, render_text
from kqplan.errors import ExitCode
from kqplan.manifest.compile import load_desired


class DiagnosticFormat(StrEnum):
    TEXT = "text"
    JSON = "json"
    GITHUB = "github"


RENDER = {DiagnosticFormat.TEXT: render_text, DiagnosticFormat.JSON: render_json,
          DiagnosticFormat.GITHUB: render_github}


def validate(paths: Sequence[Path], config: ProjectConfig, *, fmt: DiagnosticFormat,
             strict: bool, streams: Streams) -> int:
    """Exit 1 on any error (or, with ``strict``, any warning)."""
    desired = load_desired(paths, config)
    diags = list(desired.diagnostics)
    if not desired.errors:
        from kqplan.lint import lint

        diags += lint(desired)  # shadowing and `User:` names: only meaningful on a valid state
    errors = sum(d.is_error for d in diags)
    warnings = len(diags) - errors
    if fmt is DiagnosticFormat.JSON:
        streams.print(render_json(diags))
    elif diags:
        streams.print(RENDER[fmt](diags))
    if fmt is DiagnosticFormat.TEXT:
        entities = len(desired.quotas)
        if errors or warnings:
            streams.print(f"Found {errors} error(s) and {warnings} warning(s).")
        else:
            streams.print(f"Valid: {entities} entities in {desired.files} file(s).")
    failed = errors > 0 or (strict and warnings > 0)
    return ExitCode.ERROR if failed else ExitCode.OK
