"""Fault injection for the sandbox broker: what a real cluster does to a client on a bad day.

Faults are set at start (``SandboxConfig.faults``) or at run time (``sandbox.faults.add``) and
are matched per request in the order they were added. They exist so kqplan's apply protocol
can be tested against dropped connections, slow or failing requests and read-after-write lag
(DESIGN §3.5), none of which a healthy broker shows on demand.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from enum import StrEnum

from kqplan.core.entity import Entity

API_KEYS = {"metadata": 3, "apiversions": 18, "describe": 48, "alter": 49, "describecluster": 60}


class Drop(StrEnum):
    """Close the connection instead of answering; for an alter, before or after committing it."""

    BEFORE = "before"
    AFTER = "after"


@dataclass(frozen=True, slots=True)
class Fault:
    """One injected misbehaviour for requests of one API (by name, see ``API_KEYS``).

    ``times`` bounds how many requests it hits (None: all), after the first ``skip`` of them
    have passed untouched. An alter fault hits real alters
    only unless ``validate_only`` is set, so a pre-flight can pass and the alter still fail.
    ``delay_ms`` waits before the request is handled; ``answer_delay_ms`` after (an alter is
    committed, its answer held back): the window in which another writer can change what was
    just written before the client has its answer and verifies.
    """

    api: str
    delay_ms: int = 0
    drop: Drop | None = None
    error_code: int | None = None
    error_message: str | None = None
    entities: frozenset[Entity] = frozenset()  # alter: only these entities fail
    times: int | None = None
    validate_only: bool = False
    answer_delay_ms: int = 0
    skip: int = 0

    def __post_init__(self) -> None:
        if self.api not in API_KEYS:
            raise ValueError(f"unknown API {self.api!r}; one of {', '.join(API_KEYS)}")
        if self.entities and (self.api != "alter" or self.error_code is None):
            raise ValueError("failing named entities needs api='alter' and an error_code")
        if not all(isinstance(e, Entity) for e in self.entities):
            # a string such as "user=b" would silently match nothing
            raise ValueError("entities must be kqplan.core.entity.Entity values, e.g. Entity.user('b')")

    @property
    def api_key(self) -> int:
        return API_KEYS[self.api]


@dataclass(slots=True)
class _Armed:
    fault: Fault
    left: int | None
    skip: int = 0


@dataclass
class Faults:
    """The faults in force, safe to change from any thread while the broker runs."""

    lag_ms: int = 0
    """After a committed alter, describe serves the state from before it for this long."""
    _armed: list[_Armed] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, fault: Fault) -> None:
        with self._lock:
            self._armed.append(_Armed(fault, fault.times, fault.skip))

    def clear(self) -> None:
        with self._lock:
            self._armed.clear()
            self.lag_ms = 0

    def take(self, api_key: int, *, validate_only: bool = False) -> list[Fault]:
        """The faults that hit this request, counting it against their ``times``."""
        hits: list[Fault] = []
        with self._lock:
            for armed in self._armed:
                fault = armed.fault
                if fault.api_key != api_key or (api_key == 49 and validate_only and not fault.validate_only):
                    continue
                if armed.skip > 0:
                    armed.skip -= 1
                    continue
                if armed.left is not None:
                    if armed.left <= 0:
                        continue
                    armed.left -= 1
                hits.append(fault)
        return hits
