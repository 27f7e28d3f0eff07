"""The one error type domain code raises, and the exit codes the CLI returns (terraform's)."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    ERROR = 1
    CHANGES = 2  # only with --detailed-exitcode
    INTERRUPTED = 130  # 128 + SIGINT


class KqplanError(Exception):
    """A problem the user can fix; the CLI prints ``message`` (and ``hint``) and exits 1.

    Messages must never contain secrets: build them from names and addresses only.
    """

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if self.hint is None else f"{self.message}\n  = help: {self.hint}"


def error_text(exc: BaseException) -> str:
    """``str(exc)``, or ``""`` when the error cannot say its text: a Py4JJavaError asks the JVM it
    came from for its text only when printed, and that JVM may have exited since (a task out of
    heap ends it moments after the error comes back)."""
    try:
        return str(exc)
    except Exception:  # its text lived in a process that is gone
        return ""
