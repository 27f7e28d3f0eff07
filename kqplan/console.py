"""The streams a command writes to, injected so tests can capture them (httpie's Environment)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TextIO

Progress = Callable[[str], None]
"""Reports what a long step is doing ("Describing the cluster"); may ignore it."""


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

    @contextmanager
    def progress(self) -> Iterator[Progress]:
        """A spinner on stderr on an interactive terminal; nothing otherwise (CI logs stay clean)."""
        if not self.interactive:
            yield lambda _: None
            return
        from rich.console import Console

        console = Console(file=self.err)
        with console.status("Working…") as status:
            yield lambda text: status.update(text + "…")
