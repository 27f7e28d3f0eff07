"""Escaping, one function per destination: everything rendered into a terminal, Markdown or a
GitHub workflow command goes through the function for where it lands, whatever its source
(entity names, client-ids from usage files, cluster names, file names, metadata, and diagnostics,
which echo manifest text).

Two rules hold for every Markdown function, so no rendered text can forge a comment:

- no control, line-break or invisible (bidi) character survives: each is written as an escape
  (``\\n``, ``\\u202e``), as the terminal form writes it, so a name cannot end a table row, a
  code span or a paragraph;
- the output never contains ``<!--``: an HTML comment could hide what follows it, and the sticky
  PR comment is found by its ``<!-- Sticky Pull Request Comment… -->`` marker, which a name
  rendered into another cluster's comment must not be able to carry.
"""

from __future__ import annotations

import re

from kqplan.core.entity import visible

_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "@": "&#64;", "|": "&#124;", '"': "&quot;"}
_HTML_RE = re.compile(r'[&<>@|"]')
_PUNCT_RE = re.compile(r"[!-/:-@\[-`{-~]")
_INLINE_RE = re.compile(r"[&<>@|\\`*_\]~]")
_ENTITY = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "@": "&#64;"}
_LEADING_SPACE_RE = re.compile(r"^ +")
_BLOCK_START_RE = re.compile(r"^(?:[#+=-]|\d{1,9}(?=[.)](?: |$)))")


def terminal(text: str) -> str:
    """Text printed to a terminal or a log: every non-printable character as an escape."""
    return visible(text)


def markdown_cell(text: str) -> str:
    """Escape what would end a Markdown table cell (and everything :func:`markdown_text` does)."""
    return markdown_text(text)


def markdown_code(text: str, *, cell: bool = False) -> str:
    """``text`` as an inline code span, exactly: a fence longer than any run of backticks in it (a
    name with a backtick must not show as another name), pipes escaped inside a table ``cell``.
    Text a code span cannot carry (``<!--``, which would reach the raw comment body) is written as
    an HTML ``<code>`` element of character references instead: shown the same, never parsed."""
    shown = visible(text)
    if not shown or "<!--" in shown or (cell and "\\|" in shown):
        return "<code>" + _PUNCT_RE.sub(lambda m: f"&#{ord(m.group())};", shown) + "</code>"
    longest = max((len(run) for run in re.findall(r"`+", shown)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if longest or shown[:1] == " " or shown[-1:] == " " else ""
    body = shown.replace("|", "\\|") if cell else shown
    return f"{fence}{pad}{body}{pad}{fence}"


def markdown_text(text: str) -> str:
    """Plain Markdown text outside code spans: GitHub would drop ``<default>`` as an unknown HTML tag
    (and ``</details>`` in a name would end a block), and turn ``@name`` into a mention; ``*``,
    ``_``, ``]`` and the like would format or link: each is escaped (a backslash, or a character
    reference). At the start, what would open a block where the text starts a line or a list item
    (``#`` a heading, ``-``/``+``/``1.`` a list, ``=`` a heading's underline, spaces a code block)
    is escaped too, so the text stays the inline text it is."""
    shown = _INLINE_RE.sub(lambda m: _ENTITY.get(m.group(), "\\" + m.group()), visible(text))
    shown = _LEADING_SPACE_RE.sub(lambda m: "&#32;" * len(m.group()), shown)
    return _BLOCK_START_RE.sub(lambda m: m.group() + "\\" if m.group()[0].isdigit() else "\\" + m.group(),
                               shown)


def markdown_block(text: str) -> str:
    """Several lines shown exactly (messages, diagnostics) as an HTML ``<pre>`` block: its content
    is not Markdown, so no fence inside it can close it and no heading can be forged; line breaks
    are kept, every other non-printable character escaped. Used by ``action.yml`` (the PR comment's
    blocks of kqplan's messages and apply reports)."""
    lines = [_HTML_RE.sub(lambda m: _HTML[m.group()], visible(line)) for line in text.splitlines()]
    return "<pre>\n" + "\n".join(lines) + "\n</pre>"


def github_data(text: str) -> str:
    """The message of a workflow command (after ``::``): ``%``, CR and LF encoded, every other
    non-printable character escaped (a line break is the message's own, shown as a new line)."""
    lines = [visible(line) for line in text.split("\n")]
    return "\n".join(lines).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def github_property(text: str) -> str:
    """A value inside a workflow command's properties (``file=…,title=…``): one line, and ``:``
    and ``,`` encoded too."""
    return visible(text).replace("%", "%25").replace(":", "%3A").replace(",", "%2C")
