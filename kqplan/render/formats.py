"""The formats a plan renders to."""

from __future__ import annotations

from enum import StrEnum


class Format(StrEnum):
    TEXT = "text"
    MARKDOWN = "markdown"
    JSON = "json"
