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
