"""``kqplan.toml``'s schema as pydantic models: the general path of :mod:`kqplan.config.reader`,
taken when its plain check does not accept a file, and the one that locates every problem."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
)

from kqplan.config.locate import config_error, where
from kqplan.core.diagnostics import Diagnostic, DiagnosticsError, did_you_mean
from kqplan.core.entity import visible
from kqplan.core.filenames import component_problem
from kqplan.core.policy import DEFAULT_MAX_DELETE, DEFAULT_MAX_DELETE_PERCENT


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)


class _Custom(_Strict):
    entity_types: list[StrictStr] = Field(default_factory=list, alias="entity-types")
    keys: list[StrictStr] = Field(default_factory=list)


class _Limits(_Strict):
    max_file_mib: StrictInt = Field(default=128, alias="max-file-mib", gt=0)
    max_input_mib: StrictInt = Field(default=512, alias="max-input-mib", gt=0)


class _Cluster(_Strict):
    id: StrictStr | None = None
    bootstrap_server: StrictStr | None = Field(default=None, alias="bootstrap-server")
    command_config: StrictStr | None = Field(default=None, alias="command-config")
    snapshot: StrictStr | None = None
    manifests: list[StrictStr] = Field(default_factory=list)
    mode: StrictStr | None = None
    version: StrictStr | None = None


class _KeyBounds(_Strict):
    min: StrictInt | StrictFloat | StrictStr | StrictBool | None = None  # a bool kept: refused by its check
    max: StrictInt | StrictFloat | StrictStr | StrictBool | None = None


class _Policy(_Strict):
    max_delete: StrictInt = Field(default=DEFAULT_MAX_DELETE, alias="max-delete", ge=0)
    max_delete_percent: StrictInt | float = Field(default=DEFAULT_MAX_DELETE_PERCENT,
                                                  alias="max-delete-percent", ge=0, le=100)
    required_keys: list[StrictStr] = Field(default_factory=list, alias="required-keys")
    required_defaults: list[StrictStr] = Field(default_factory=list, alias="required-defaults")
    required_labels: list[StrictStr] = Field(default_factory=list, alias="required-labels")
    keys: dict[str, _KeyBounds] = Field(default_factory=dict)
    allow_unmanaged: StrictBool = Field(default=True, alias="allow-unmanaged")


class _ConfigFile(_Strict):
    custom: _Custom = Field(default_factory=_Custom)
    clusters: dict[str, StrictStr | _Cluster] = Field(default_factory=dict)
    policy: _Policy = Field(default_factory=_Policy)
    limits: _Limits = Field(default_factory=_Limits)


_FIELDS: dict[tuple[str, ...], tuple[str, ...]] = {
    (): ("clusters", "policy", "custom", "limits"),
    ("clusters", "*"): tuple(f.alias or n for n, f in _Cluster.model_fields.items()),
    ("policy",): tuple(f.alias or n for n, f in _Policy.model_fields.items()),
    ("policy", "keys", "*"): ("min", "max"),
    ("custom",): ("entity-types", "keys"),
    ("limits",): ("max-file-mib", "max-input-mib"),
}


def validate_document(path: Path, text: str, raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` checked against the schema, as :func:`kqplan.config.reader.plain_document` returns it
    (aliases, defaults filled in); every problem a located diagnostic (DiagnosticsError)."""
    named = name_problems(path, text, raw)
    try:
        doc = _ConfigFile.model_validate(raw)
    except ValidationError as exc:
        seen: dict[tuple[object, ...], Diagnostic] = {(d.span.line, d.message): d for d in named}
        for err in exc.errors():
            loc = err["loc"]
            if loc[:1] == ("clusters",) and len(loc) > 2:
                # ``NAME = "ID"`` or a table: report only the branch the value took
                branch = "_Cluster" if isinstance(raw.get("clusters", {}).get(loc[1]), dict) else "str"
                if loc[2] != branch:
                    continue
            diag = _translate(path, text, err)
            seen.setdefault((diag.span.line, diag.message), diag)
        raise DiagnosticsError(list(seen.values())) from None
    if named:
        raise DiagnosticsError(named)
    return doc.model_dump(by_alias=True)


def name_problems(path: Path, text: str, raw: dict[str, Any]) -> list[Diagnostic]:
    """A cluster name that cannot be one file name: the fleet commands write files named after
    each cluster under ``--out`` (``fleet snapshot``'s ``NAME.json``), so ``../evil`` or
    ``/abs/victim`` would write outside it."""
    listed = raw.get("clusters")
    if not isinstance(listed, dict):
        return []
    found = []
    seen: dict[str, str] = {}
    for name in listed:
        other = seen.setdefault(name.casefold(), name)
        if other != name:
            found.append(config_error(
                path, text, ("clusters", name),
                f"cluster name \"{visible(name)}\" differs from \"{visible(other)}\" only in case",
                "fleet commands write files named after each cluster under --out, and on macOS and "
                "Windows the two would be one file: rename one of them"))
            continue
        problem = component_problem(name)
        if problem is not None:
            found.append(config_error(
                path, text, ("clusters", name),
                f"cluster name \"{visible(name)}\" cannot be used: {problem}",
                "fleet commands write files named after each cluster under --out: name the cluster "
                "with letters, digits, '.', '_' and '-' (at most 200 bytes, not starting with '-')"))
    return found


def _translate(path: Path, text: str, error: Any) -> Diagnostic:
    loc = tuple(p for p in error["loc"] if not (isinstance(p, str) and p in ("str", "_Cluster")))
    loc = tuple(p for p in loc if not (isinstance(p, str) and p.startswith(("function-", "union["))))
    if error["type"] == "extra_forbidden":
        name = str(loc[-1])
        wildcard = {1} if loc[:1] == ("clusters",) else {2} if loc[:2] == ("policy", "keys") else set()
        generic = tuple("*" if i in wildcard else p for i, p in enumerate(loc[:-1]))
        choices = _FIELDS.get(tuple(map(str, generic)), ())
        guess = did_you_mean(name, choices)
        hint = f"did you mean '{guess}'?" if guess else (
            f"valid keys here: {', '.join(choices)}" if choices else None)
        table = where(loc[:-1])
        return config_error(path, text, loc, f"unknown key '{name}' in "
                             f"{'[' + table + ']' if loc[:-1] else 'the top level'}", hint)
    return config_error(path, text, loc, f"{where(loc)}: {error['msg']}")
