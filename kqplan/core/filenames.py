"""Names that become file names: which ones are plain (one path component, nothing a file system
or a shell treats specially), and how a long one is shortened to fit. Pure: no file is touched."""

from __future__ import annotations

import hashlib

NAME_BYTES = 200
"""A file name kqplan makes stays within this many UTF-8 bytes: 255 (ext4, XFS) less the room a
temporary sibling's prefix and suffix need, and a margin for a suffix added later."""


def component_problem(name: str) -> str | None:
    """Why ``name`` cannot be one file name inside an output directory, or None."""
    if not name:
        return "it is empty"
    if name in {".", ".."}:
        return f"{name!r} is not a file name"
    if "/" in name or "\\" in name:
        return "it contains a path separator"
    if "\x00" in name:
        return "it contains a NUL character"
    if not name.isprintable():
        return "it contains a control or invisible character"
    if name.startswith("-"):
        return "it starts with '-' (it would read as an option)"
    if name != name.strip():
        return "it starts or ends with a space"
    if len(name.encode("utf-8")) > NAME_BYTES:
        return f"it is longer than {NAME_BYTES} bytes"
    return None


def fit_name(stem: str, suffix: str, *, key: str | None = None, limit: int = NAME_BYTES) -> str:
    """``stem + suffix`` when it fits ``limit`` UTF-8 bytes; else the stem cut on a character
    boundary, with an 8-hex hash of ``key`` (default: the stem) keeping different names apart."""
    whole = stem + suffix
    if len(whole.encode("utf-8")) <= limit:
        return whole
    tag = "-" + hashlib.sha256((key if key is not None else stem).encode("utf-8")).hexdigest()[:8]
    room = limit - len(tag.encode("utf-8")) - len(suffix.encode("utf-8"))
    cut = stem.encode("utf-8")[: max(room, 0)].decode("utf-8", errors="ignore")
    return cut + tag + suffix
