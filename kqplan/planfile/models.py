"""The saved plan's schema (DESIGN §3.3) as pydantic models, validated by
:func:`kqplan.planfile.codec.loads_plan`.

A module of its own, imported only when a plan file is read: writing a plan never imports
pydantic.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from kqplan.core.entity import Name
from kqplan.core.plan import Action


class _OpFile(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    key: str
    value: float | None
    remove: bool


class _ChangeFile(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    entity: dict[str, Name]
    display: str
    action: Action
    before: dict[str, float] | None
    after: dict[str, float] | None
    ops: list[_OpFile]
    origin: str | None = None
    metadata: dict[str, Any] | None = None


class _UnmanagedFile(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    entity: dict[str, Name]
    display: str
    quotas: dict[str, float]


class _ClusterFile(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    id: str | None
    bootstrap: str
    version: str | None = None
    mode: str | None = None
    brokers: int | None = None
    name: str | None = None


class PlanFile(BaseModel):
    """A saved plan, validated on read."""

    model_config = ConfigDict(extra="forbid", defer_build=True)
    format_version: Literal[1]
    cluster: _ClusterFile
    now: str | None = None
    valid_until: str | None = None
    expiring: dict[str, str] = {}
    expired: dict[str, list[str]] = {}
    expired_at: dict[str, str] = {}
    budgets: dict[str, dict[str, float]] = {}
    state_fingerprint: str | None
    summary: dict[str, int]
    changes: list[_ChangeFile]
    notes: list[str] = []
    unmanaged: list[_UnmanagedFile] = []
    digest: str | None = None
    """Mandatory in fact (every plan kqplan writes has one): a plan without it is refused as
    edited by :func:`kqplan.planfile.codec.loads_plan`, after the consistency checks, so that a
    hand edit is always named for what it breaks."""
