"""``kqplan validate``: check manifests offline; every problem reported with its location."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path

from kqplan.config.model import ProjectConfig
from kqplan.console import Streams
from kqplan.core.desired import DesiredState
from kqplan.core.diagnostics import Diagnostic, DiagnosticsError, render_text, sort_key
from kqplan.core.errors import ExitCode, KqplanError
from kqplan.core.versions import ClusterProfile
from kqplan.files import read_bounded
from kqplan.manifest.compile import load_desired
from kqplan.render.diagnostics import render_github, render_json

UNKNOWN_PROFILE = ClusterProfile()


class DiagnosticFormat(StrEnum):
    TEXT = "text"
    JSON = "json"
    GITHUB = "github"


RENDER = {DiagnosticFormat.TEXT: render_text, DiagnosticFormat.JSON: render_json,
          DiagnosticFormat.GITHUB: render_github}


def _check(paths: Sequence[Path], config: ProjectConfig, profile: ClusterProfile,
           brokers: int | None = None) -> tuple[list[Diagnostic], int, int, int]:
    """Diagnostics (lint included when valid), entities, quota tests and files of one manifest set."""
    from kqplan.core.lint import lint, name_warnings

    desired = load_desired(paths, config)
    diags = sorted([*desired.diagnostics, *expired_diagnostics(desired)], key=sort_key)
    if not desired.errors:
        from kqplan.core.versions import diagnostics as version_diagnostics

        diags += version_diagnostics(desired, profile)  # a declared mode/version (inventory)
        diags += lint(desired)  # shadowing: only meaningful on a valid state; names
        if brokers is not None and desired.budgets:  # a declared broker count (inventory)
            from kqplan.core.budgets import divide

            diags += divide(desired, brokers, config.policy)[2]
    else:
        diags += name_warnings(desired)  # each name alone: as meaningful beside errors
    return diags, len(desired.quotas), len(desired.tests), desired.files


def expired_diagnostics(desired: DesiredState) -> list[Diagnostic]:
    """Every entry whose ``expires`` has passed (KQP158): validate, the PR check, refuses them.
    Offline it cannot tell an entry just added from one left behind, so it refuses both; plan and
    apply never do (they plan the revert: a nightly drift job must keep working)."""
    from kqplan.core.diagnostics import Pending, locate
    from kqplan.core.expiry import show_when
    from kqplan.core.policy import EXPIRED

    found = []
    for expiry in desired.expired:
        effect = (f"{expiry.entity.display} falls back to the layer beneath" if expiry.override else
                  "an entity listed only here is deleted under an ownership scope with prune")
        found.append(locate(expiry.origin.source, Pending(
            EXPIRED, f"{'the override of ' if expiry.override else ''}{expiry.entity.display} expired "
            f"{show_when(expiry.at)} and no longer applies: {effect}", expiry.loc,
            hint="remove the entry (`kqplan plan` already leaves it out), or give it a later `expires:` "
            "if the temporary quota is still needed")))
    return found


def maybe_manifest(path: Path, limit: int) -> bool:
    """A changed file the hook passes is a manifest (other YAML is skipped); one the bounded reader
    refuses (over ``max-file-mib``, replaced by a FIFO) is kept, so that its error is reported."""
    from kqplan.commands.fmt import is_manifest

    try:
        return is_manifest(read_bounded(path, what="manifest", limit=limit).decode("utf-8", errors="replace"))
    except KqplanError:
        return True


def validate(paths: Sequence[Path], config: ProjectConfig, *, fmt: DiagnosticFormat,
             strict: bool, streams: Streams, related: bool = False,
             profile: ClusterProfile = UNKNOWN_PROFILE,
             config_problems: Sequence[Diagnostic] = (), brokers: int | None = None) -> int:
    """Exit 1 on any error (or, with ``strict``, any warning). ``related`` (pre-commit): each path
    is a changed file, validated with the manifest set it belongs to; other YAML is skipped.
    ``config_problems``: kqplan.toml's (``config`` is the file as far as it is valid): the run
    fails as on any bad kqplan.toml (DiagnosticsError, on stderr), with the manifests' problems
    after the file's, so one run shows every one. ``brokers``: the inventory's declared broker
    count, which budgets are checked divided by."""
    if related:
        from kqplan.manifest.related import manifest_sets

        changed = [p for p in paths if p.is_file() and maybe_manifest(p, config.max_file_bytes)]
        sets = manifest_sets(changed, config)
    else:
        sets = [tuple(paths)]
    diags: list[Diagnostic] = []
    entities = tests = files = 0
    for manifest_set in sets:
        found, n, t, f = _check(manifest_set, config, profile, brokers)
        diags += [d for d in found if d not in diags]
        entities, tests, files = entities + n, tests + t, files + f
    if config_problems:
        raise DiagnosticsError([*config_problems, *diags])
    errors = sum(d.is_error for d in diags)
    warnings = len(diags) - errors
    if fmt is DiagnosticFormat.JSON:
        streams.print(render_json(diags))
    elif diags:
        streams.print(RENDER[fmt](diags))
    if fmt is DiagnosticFormat.TEXT:
        if errors or warnings:
            streams.print(f"Found {errors} error(s) and {warnings} warning(s).")
        else:
            with_tests = f" and {tests} quota test(s)" if tests else ""
            streams.print(f"Valid: {entities} entities{with_tests} in {files} file(s).")
    failed = errors > 0 or (strict and warnings > 0)
    return ExitCode.ERROR if failed else ExitCode.OK
