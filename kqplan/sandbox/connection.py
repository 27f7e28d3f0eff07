"""One client connection's state as the sandbox serves it (its listener, who authenticated and how
far its SASL exchange got), and ``Close``: what a handler raises to hang up without answering."""

from __future__ import annotations

from dataclasses import dataclass

from kqplan.sandbox import scram
from kqplan.sandbox.config import Listener


class Close(Exception):
    """Close the connection without answering (what a broker does with garbage)."""


@dataclass
class Connection:
    id: int
    listener: Listener
    address: tuple[str, int]
    user: str | None = None
    mechanism: str | None = None
    raw_sasl: bool = False  # SaslHandshake v0: the next frames are bare SASL tokens
    scram: scram.ScramServer | None = None  # the SCRAM exchange under way, if that mechanism
