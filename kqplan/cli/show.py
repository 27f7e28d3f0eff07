"""show: print a saved plan (``plan --out``) as text, Markdown or JSON, without a cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kqplan.cli.app import app, choice, console_streams, project_config, use_color, use_config
from kqplan.cli.boundary import run
from kqplan.cli.options import ConfigOpt


@app.command()
def show(
    plan_file: Annotated[Path, typer.Argument(
        help="A plan saved by `kqplan plan --out`.", metavar="PLANFILE", show_default=False)],
    fmt: Annotated[str, typer.Option(
        "--format", help="text | markdown | json", metavar="FORMAT")] = "text",
    detailed_exitcode: Annotated[bool, typer.Option(
        "--detailed-exitcode", help="Exit 2 when the plan has changes (0: none, 1: error).")] = False,
    config: ConfigOpt = None,
) -> int:
    """Print a saved plan, checked as `apply --plan` checks it (terraform's `show`)."""
    from kqplan.commands.show import show as command
    from kqplan.render.formats import Format

    use_config(config)

    def body() -> int:
        return command(plan_file, project_config(), fmt=choice(Format, fmt, "--format"),
                       streams=console_streams(), detailed_exitcode=detailed_exitcode,
                       color=use_color())

    return run(body, json_errors=fmt == "json")
