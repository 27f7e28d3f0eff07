"""Reading ``kqplan.toml`` (:mod:`kqplan.config` holds what it becomes): its schema as pydantic
models and every problem as a located KQP190 diagnostic. A module of its own so that a command
run where there is no ``kqplan.toml`` never imports pydantic for it."""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError

from kqplan.config import (
    CONFIG_ERROR,
    DEFAULT_MAX_DELETE,
    DEFAULT_MAX_DELETE_PERCENT,
    ClusterEntry,
    KeyBounds,
    Policy,
    ProjectConfig,
)
from kqplan.diagnostics import Diagnostic, DiagnosticsError, Span, did_you_mean
from kqplan.entity import BUILTIN_TYPES, CLIENT_ID, IP, USER
from kqplan.errors import KqplanError
from kqplan.quotas import QUOTA_KEYS


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)


class _Custom(_Strict):
    entity_types: list[StrictStr] = Field(default_factory=list, alias="entity-types")
    keys: list[StrictStr] = Field(default_factory=list)


class _Limits(_Strict):
    max_file_mib: StrictInt = Field(default=128, alias="max-file-mib", gt=0)


class _Cluster(_Strict):
    id: StrictStr | None = None
    bootstrap_server: StrictStr | None = Field(default=None, alias="bootstrap-server")
    command_config: StrictStr | None = Field(default=None, alias="command-config")
    snapshot: StrictStr | None = None
    manifests: list[StrictStr] = Field(default_factory=list)
    mode: StrictStr | None = None
    version: StrictStr | None = None


class _KeyBounds(_Strict):
    min: StrictInt | float | StrictStr | None = None
    max: StrictInt | float | StrictStr | None = None


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
    ("limits",): ("max-file-mib",),
}


def _locate(text: str, loc: Sequence[str | int]) -> tuple[int, int]:
    """Line and column of a TOML key path: the key's own line, else its table header."""
    keys = [str(p) for p in loc]
    best = (1, 1)
    table: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line.startswith("["):
            table = [p.strip().strip('"') for p in line.strip("[]").split(".")]
            if keys[:len(table)] == table:
                best = (number, raw.index("[") + 1)
            continue
        name = line.split("=", 1)[0].strip().strip('"') if "=" in line else None
        if name is None:
            continue
        path = [*table, *[p.strip().strip('"') for p in name.split(".")]]
        if keys[:len(path)] == path:
            best = (number, raw.index(line[0]) + 1)
            if len(path) >= len(keys):
                return best
    return best


def _config_error(path: Path, text: str, loc: Sequence[str | int], message: str,
                  hint: str | None = None) -> Diagnostic:
    line, col = _locate(text, loc)
    return Diagnostic(CONFIG_ERROR, message, Span(str(path), line, col), hint=hint)


def _where(loc: Sequence[str | int]) -> str:
    return ".".join(str(p) for p in loc) or "(top level)"


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
        table = _where(loc[:-1])
        return _config_error(path, text, loc, f"unknown key '{name}' in "
                             f"{'[' + table + ']' if loc[:-1] else 'the top level'}", hint)
    return _config_error(path, text, loc, f"{_where(loc)}: {error['msg']}")


def _bound(path: Path, text: str, key: str, which: str, raw: object, *,
           problems: list[Diagnostic]) -> float | None:
    if raw is None:
        return None
    loc = ("policy", "keys", key, which)
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        problems.append(_config_error(path, text, loc, f"policy.keys.{key}.{which} must be a number"))
        return None
    if isinstance(raw, str):
        from kqplan.units import UnitError, parse_bytes

        spec = QUOTA_KEYS.get(key)
        if spec is None or not spec.bytes_per_second:
            problems.append(_config_error(path, text, loc, f"policy.keys.{key}.{which}: {key} takes "
                                          f"a plain number, not '{raw}'"))
            return None
        try:
            return float(parse_bytes(raw))
        except UnitError as exc:
            problems.append(_config_error(path, text, loc, f"policy.keys.{key}.{which}: {exc}",
                                          exc.hint))
            return None
    return float(raw)


def _entry(base: Path, name: str, raw: str | _Cluster) -> ClusterEntry:
    if isinstance(raw, str):
        return ClusterEntry(name, id=raw)

    def rel(value: str | None) -> Path | None:
        return None if value is None else (base / value)

    return ClusterEntry(name, id=raw.id, bootstrap=raw.bootstrap_server,
                        command_config=rel(raw.command_config), snapshot=rel(raw.snapshot),
                        manifests=tuple(base / m for m in raw.manifests), mode=raw.mode,
                        version=raw.version)


def _check_clusters(path: Path, text: str, doc: _ConfigFile, problems: list[Diagnostic]) -> None:
    for name, raw in doc.clusters.items():
        if isinstance(raw, str):
            continue
        loc = ("clusters", name)
        if raw.bootstrap_server is not None and raw.snapshot is not None:
            problems.append(_config_error(path, text, (*loc, "snapshot"),
                                          f"cluster '{name}' has both bootstrap-server and snapshot",
                                          "a cluster has one target: keep one of them"))
        if raw.command_config is not None and raw.bootstrap_server is None:
            problems.append(_config_error(path, text, (*loc, "command-config"),
                                          f"cluster '{name}': command-config without bootstrap-server"))
        if raw.mode is not None and raw.mode not in ("kraft", "zookeeper"):
            problems.append(_config_error(path, text, (*loc, "mode"),
                                          f"cluster '{name}': mode must be kraft or zookeeper, "
                                          f"not '{raw.mode}'"))
        for i, layer in enumerate(raw.manifests):
            if not (path.parent / layer).exists():
                problems.append(_config_error(path, text, (*loc, "manifests"),
                                              f"cluster '{name}': manifests layer '{layer}' does not "
                                              "exist", f"paths are relative to {path.parent}"))
            if raw.manifests.index(layer) != i:
                problems.append(_config_error(path, text, (*loc, "manifests"),
                                              f"cluster '{name}': layer '{layer}' is listed twice"))


def _policy(path: Path, text: str, doc: _ConfigFile, custom_keys: frozenset[str],
            problems: list[Diagnostic]) -> Policy:
    raw = doc.policy
    known_keys = set(QUOTA_KEYS) | custom_keys
    for key in raw.required_keys:
        if key not in known_keys:
            guess = did_you_mean(key, known_keys)
            problems.append(_config_error(path, text, ("policy", "required-keys"),
                                          f"policy.required-keys: unknown quota key '{key}'",
                                          f"did you mean '{guess}'?" if guess else None))
    defaults: list[tuple[str, ...]] = []
    for spec in raw.required_defaults:
        types = tuple(t.strip() for t in spec.split(","))
        canonical = tuple(t for t in (USER, CLIENT_ID, IP) if t in types)
        if len(canonical) != len(types) or not canonical or (IP in types and len(types) > 1):
            problems.append(_config_error(
                path, text, ("policy", "required-defaults"),
                f"policy.required-defaults: '{spec}' is not a default entity",
                "write \"user\", \"client-id\", \"user,client-id\" or \"ip\""))
            continue
        defaults.append(canonical)
    bounds = []
    for key, b in raw.keys.items():
        if key not in known_keys:
            guess = did_you_mean(key, known_keys)
            problems.append(_config_error(path, text, ("policy", "keys", key),
                                          f"policy.keys: unknown quota key '{key}'",
                                          f"did you mean '{guess}'?" if guess else None))
            continue
        low = _bound(path, text, key, "min", b.min, problems=problems)
        high = _bound(path, text, key, "max", b.max, problems=problems)
        if low is not None and high is not None and low > high:
            problems.append(_config_error(path, text, ("policy", "keys", key),
                                          f"policy.keys.{key}: min is above max"))
        bounds.append(KeyBounds(key, low, high))
    return Policy(raw.max_delete, float(raw.max_delete_percent), tuple(raw.required_keys),
                  tuple(defaults), tuple(raw.required_labels), tuple(bounds), raw.allow_unmanaged, path)


def read_config(path: Path) -> ProjectConfig:
    """Read and validate a ``kqplan.toml``; every problem located (DiagnosticsError)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise KqplanError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise KqplanError(f"{path}: not UTF-8", hint="save kqplan.toml as UTF-8") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise KqplanError(f"{path}: invalid TOML: {exc}") from None
    try:
        doc = _ConfigFile.model_validate(raw)
    except ValidationError as exc:
        seen: dict[tuple[object, ...], Diagnostic] = {}
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
    problems: list[Diagnostic] = []
    clash = set(doc.custom.entity_types) & set(BUILTIN_TYPES)
    if clash:
        problems.append(_config_error(path, text, ("custom", "entity-types"),
                                      f"custom.entity-types redeclares built-in type(s) {sorted(clash)}"))
    clash = set(doc.custom.keys) & set(QUOTA_KEYS)
    if clash:
        problems.append(_config_error(path, text, ("custom", "keys"),
                                      f"custom.keys redeclares built-in key(s) {sorted(clash)}"))
    _check_clusters(path, text, doc, problems)
    custom_keys = frozenset(doc.custom.keys)
    policy = _policy(path, text, doc, custom_keys, problems)
    if problems:
        raise DiagnosticsError(problems)
    base = path.parent.resolve()
    return ProjectConfig(
        custom_entity_types=frozenset(doc.custom.entity_types),
        custom_keys=custom_keys,
        clusters={name: _entry(base, name, raw) for name, raw in doc.clusters.items()},
        policy=policy,
        max_file_bytes=doc.limits.max_file_mib * 1024 * 1024,
        source=path,
    )


