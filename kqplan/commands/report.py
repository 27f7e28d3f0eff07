"""The ``--report`` file of an apply, single or fleet: one life cycle (``in progress`` before the
first alter, then the result, ``failed`` or ``interrupted`` however the run ends), so that a report
never describes an earlier run."""

from __future__ import annotations

import json
import signal
import threading
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Self

from kqplan.apply.protocol import Journal
from kqplan.console import Streams
from kqplan.core.errors import KqplanError
from kqplan.core.plan import ClusterRef, Plan
from kqplan.core.report import ApplyReport, RunStatus
from kqplan.files import write_atomically
from kqplan.planfile.codec import plan_to_json
from kqplan.render.apply import render_apply, report_to_json


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the apply stands so that its report is written (as Ctrl-C is)."""


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise Terminated


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def stopped_by(exc: BaseException | None) -> tuple[RunStatus, str | None]:
    """How a run that had not finished ended, from what stopped it: Ctrl-C or SIGTERM is
    ``interrupted``; anything else ``failed``, with the error in the user's words (a bug as an
    internal error)."""
    if isinstance(exc, KeyboardInterrupt):
        return RunStatus.INTERRUPTED, None
    if isinstance(exc, KqplanError):
        return RunStatus.FAILED, exc.message
    return RunStatus.FAILED, f"internal error: {type(exc).__name__}: {exc}" if exc is not None else None


_REPORTED = "_kqplan_report_written"
"""Set on an exception whose run's report was written: an outer life cycle of the same run (the
CLI's, around the reading of its options and project) leaves that document standing."""


class ReportLifecycle:
    """The life cycle of a ``--report`` file, whatever the report says: SIGTERM raised where the
    run stands (as Ctrl-C is) while the block runs, ``in progress`` documents only into a regular
    file, and however the block ends before :attr:`done`, the final document from
    :meth:`_stopped_document` (``failed`` or ``interrupted``, see :func:`stopped_by`). The single
    apply (:class:`Recorder`) and fleet apply (:class:`kqplan.commands.fleet_apply.FleetRecorder`)
    fill in what their documents say."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.started_at = now()
        self.done = False
        """The final document is written: leaving the block writes nothing more."""
        self._previous: Any = None

    def __enter__(self) -> Self:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, _terminate)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            if getattr(exc, _REPORTED, False):
                return  # an inner life cycle of the same run wrote its (fuller) document
            if not self.done and self.path is not None:
                status, error = stopped_by(exc)
                write_atomically(self.path, self._stopped_document(status, error))
            else:
                self._ended(exc)
            if exc is not None and self.path is not None:
                setattr(exc, _REPORTED, True)  # this run's document is written, whichever
        finally:
            if self._previous is not None:
                signal.signal(signal.SIGTERM, self._previous)

    def _stopped_document(self, status: RunStatus, error: str | None) -> str:
        """The final document of a run stopped by an error or a signal."""
        raise NotImplementedError

    def _ended(self, exc: BaseException | None) -> None:
        """The block ended with the final document written (or no file): anything after it."""

    def _takes_progress(self) -> bool:
        """Whether ``in progress`` documents are written: only into a regular file (a pipe or
        /dev/stdout gets the final document alone). Checked before a document is made, which costs
        as much as the plan is long."""
        path = self.path
        return path is not None and (not path.exists() or path.is_file())

    def _progress(self, document: str) -> None:
        """An ``in progress`` document, where :meth:`_takes_progress` (which the caller asks before
        making it)."""
        assert self.path is not None
        write_atomically(self.path, document)

    def _final(self, document: str) -> None:
        """The final document (again, when something is added to it)."""
        self.done = True
        if self.path is not None:
            write_atomically(self.path, document)


class Recorder(ReportLifecycle):
    """The ``--report`` file of one apply, true at every moment: an ``in progress`` document
    replaces the previous run's before the first real alter, and the final one is written however
    the apply ends — a result, an error (what was known then, and the error), Ctrl-C or SIGTERM
    (``interrupted``). A report from an older run is never left standing."""

    def __init__(self, path: Path | None, where: str, as_json: bool, streams: Streams) -> None:
        super().__init__(path)
        self.where, self.as_json, self.streams = where, as_json, streams
        self.journal: Journal | None = None
        self.digest: str | None = None
        self._result: ApplyReport | None = None
        self._enforcement: dict[str, Any] | None = None
        """The report's ``enforcement`` object: ``in progress`` while apply watches the metrics."""

    def planned(self, plan: Plan, saved: Plan | None = None) -> Journal:
        """The plan is known: from now on a report lists its entities. ``saved``: the plan file's
        own plan (``plan`` is it retargeted at the cluster as it is now), whose digest the report
        records."""
        self.journal = Journal(plan)
        self.digest = (str(plan_to_json(saved or plan)["digest"]) if self.path is not None or self.as_json
                       else None)
        return self.journal

    def begin(self) -> None:
        """Before the first request that changes anything: ``in progress``, every entity not sent
        yet (only into a regular file: a pipe or /dev/stdout gets the final document alone)."""
        if self.journal is not None and self._takes_progress():
            self._progress(self._document(self.journal.report(RunStatus.IN_PROGRESS), finished=False))

    def finish(self, result: ApplyReport, *, quiet: bool = False, color: bool = False,
               verifying: bool = False) -> None:
        """The apply's result: the file, and stdout (the JSON document, or the text). ``verifying``:
        the metrics are watched next, so the file says ``enforcement: in progress`` and the JSON
        document waits for :meth:`enforced`."""
        self._result = result
        if verifying:
            self._enforcement = {"status": "in progress"}
        if self.path is None and not self.as_json:  # nobody reads the document: none is made
            self.done = True
        else:
            document = self._document(result, finished=True)
            self._final(document)
            if self.as_json and not verifying:
                self.streams.print(document, end="")
        if not quiet and not self.as_json:
            self.streams.print(render_apply(result, color=color), end="")

    def enforced(self, enforcement: dict[str, Any]) -> None:
        """The watch of the metrics ended: the report with its ``enforcement``, file and stdout."""
        assert self._result is not None
        self._enforcement = enforcement
        if self.path is None and not self.as_json:
            return
        document = self._document(self._result, finished=True)
        self._final(document)
        if self.as_json:
            self.streams.print(document, end="")

    def _ended(self, exc: BaseException | None) -> None:
        """The watch stopped early (Ctrl-C, SIGTERM, an error): the alter stands, the report says so."""
        if self._enforcement is not None and self._enforcement.get("status") == "in progress":
            status, error = stopped_by(exc)
            self.enforced({"status": status.value, "error": error})

    def _stopped_document(self, status: RunStatus, error: str | None) -> str:
        if self.journal is not None:
            result = self.journal.report(status, error)
        else:
            result = ApplyReport(ClusterRef(None, self.where), (), False, 0,
                                 {"describe": 0, "alter_validate": 0, "alter": 0}, status=status, error=error)
        return self._document(result, finished=True)

    def _document(self, result: ApplyReport, *, finished: bool) -> str:
        result = replace(result, started_at=self.started_at, plan_digest=self.digest,
                         finished_at=now() if finished else None)
        document = report_to_json(result)
        if self._enforcement is not None:
            document["enforcement"] = self._enforcement
        return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
