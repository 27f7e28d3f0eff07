"""Who owns a quota and why: ``metadata`` on manifests and entities (labels, description).

Kept through export/import, shown in plan JSON, checked by label policies; never part of the
diff (Kafka stores no such thing).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Metadata:
    labels: tuple[tuple[str, str], ...] = ()
    """Sorted (name, value) pairs."""
    description: str | None = None

    @classmethod
    def of(cls, labels: Mapping[str, str] | None = None, description: str | None = None) -> Metadata:
        return cls(tuple(sorted((labels or {}).items())), description)

    def merged_over(self, base: Metadata | None) -> Metadata:
        """This entry's metadata over a document's (or an earlier layer's): labels merge."""
        if base is None:
            return self
        labels = dict(base.labels) | dict(self.labels)
        return Metadata.of(labels, self.description if self.description is not None else base.description)

    def to_json(self) -> dict[str, Any]:
        return {"labels": dict(self.labels), "description": self.description}
