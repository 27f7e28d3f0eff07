"""Project configuration, ``kqplan.toml``: custom entity types and keys, cluster names, limits.

```toml
[custom]
entity-types = ["group"]        # KIP-546: entity types are open strings
keys = ["x_custom_rate"]        # passed through unvalidated

[clusters]                      # names usable in a manifest's `cluster:` guard
prod-eu = "MkU3OEVBNTcwNTJENDM2Qk"

[limits]
max-file-mib = 128              # refuse larger manifest files
```
Found in the current directory or its parents, unless ``--config`` names one.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kqplan.entity import BUILTIN_TYPES
from kqplan.errors import KqplanError
from kqplan.quotas import QUOTA_KEYS

CONFIG_NAME = "kqplan.toml"


class _Custom(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)
    entity_types: list[str] = Field(default_factory=list, alias="entity-types")
    keys: list[str] = Field(default_factory=list)


class _Limits(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)
    max_file_mib: int = Field(default=128, alias="max-file-mib", gt=0)


class _ConfigFile(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    custom: _Custom = Field(default_factory=_Custom)
    clusters: dict[str, str] = Field(default_factory=dict)
    limits: _Limits = Field(default_factory=_Limits)


@dataclass(frozen=True, slots=True)
class ProjectConfig:
    custom_entity_types: frozenset[str] = frozenset()
    custom_keys: frozenset[str] = frozenset()
    clusters: dict[str, str] = field(default_factory=dict)
    max_file_bytes: int = 128 * 1024 * 1024
    source: Path | None = None

    def cluster_id_for(self, guard: str) -> str:
        """A manifest's ``cluster:`` value as a cluster id (names map through [clusters])."""
        return self.clusters.get(guard, guard)


def load_config(path: Path) -> ProjectConfig:
    """Read and validate a ``kqplan.toml``."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise KqplanError(f"cannot read {path}: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise KqplanError(f"{path}: invalid TOML: {exc}") from None
    try:
        doc = _ConfigFile.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise KqplanError(f"{path}: [{where}] {err['msg']}") from None
    clash = set(doc.custom.entity_types) & set(BUILTIN_TYPES)
    if clash:
        raise KqplanError(f"{path}: custom.entity-types redeclares built-in type(s) {sorted(clash)}")
    clash = set(doc.custom.keys) & set(QUOTA_KEYS)
    if clash:
        raise KqplanError(f"{path}: custom.keys redeclares built-in key(s) {sorted(clash)}")
    return ProjectConfig(
        custom_entity_types=frozenset(doc.custom.entity_types),
        custom_keys=frozenset(doc.custom.keys),
        clusters=dict(doc.clusters),
        max_file_bytes=doc.limits.max_file_mib * 1024 * 1024,
        source=path,
    )


def find_config(start: Path) -> ProjectConfig:
    """The nearest ``kqplan.toml`` at or above ``start``, or the defaults."""
    here = start.resolve()
    for directory in (here, *here.parents):
        candidate = directory / CONFIG_NAME
        if candidate.is_file():
            return load_config(candidate)
    return ProjectConfig()
