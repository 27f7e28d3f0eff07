"""The streams a command writes to, injected so tests can capture them (httpie's Environment)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TextIO


@dataclass(frozen=True, slots=True)
class Streams:
    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)
    interactive: bool = False
    """stdin and stdout are terminals and CI is not set: prompts and progress are allowed."""

    def print(self, text: str = "", *, end: str = "\n") -> None:
        self.out.write(text + end)

    def warn(self, text: str, *, end: str = "\n") -> None:
        self.err.write(text + end)
