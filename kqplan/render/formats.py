"""The formats a plan renders to, and the renderer of each."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

from kqplan.core.plan import Plan
from kqplan.render.json import render_json
from kqplan.render.markdown import render_markdown
from kqplan.render.text import render_text


class Format(StrEnum):
    TEXT = "text"
    MARKDOWN = "markdown"
    JSON = "json"


RENDERERS: dict[Format, Callable[[Plan], str]] = {
    Format.TEXT: render_text,
    Format.MARKDOWN: render_markdown,
    Format.JSON: render_json,
}
