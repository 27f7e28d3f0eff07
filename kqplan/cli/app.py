"""The ``typer`` app, its global options, and the helpers every command shares."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kqplan.console import Streams
from kqplan.core.errors import KqplanError

if TYPE_CHECKING:
    from kqplan.config.model import ClusterEntry, ProjectConfig
    from kqplan.core.diagnostics import Diagnostic

app = typer.Typer(
    name="kqplan",
    help="Kafka client quotas as code: validate, plan, apply, resolve.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

global_options: dict[str, Any] = {"debug": False, "config": None, "no_color": False, "no_input": False}


def console_streams() -> Streams:
    interactive = (sys.stdin.isatty() and sys.stdout.isatty() and not os.environ.get("CI")
                   and not global_options["no_input"])
    return Streams(sys.stdout, sys.stderr, interactive)


def use_color() -> bool:
    """Colour on a terminal, unless NO_COLOR (https://no-color.org) or --no-color says no."""
    return (sys.stdout.isatty() and not global_options["no_color"] and not os.environ.get("NO_COLOR")
            and os.environ.get("TERM") != "dumb")


def project_config(paths: Sequence[Path] = (), problems: list[Diagnostic] | None = None) -> ProjectConfig:
    """The project's kqplan.toml (``problems``: its problems are added there, and the file returned
    as far as it is valid, for a command that reports them beside its own — ``validate`` — else
    they raise). An inventory layer that does not exist yet (KQP191) is reported by ``validate``
    only: for the other commands it is an error where that layer is read (``manifest_paths``), and
    export, import and init create it."""
    from kqplan.config.find import load_config, nearest_config  # pydantic: only when a command runs
    from kqplan.config.model import MISSING_LAYER, ProjectConfig
    from kqplan.core.diagnostics import DiagnosticsError
    from kqplan.files import set_display_root

    found: list[Diagnostic] = []
    explicit: Path | None = global_options["config"]
    start = paths[0] if paths else Path.cwd()
    start = start if start.is_dir() else start.parent
    file = explicit if explicit is not None else nearest_config(start)
    set_display_root(file, start)  # before the file is read: its problems are shown from the root too
    config = load_config(file, found) if file is not None else ProjectConfig()
    if problems is not None:
        problems.extend(found)
        return config
    refused = [d for d in found if d.code != MISSING_LAYER]
    if refused:
        raise DiagnosticsError(refused)
    return config


def use_config(config: Path | None) -> None:
    """A command's own ``--config`` (same as the global one, given after the command name)."""
    if config is not None:
        global_options["config"] = config


def cluster_entry(name: str | None, config: ProjectConfig) -> ClusterEntry | None:
    return config.cluster(name) if name is not None else None


def _version(value: bool) -> None:
    if value:
        from kqplan import __version__

        sys.stdout.write(f"kqplan {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _global(
    config: Annotated[Path | None, typer.Option(
        "--config", help="Project config file (default: the nearest kqplan.toml).",
        dir_okay=False, metavar="FILE")] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks on errors.")] = False,
    no_color: Annotated[bool, typer.Option(
        "--no-color", help="No colour, even on a terminal (also: NO_COLOR=1).")] = False,
    no_input: Annotated[bool, typer.Option(
        "--no-input", help="Never prompt: fail with the flag to add instead.")] = False,
    version: Annotated[bool, typer.Option(
        "--version", "-V", help="Print the version and exit.", is_eager=True,
        callback=_version)] = False,
) -> None:
    global_options["config"] = config
    global_options["debug"] = debug
    global_options["no_color"] = no_color
    global_options["no_input"] = no_input


def choice(enum: Any, value: str, option: str) -> Any:
    try:
        return enum(value)
    except ValueError:
        allowed = " | ".join(m.value for m in enum)
        raise KqplanError(f"{option} must be one of {allowed}, not '{value}'") from None
