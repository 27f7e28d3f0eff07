"""The manifest as pydantic models: the shape of untrusted input and the source of the JSON Schema.

Shape only. Kafka's rules (keys per entity kind, value ranges, units, ip combinations) are
applied afterwards by :mod:`kqplan.manifest.compile`, because they depend on project config
(custom entity types and keys) and their messages need kqplan's own words and hints.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

from kqplan.core.quotas import QUOTA_KEYS, ValueType
from kqplan.core.units import UNITS
from kqplan.manifest.head import API_VERSION, KIND

__all__ = ["API_VERSION", "KIND", "EntityEntry", "Manifest", "Metadata", "Ownership", "json_schema"]

_UNIT_PATTERN = r"^\s*[0-9]+(\.[0-9]+)?\s*(" + "|".join(UNITS) + r")\s*$"

QuotaScalar = StrictInt | StrictFloat | StrictStr
QuotaValue = QuotaScalar | dict[StrictStr, QuotaScalar]
"""A number, or for byte rates a number with a unit (``10MiB``); or a cluster-wide budget,
``{per-cluster: 300MiB}`` (its shape is checked by compile, in kqplan's words: KQP117)."""
_WHEN_PATTERN = (r"^\d{4}-\d{2}-\d{2}([Tt ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?([Zz]|[+-]\d{2}(:?\d{2})?)?)?$")


def _quota_map_schema(schema: dict[str, Any]) -> None:
    """Describe the known keys for editors; other keys are allowed (custom keys in kqplan.toml)."""
    props: dict[str, Any] = {}
    for key in QUOTA_KEYS.values():
        number: dict[str, Any] = {"type": "number", "exclusiveMinimum": 0}
        if key.type is not ValueType.DOUBLE:
            number["multipleOf"] = 1
        removal = {"type": "null", "description": "only with override: true: remove the key"}
        if key.bytes_per_second:
            scalars: list[dict[str, Any]] = [number, {"type": "string", "pattern": _UNIT_PATTERN}]
            props[key.name] = {
                "description": f"{key.summary} ({key.type.value}); a number or e.g. 10MiB, or a "
                "cluster-wide budget {per-cluster: 300MiB}",
                "anyOf": [*scalars, _budget_schema(scalars), removal],
            }
        else:
            props[key.name] = {"description": f"{key.summary} ({key.type.value}); or a cluster-wide "
                               "budget {per-cluster: N}",
                               "anyOf": [number, _budget_schema([number]), removal]}
    schema["properties"] = props


def _expires_schema(schema: dict[str, Any]) -> None:
    schema.pop("anyOf", None)
    schema.update({"type": "string", "pattern": _WHEN_PATTERN})


def _budget_schema(scalars: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "object", "description": "A cluster-wide budget: plan divides it by the cluster's "
            "broker count (rounded down for whole-number keys).", "required": ["per-cluster"],
            "additionalProperties": False, "properties": {"per-cluster": {"anyOf": scalars}}}


QUOTAS_FIELD: Any = Field(
    default_factory=dict,
    description="Quota key → value. Keys this entity does not list are removed on apply. In an "
    "entry with `override: true`, null removes a key the earlier layer set.",
    json_schema_extra=_quota_map_schema,
)


class Metadata(BaseModel):
    """Who owns a quota and why; kept through export/import, shown in plans, never diffed."""

    model_config = ConfigDict(extra="forbid")
    labels: dict[str, StrictStr] = Field(
        default_factory=dict,
        description="Free-form labels, e.g. team: payments (policies may require some).")
    description: StrictStr | None = Field(default=None, description="Why this quota exists.")


class EntityEntry(BaseModel):
    """One quota entity: its entity types inline (``user``, ``client-id``, ``ip``) and quotas."""

    model_config = ConfigDict(
        extra="allow",  # custom entity types declared in kqplan.toml; checked in compile
        populate_by_name=True,
        json_schema_extra={"additionalProperties": {"type": "string"}},
    )
    user: StrictStr | None = Field(
        default=None,
        description="User principal name (no 'User:' prefix). <default> is the default user; "
        "write \\<default> for a principal literally named <default>.",
    )
    client_id: StrictStr | None = Field(
        default=None, alias="client-id", description="Client id; <default> is the default client."
    )
    ip: StrictStr | None = Field(
        default=None, description="IP address or resolvable host; <default> is the default ip."
    )
    profile: StrictStr | None = Field(
        default=None, description="Name of a profile whose quotas this entity starts from."
    )
    override: StrictBool = Field(
        default=False, description="Override the same entity from an earlier manifests layer: keys "
        "are merged over the earlier entry (null removes one). Without it, a repeat is an error.")
    protect: StrictBool = Field(
        default=False, description="Refuse any plan that would delete this entity.")
    expires: StrictStr | StrictInt | StrictFloat | StrictBool | None = Field(  # compile says: KQP123
        default=None, description="A temporary entry: a date (2026-12-01, midnight UTC) or an ISO 8601 "
        "datetime (UTC unless a zone is given). From then on the entry is treated as absent: an "
        "override falls back to the layer beneath, an entity only listed here is deleted under prune.",
        json_schema_extra=_expires_schema)
    metadata: Metadata | None = None
    quotas: dict[str, QuotaValue | None] = QUOTAS_FIELD


class Ownership(BaseModel):
    """Which entities kqplan manages beyond the listed ones."""

    model_config = ConfigDict(extra="forbid")
    prune: StrictBool = Field(
        default=False, description="Delete entities inside the scope that no manifest lists."
    )
    scope: list[dict[str, StrictStr]] = Field(
        min_length=1,
        description="Entity patterns: entity type → glob on the name (fnmatch); <default> "
        "matches the default entity. An entity matches when it has every listed type "
        "with a matching name (other types are ignored, as in a non-strict Kafka filter).",
    )


class Manifest(BaseModel):
    """A kqplan manifest file (``apiVersion: kqplan/v1``, ``kind: ClientQuotas``)."""

    model_config = ConfigDict(
        extra="forbid",
        title="kqplan ClientQuotas manifest",
        json_schema_extra={"$id": "https://kqplan.dev/schemas/manifest-v1.json"},
    )
    apiVersion: Literal["kqplan/v1"]
    kind: Literal["ClientQuotas"]
    cluster: StrictStr | None = Field(
        default=None,
        description="Guard: plan/apply refuse any other cluster (an id, or a name from kqplan.toml).",
    )
    metadata: Metadata | None = Field(
        default=None, description="Labels and description for every entity of this file (an "
        "entity's own metadata wins, label by label).")
    ownership: Ownership | None = None
    profiles: dict[str, dict[str, QuotaValue]] = Field(
        default_factory=dict, description="Reusable quota sets; an entity's own quotas win."
    )
    released: list[dict[StrictStr, StrictStr]] = Field(
        default_factory=list, description="Entities kqplan stops managing and leaves on the cluster as "
        "they are, written as in `entities` ({user: legacy}): never deleted under a prune scope, never "
        "changed, never reported as unmanaged. An entity both listed and released is an error.")
    entities: list[EntityEntry] = Field(default_factory=list)


def json_schema() -> dict[str, Any]:
    """The manifest JSON Schema as checked in under ``schemas/``."""
    schema = Manifest.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema
