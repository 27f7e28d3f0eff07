"""Escaping, one function per destination: everything rendered into Markdown or a GitHub workflow
command goes through the function for where it lands."""

from __future__ import annotations

import re


def markdown_cell(text: str) -> str:
    """Escape what would end a Markdown table cell."""
    return text.replace("|", "\\|")


def markdown_code(text: str, *, cell: bool = False) -> str:
    """``text`` as an inline code span, exactly: a fence longer than any run of backticks in it (a
    name with a backtick must not show as another name), pipes escaped inside a table ``cell``."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if longest else ""
    return f"{fence}{pad}{markdown_cell(text) if cell else text}{pad}{fence}"


def markdown_text(text: str) -> str:
    """Plain Markdown text outside code spans: GitHub would drop ``<default>`` as an unknown HTML tag
    (and ``</details>`` in a name would end a block), and turn ``@name`` into a mention."""
    return markdown_cell(text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
                         .replace("@", "&#64;"))


def github_data(text: str) -> str:
    """The message of a workflow command (after ``::``): ``%``, CR and LF encoded."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def github_property(text: str) -> str:
    """A value inside a workflow command's properties (``file=…,title=…``): also ``:`` and ``,``."""
    return github_data(text).replace(":", "%3A").replace(",", "%2C")
