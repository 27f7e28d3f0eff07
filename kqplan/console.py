"""The streams a command writes to, injected so tests can capture them (httpie's Environment)."""

from __future__ import annotations

import sys
import threading
import time
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
    def progress(self, *, log_every: float | None = None) -> Iterator[Progress]:
        """A spinner on stderr on an interactive terminal; otherwise nothing, or with ``log_every``
        (long jobs) a ``… (N s elapsed)`` line at most that often once a step has run that long,
        as terraform's "Still creating…", so a CI log shows a long job is alive and where."""
        if not self.interactive:
            if log_every is None:
                yield lambda _: None
                return
            start = last = time.monotonic()
            lock = threading.Lock()  # a Spark watcher calls from its own thread

            def log(text: str) -> None:
                nonlocal last
                with lock:
                    now = time.monotonic()
                    if now - last >= log_every:
                        last = now
                        self.err.write(f"{text}… ({now - start:.0f} s elapsed)\n")
                        self.err.flush()

            yield log
            return
        from rich.console import Console

        console = Console(file=self.err)
        with console.status("Working…") as status:
            yield lambda text: status.update(text + "…")
