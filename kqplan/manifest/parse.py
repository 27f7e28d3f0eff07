"""A manifest file's text, read with bounds (size, UTF-8, the characters YAML allows, nesting),
and parsed by ``yaml_rs``; every refusal a located diagnostic."""

from __future__ import annotations

import re
import stat
from pathlib import Path
from typing import Any

import yaml_rs

from kqplan.core.diagnostics import Diagnostic, Span
from kqplan.core.entity import visible
from kqplan.core.errors import KqplanError
from kqplan.files import display_path, read_bounded
from kqplan.manifest.head import API_VERSION, KIND
from kqplan.manifest.source import SourceFile

# Anchors/aliases are legal YAML, but a few nested aliases can expand to billions of nodes.
ALIAS_LIMITS = yaml_rs.AliasLimits(max_total_replayed_events=100_000)


# YAML 1.2's printable set (§5.1): TAB, LF, CR, NEL, and everything from space up but DEL, the
# C1 controls, surrogates and U+FFFE/U+FFFF. Anything else cuts a file short in some parsers.
_ASCII_ALLOWED = bytes([0x09, 0x0A, 0x0D, *range(0x20, 0x7F)])
_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x80-\x84\x86-\x9f\ud800-\udfff\ufffe\uffff]")


def _unreadable(path: Path, max_bytes: int, exc: KqplanError) -> Diagnostic:
    """The bounded reader's refusal as a located diagnostic: KQP004 for a regular file over the
    limit (``[limits] max-file-mib``), KQP008 for anything else (its problem, without the path
    the span already names)."""
    name = display_path(path)
    try:
        st = path.stat()
    except OSError:
        st = None
    if st is not None and stat.S_ISREG(st.st_mode) and st.st_size > max_bytes:
        return Diagnostic(
            "KQP004", f"file is {st.st_size / 2**20:.1f} MiB, over the {max_bytes // 2**20} MiB limit",
            Span(name, 0, 0),
            hint="split it into several files, or raise [limits] max-file-mib in kqplan.toml")
    problem = exc.message.removeprefix(f"cannot read manifest {visible(str(path))}: ")
    return Diagnostic("KQP008", f"cannot read file: {problem}", Span(name, 0, 0), hint=exc.hint)


def read_text(path: Path, max_bytes: int) -> tuple[str | None, Diagnostic | None]:
    """Read a manifest as UTF-8 (a BOM is allowed), refusing huge or undecodable files, and
    anything but a regular file (``/dev/zero`` stats as empty and reads forever; a FIFO blocks)."""
    name = display_path(path)
    try:
        data = read_bounded(path, what="manifest", limit=max_bytes)
    except KqplanError as exc:
        return None, _unreadable(path, max_bytes, exc)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        from kqplan.manifest.positions import line_col

        good = data[: exc.start].decode("utf-8", errors="replace")
        line, col = line_col(good, len(good))
        return None, Diagnostic(
            "KQP002", f"file is not valid UTF-8 (byte 0x{data[exc.start]:02x})", Span(name, line, col),
            hint="save the file as UTF-8")
    # An ASCII file (the usual one) holds a forbidden character only if one of its bytes is not
    # TAB, LF, CR or printable ASCII: bytes.translate deletes those in C at 3 GB/s, 9x the regex.
    bad = None if text.isascii() and not data.translate(None, _ASCII_ALLOWED) else _FORBIDDEN.search(text)
    if bad is not None:
        from kqplan.manifest.positions import line_col

        line, col = line_col(text, bad.start())
        return None, Diagnostic(
            "KQP009", f"character U+{ord(bad.group()):04X} is not allowed in YAML", Span(name, line, col),
            hint="remove it (a NUL or control byte would cut the file short: everything after it "
            "would be ignored); inside a quoted string write it as an escape, e.g. \\x07")
    return text, None


MAX_DEPTH = 64
"""Deepest nesting of YAML collections accepted: a manifest needs 5; parsers recurse per level,
and 30 000 nested ``[`` crashed the process (a C stack overflow in pyyaml's composer)."""


_QUOTED_OR_COMMENT = re.compile(r"""'[^']*'|"(?:[^"\\]|\\.)*"|(?<![^ \t\n])#[^\n]*""")
"""Quoted scalars and comments (a ``#`` first on its line or after a blank), whose brackets are
not YAML's; each starts with a literal, so a scan for them alone runs in C."""
_FLOW = re.compile(r"[\[\]{}]|" + _QUOTED_OR_COMMENT.pattern)


_STACKED = re.compile(r"- +-")


def too_deep(text: str, limit: int = MAX_DEPTH) -> int | None:
    """Offset where collection nesting passes ``limit``, or None. Flow brackets are counted
    outside quoted scalars and comments (closing ones need no care: depth only has to be bounded
    above); block nesting shows as indentation or stacked ``- ``."""
    indent = " " * (4 * limit)
    # The line-by-line search costs 7 ms per MB; only a deep indent or two stacked "- " (which
    # these C-speed checks find) can make it match.
    if ("\n" + indent) in text or text.startswith(indent) or _STACKED.search(text) is not None:
        deep = re.search(rf"^(?: {{{4 * limit},}}|(?: *- ){{{limit + 1}}})", text, re.M)
        if deep is not None:
            return deep.start()
    if text.count("[") + text.count("{") <= limit or _flow_shallow(text, limit):
        return None
    depth = 0  # deep, or unbalanced: find where, token by token
    for token in _FLOW.finditer(text):
        ch = token.group()
        if ch in "[{":
            depth += 1
            if depth > limit:
                return token.start()
        elif ch in "]}":
            depth = max(0, depth - 1)
    return None


_BRACKETS = bytes.maketrans(b"[{]}", b"(())")
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[{]}"))


def _flow_shallow(text: str, limit: int) -> bool:
    """Whether the flow brackets outside quotes and comments are balanced and nest at most
    ``limit`` deep: the same tokens :data:`_FLOW` finds, judged in C (a Python loop over a flow
    mapping per entry took 0.4 s for 100k entries). Each pass removes the innermost pairs."""
    # Quotes and comments are removed only up to the end of the line of the last quote or `#`
    # (often a header comment): no span starts later, and none ends later (a quoted span ends
    # at a quote, a comment at its line's end). The scan for them costs 40 ns a character.
    last = max(text.rfind("'"), text.rfind('"'), text.rfind("#"))
    if last >= 0:
        cut = text.find("\n", last) % (len(text) + 1)  # -1 (no newline after it): the whole text
        text = _QUOTED_OR_COMMENT.sub("", text[:cut]) + text[cut:]
    brackets = text.encode("utf-8", "surrogatepass").translate(_BRACKETS, _NOT_BRACKETS)
    for _ in range(limit):
        fewer = brackets.replace(b"()", b"")
        if not fewer or len(fewer) == len(brackets):
            return not fewer
        brackets = fewer
    return not brackets


def parse_yaml(source: SourceFile) -> tuple[Any, Diagnostic | None]:
    """Fast parse of one file; a located diagnostic when it is not one YAML mapping."""
    deep = too_deep(source.text)
    if deep is not None:
        from kqplan.manifest.positions import line_col

        line, col = line_col(source.text, deep)
        return None, Diagnostic("KQP001", f"YAML nests deeper than {MAX_DEPTH} levels",
                                Span(source.path, line, col),
                                hint="a manifest needs only a few levels; check for unclosed brackets")
    try:
        doc: Any = yaml_rs.loads(source.text, parse_datetime=False, alias_limits=ALIAS_LIMITS)
    except yaml_rs.YAMLDecodeError as exc:
        from kqplan.manifest.positions import yaml_error

        return None, yaml_error(source.path, source.text, exc)
    if doc is None:
        return None, Diagnostic("KQP003", "manifest is empty", Span(source.path, 0, 0),
                                hint=f"start it with `apiVersion: {API_VERSION}` and `kind: {KIND}`")
    if isinstance(doc, list):
        from kqplan.manifest.positions import second_document

        second = second_document(source.text)
        if second is not None:
            return None, Diagnostic(
                "KQP007", "file holds more than one YAML document",
                Span(source.path, second.line, second.column),
                hint="put each manifest in its own file (kqplan reads directories recursively)")
    if not isinstance(doc, dict):
        return None, Diagnostic(
            "KQP010", f"manifest must be a mapping, got {yaml_type(doc)}", Span(source.path, 1, 1),
            hint=f"start it with `apiVersion: {API_VERSION}` and `kind: {KIND}`")
    return doc, None


def yaml_type(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    return {dict: "a mapping", list: "a list", str: "a string", int: "a number", float: "a number",
            type(None): "null"}.get(type(value), type(value).__name__)
