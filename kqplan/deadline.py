"""The whole command's time limit (``--timeout``): one deadline, set once by the command line,
that bounds every wait on the network — a connection, a request, the retries, the verify polls,
in the fleet's threads too. Read-only once set; no deadline means no limit beyond each setting's
own (``request.timeout.ms`` and friends)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class Deadline:
    at: float
    """``time.monotonic()`` when the command must give up."""
    seconds: float
    """The budget as given, for messages."""

    @property
    def text(self) -> str:
        """``--timeout 5 s``: what the user set, in words."""
        return f"--timeout {seconds_text(self.seconds)}"


_current: list[Deadline | None] = [None]


def start(seconds: float | None) -> None:
    """The command starts now with ``seconds`` to finish (None: no limit)."""
    _current[0] = None if seconds is None else Deadline(time.monotonic() + seconds, seconds)


@contextmanager
def paused() -> Iterator[None]:
    """The clock stops meanwhile (a person answering apply's prompt is not the cluster's time)."""
    started = time.monotonic()
    try:
        yield
    finally:
        deadline = _current[0]
        if deadline is not None:
            _current[0] = replace(deadline, at=deadline.at + time.monotonic() - started)


def current() -> Deadline | None:
    return _current[0]


def remaining() -> float | None:
    """Seconds left (never negative), or None without a limit."""
    deadline = _current[0]
    return None if deadline is None else max(0.0, deadline.at - time.monotonic())


def bound_ms(ms: int) -> tuple[int, bool]:
    """``ms`` cut to what is left of the command's time; whether the deadline is what bounds it."""
    left = remaining()
    if left is None or left * 1000 >= ms:
        return ms, False
    return int(left * 1000), True


def seconds_text(seconds: float) -> str:
    """``5 s``, ``1.5 s``, ``250 ms``, ``2 min``: a duration as people write it."""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds >= 120 and seconds % 60 == 0:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s" if seconds == int(seconds) else f"{seconds:.1f} s"
