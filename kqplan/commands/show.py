"""``kqplan show PLANFILE``: print a saved plan (terraform's ``show``), as ``plan`` prints one.

The file is read as ``apply --plan`` reads it (:func:`~kqplan.planfile.file.read_plan`: a regular
file under ``[limits] max-input-mib``, every op, count and the digest checked), so what ``show``
prints is exactly what ``apply --plan`` would apply; nothing talks to a cluster.
"""

from __future__ import annotations

from pathlib import Path

from kqplan.config.model import ProjectConfig
from kqplan.console import Streams
from kqplan.core.errors import ExitCode
from kqplan.planfile.file import read_plan
from kqplan.render.formats import Format


def show(plan_file: Path, config: ProjectConfig, *, fmt: Format, streams: Streams,
         detailed_exitcode: bool = False, color: bool = False) -> int:
    """Render ``plan_file`` as text, Markdown (its cut notices point at the file itself) or the
    plan JSON; exit as ``plan`` does (2 = changes, only with ``detailed_exitcode``)."""
    plan = read_plan(plan_file, limit=config.max_input_bytes)
    if fmt is Format.TEXT:
        from kqplan.render.text import render_text

        streams.print(render_text(plan, color=color), end="")
    elif fmt is Format.MARKDOWN:
        from kqplan.render.markdown import render_markdown

        streams.print(render_markdown(plan, artifact=str(plan_file)), end="")
    else:
        from kqplan.render.json import render_json

        streams.print(render_json(plan), end="")
    return ExitCode.CHANGES if detailed_exitcode and plan.has_changes else ExitCode.OK
