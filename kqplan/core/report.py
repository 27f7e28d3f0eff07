"""An apply's outcome: a status per entity, and the report that gathers them (values only; the
protocol that fills them is :mod:`kqplan.apply`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from kqplan.core.plan import Change, ClusterRef
from kqplan.core.state import Quotas


class Status(StrEnum):
    APPLIED = "applied"  # the broker said yes, and describe shows the change
    UNVERIFIED = "unverified"  # the broker said yes, but describe never showed it
    FAILED = "failed"  # the broker refused the entity
    NOT_APPLIED = "not applied"  # outcome lost in transit; describe shows the old state
    UNKNOWN = "unknown"  # outcome lost; describe shows neither state
    SKIPPED = "skipped"  # pre-flight failed for the batch: nothing was sent for real
    STORED_DIFFERENTLY = "stored differently"  # the broker keeps another value (ZooKeeper truncates)
    CHANGED_UNDERNEATH = "changed underneath"  # another writer changed it between alter and verify
    NOT_SENT = "not sent"  # the apply stopped (a lost batch, a failure, an interrupt) before its batch


class RunStatus(StrEnum):
    """Where the apply stands: the ``--report`` file is written before the first real alter
    (``in progress``) and again however the apply ends."""

    IN_PROGRESS = "in progress"  # the first alter is going out: a killed kqplan leaves this
    FINISHED = "finished"  # every entity has its outcome (``ok`` says whether all applied)
    FAILED = "failed"  # an error stopped the apply: ``error``, and the outcomes known then
    INTERRUPTED = "interrupted"  # Ctrl-C or SIGTERM: the outcomes known then
    CANCELLED = "cancelled"  # the confirmation was declined: nothing was sent


@dataclass(frozen=True, slots=True)
class Outcome:
    change: Change
    status: Status
    error_code: int = 0
    error_message: str | None = None
    stored: Quotas | None = None
    """What describe showed, when the cluster holds something else than asked (``{}``: no quota,
    the entity is gone)."""

    @property
    def ok(self) -> bool:
        return self.status is Status.APPLIED


@dataclass(frozen=True, slots=True)
class ApplyReport:
    cluster: ClusterRef
    outcomes: tuple[Outcome, ...]
    preflight_failed: bool
    batches: int
    requests: Mapping[str, int]
    """Requests sent by the protocol: ``describe``, ``alter_validate``, ``alter``."""
    unchanged: int = 0
    notes: tuple[str, ...] = field(default=())
    verify_polls: int = 0
    """Describes verify needed before every change showed (or its deadline passed)."""
    verify_seconds: float = 0.0
    status: RunStatus = RunStatus.FINISHED
    error: str | None = None
    """What stopped the apply (``failed``), in the user's words."""
    started_at: str | None = None
    """ISO 8601 UTC times, filled in by the command (the core has no clock)."""
    finished_at: str | None = None
    plan_digest: str | None = None
    """The plan's digest, as a saved plan file would carry it (``sha256:…``)."""

    @property
    def ok(self) -> bool:
        return (self.status is RunStatus.FINISHED and not self.preflight_failed
                and all(o.ok for o in self.outcomes))

    def count(self, status: Status) -> int:
        return sum(o.status is status for o in self.outcomes)
