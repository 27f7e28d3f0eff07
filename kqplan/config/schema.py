"""``kqplan.toml``'s schema as pydantic models: the general path of :mod:`kqplan.config.reader`,
taken when its plain check does not accept a file, and the one that locates every problem.

Every problem of one file is found in one run, in kqplan's words: pydantic decides what is
wrong and where, the message says what the value must be (``policy.max-delete: must be a whole
number ≥ 0, not 'ten'``), never pydantic's own wording. What is wrong is taken out and the rest
checked again, so that the document comes back with its defaults in those places and the
reader's checks (layers, units, quota keys) run on everything else in the same run."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

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

from kqplan.config.locate import config_error
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
    engine_memory_mib: StrictInt | None = Field(default=None, alias="engine-memory-mib", gt=0)
    engine_spill: StrictStr | None = Field(default=None, alias="engine-spill")


class _Cluster(_Strict):
    id: StrictStr | None = None
    bootstrap_server: StrictStr | None = Field(default=None, alias="bootstrap-server")
    command_config: StrictStr | None = Field(default=None, alias="command-config")
    snapshot: StrictStr | None = None
    manifests: list[StrictStr] = Field(default_factory=list)
    mode: StrictStr | None = None
    version: StrictStr | None = None
    brokers: StrictInt | None = Field(default=None, ge=1)
    metrics: _Metrics | None = None


class _Principal(_Strict):
    user: StrictStr
    client_id: StrictStr | None = Field(default=None, alias="client-id")


class _KeyBounds(_Strict):
    min: StrictInt | StrictFloat | StrictStr | StrictBool | None = None  # a bool kept: refused by its check
    max: StrictInt | StrictFloat | StrictStr | StrictBool | None = None


class _Policy(_Strict):
    max_delete: StrictInt = Field(default=DEFAULT_MAX_DELETE, alias="max-delete", ge=0)
    max_delete_percent: StrictInt | StrictFloat = Field(default=DEFAULT_MAX_DELETE_PERCENT,
                                                  alias="max-delete-percent", ge=0, le=100)
    required_keys: list[StrictStr] = Field(default_factory=list, alias="required-keys")
    required_defaults: list[StrictStr] = Field(default_factory=list, alias="required-defaults")
    required_labels: list[StrictStr] = Field(default_factory=list, alias="required-labels")
    keys: dict[str, _KeyBounds] = Field(default_factory=dict)
    allow_unmanaged: StrictBool = Field(default=True, alias="allow-unmanaged")
    expiry_warning: StrictStr = Field(default="7d", alias="expiry-warning")
    max_expiry: StrictStr | None = Field(default=None, alias="max-expiry")
    protected_principals: list[_Principal] = Field(default_factory=list, alias="protected-principals")
    quota_callback: Literal["warn", "error"] = Field(default="warn", alias="quota-callback")
    allowed_quota_callbacks: list[StrictStr] = Field(default_factory=list, alias="allowed-quota-callbacks")


class _Metrics(_Strict):
    prometheus: StrictStr | None = None
    selector: StrictStr | None = None
    headers_file: StrictStr | None = Field(default=None, alias="headers-file")
    names: list[StrictStr] = Field(default_factory=list)


class _Rollout(_Strict):
    waves: list[list[StrictStr]] = Field(default_factory=list)


class _ConfigFile(_Strict):
    custom: _Custom = Field(default_factory=_Custom)
    clusters: dict[str, StrictStr | _Cluster] = Field(default_factory=dict)
    policy: _Policy = Field(default_factory=_Policy)
    limits: _Limits = Field(default_factory=_Limits)
    rollout: _Rollout = Field(default_factory=_Rollout)
    metrics: _Metrics = Field(default_factory=_Metrics)


_FIELDS: dict[tuple[str, ...], tuple[str, ...]] = {
    (): ("clusters", "policy", "custom", "limits", "rollout", "metrics"),
    ("metrics",): ("prometheus", "selector", "headers-file", "names"),
    ("clusters", "*", "metrics"): ("prometheus", "selector", "headers-file", "names"),
    ("rollout",): ("waves",),
    ("clusters", "*"): tuple(f.alias or n for n, f in _Cluster.model_fields.items()),
    ("policy",): tuple(f.alias or n for n, f in _Policy.model_fields.items()),
    ("policy", "keys", "*"): ("min", "max"),
    ("policy", "protected-principals", "#"): ("user", "client-id"),
    ("custom",): ("entity-types", "keys"),
    ("limits",): ("max-file-mib", "max-input-mib", "engine-memory-mib", "engine-spill"),
}

_PATH = "a file path in quotes"
_PROMETHEUS = 'the Prometheus base URL in quotes, such as "http://prometheus:9090"'
_SELECTOR = """a PromQL label selector in quotes, such as '{kafka_cluster="{cluster}"}'"""
_NAMES = 'a list of metric-name overrides in quotes, such as ["label.broker=pod"]'
_EXPECTED: dict[tuple[str, ...], str] = {
    ("clusters",): "a table of clusters, one [clusters.NAME] table each",
    ("clusters", "*"): "a cluster id in quotes, or a [clusters.NAME] table",
    ("clusters", "*", "id"): "a cluster id in quotes",
    ("clusters", "*", "bootstrap-server"): 'HOST:PORT in quotes, such as "kafka:9092"',
    ("clusters", "*", "command-config"): _PATH,
    ("clusters", "*", "snapshot"): _PATH,
    ("clusters", "*", "manifests"): 'a list of directories in quotes, such as ["base", "overlays/prod"]',
    ("clusters", "*", "manifests", "#"): "a directory in quotes",
    ("clusters", "*", "mode"): '"kraft" or "zookeeper"',
    ("clusters", "*", "version"): 'a Kafka version in quotes, such as "3.9"',
    ("policy",): "a table ([policy])",
    ("policy", "max-delete"): "a whole number ≥ 0",
    ("policy", "max-delete-percent"): "a number from 0 to 100",
    ("policy", "required-keys"): 'a list of quota keys in quotes, such as ["producer_byte_rate"]',
    ("policy", "required-keys", "#"): "a quota key in quotes",
    ("policy", "required-defaults"): 'a list such as ["user", "user,client-id", "ip"]',
    ("policy", "required-defaults", "#"): '"user", "client-id", "user,client-id" or "ip"',
    ("policy", "required-labels"): 'a list of label names in quotes, such as ["team"]',
    ("policy", "required-labels", "#"): "a label name in quotes",
    ("policy", "keys"): "a table of [policy.keys.KEY] tables",
    ("policy", "keys", "*"): "a table with min and/or max",
    ("policy", "keys", "*", "min"): 'a number, or a size in quotes such as "10MiB"',
    ("policy", "keys", "*", "max"): 'a number, or a size in quotes such as "10MiB"',
    ("policy", "allow-unmanaged"): "true or false",
    ("policy", "expiry-warning"): 'a duration in quotes, such as "7d" (ms, s, m, h, d or w)',
    ("policy", "max-expiry"): 'a duration in quotes, such as "30d" (ms, s, m, h, d or w)',
    ("policy", "protected-principals"): 'a list such as [{user = "canary", client-id = "probe"}]',
    ("policy", "protected-principals", "#"): 'a table such as {user = "canary"}, with an optional client-id',
    ("policy", "protected-principals", "#", "user"): "a user name in quotes",
    ("policy", "protected-principals", "#", "client-id"): "a client-id in quotes",
    ("policy", "quota-callback"): '"warn" or "error"',
    ("policy", "allowed-quota-callbacks"): 'a list of class names in quotes, such as ["com.example.Quotas"]',
    ("policy", "allowed-quota-callbacks", "#"): "a class name in quotes",
    ("clusters", "*", "brokers"): "a whole number of brokers, 1 or more",
    ("custom",): "a table ([custom])",
    ("custom", "entity-types"): 'a list of type names in quotes, such as ["group"]',
    ("custom", "entity-types", "#"): "a type name in quotes",
    ("custom", "keys"): 'a list of quota key names in quotes, such as ["x_custom_rate"]',
    ("custom", "keys", "#"): "a key name in quotes",
    ("limits",): "a table ([limits])",
    ("rollout",): "a table ([rollout])",
    ("metrics",): "a table ([metrics])",
    ("metrics", "prometheus"): _PROMETHEUS,
    ("metrics", "selector"): _SELECTOR,
    ("metrics", "headers-file"): _PATH,
    ("metrics", "names"): _NAMES,
    ("metrics", "names", "#"): "an override ROLE.KEY=NAME in quotes",
    ("clusters", "*", "metrics"): "a table ([clusters.NAME.metrics])",
    ("clusters", "*", "metrics", "prometheus"): _PROMETHEUS,
    ("clusters", "*", "metrics", "selector"): _SELECTOR,
    ("clusters", "*", "metrics", "headers-file"): _PATH,
    ("clusters", "*", "metrics", "names"): _NAMES,
    ("clusters", "*", "metrics", "names", "#"): "an override ROLE.KEY=NAME in quotes",
    ("rollout", "waves"): ('a list of waves, each a list of cluster names: '
                           '[["staging"], ["prod-eu", "prod-us"]]'),
    ("rollout", "waves", "#"): 'a list of cluster names in quotes, such as ["prod-eu", "prod-us"]',
    ("rollout", "waves", "#", "#"): "a cluster name in quotes",
    ("limits", "max-file-mib"): "a whole number of MiB greater than 0",
    ("limits", "max-input-mib"): "a whole number of MiB greater than 0",
    ("limits", "engine-memory-mib"): "a whole number of MiB greater than 0",
    ("limits", "engine-spill"): 'a directory in quotes (from kqplan.toml\'s), or "" to spill nowhere',
}
"""What each value must be, in kqplan's words: the message of every problem but an unknown key."""

Path_ = tuple[str | int, ...]
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_PASSES = 8
"""Checks of one document at most: each takes out at least one wrong value, and values nest
four deep, so two or three do in practice."""


def validate_document(path: Path, text: str, raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` checked against the schema, as :func:`kqplan.config.reader.plain_document` returns it
    (aliases, defaults filled in); every problem a located diagnostic (DiagnosticsError)."""
    doc, problems = checked_document(path, text, raw)
    if problems:
        raise DiagnosticsError(problems)
    return doc


def checked_document(path: Path, text: str, raw: dict[str, Any]) -> tuple[dict[str, Any], list[Diagnostic]]:
    """``raw`` as :func:`validate_document` returns it, with every wrong value taken out (its
    default in its place), and every problem found, each once."""
    import copy

    named = name_problems(path, text, raw)
    problems = [diag for _, diag in named]
    work = copy.deepcopy(raw)
    for name, _ in named:  # a cluster whose name cannot be one is left out of the rest
        del work["clusters"][name]
    seen: set[tuple[int, str]] = {(d.span.line, d.message) for d in problems}
    for _ in range(_PASSES):
        try:
            return _ConfigFile.model_validate(work).model_dump(by_alias=True), problems
        except ValidationError as exc:
            wrong: list[Path_] = []
            for err in exc.errors():
                at = _data_path(work, err["loc"])
                if at is None:
                    continue
                diag = _problem(path, text, work, at, err["type"])
                if (diag.span.line, diag.message) not in seen:
                    seen.add((diag.span.line, diag.message))
                    problems.append(diag)
                wrong.append(at)
            if not _take_out(work, wrong):
                break
    return _ConfigFile().model_dump(by_alias=True), problems


def _data_path(raw: dict[str, Any], loc: tuple[str | int, ...]) -> Path_ | None:
    """Where an error of pydantic's is in the document: its ``loc`` without the union branches
    (``str``, ``_Cluster``, ``int``…); None for the branch a cluster's value did not take (``NAME
    = "ID"`` or a table: only the one it is counts)."""
    if loc[:1] == ("clusters",) and len(loc) > 2 and isinstance(raw.get("clusters"), dict):
        branch = "_Cluster" if isinstance(raw["clusters"].get(loc[1]), dict) else "str"
        if loc[2] != branch:
            return None
    at: list[str | int] = []
    here: object = raw
    for part in loc:
        inside = (part in here if isinstance(here, dict) else
                  isinstance(here, list) and isinstance(part, int) and 0 <= part < len(here))
        if inside:  # else a union branch's name
            at.append(part)
            here = here[part]  # type: ignore[index]
    return tuple(at)


def _value(raw: object, at: Path_) -> object:
    for part in at:
        raw = raw[part]  # type: ignore[index]
    return raw


def _take_out(raw: dict[str, Any], wrong: list[Path_]) -> bool:
    """Remove each wrong value (the deepest first, list items from the last); False when there
    was nothing to remove (the document cannot be made valid this way)."""
    removed = False
    for at in sorted(set(wrong), key=lambda p: (len(p), [str(x) for x in p]), reverse=True):
        if not at:
            continue
        try:
            parent = _value(raw, at[:-1])
            del parent[at[-1]]  # type: ignore[attr-defined]
            removed = True
        except (KeyError, IndexError, TypeError):
            continue  # inside a value removed already
    return removed


def _generic(at: Path_) -> tuple[str, ...]:
    """``at`` with the names a user chooses (a cluster, a quota key) and list positions as ``*``
    and ``#``, and python-style names (``max_delete``) as documented (``max-delete``)."""
    out = []
    for i, part in enumerate(at):
        if isinstance(part, int):
            out.append("#")
        elif (i == 1 and at[0] == "clusters") or (i == 2 and at[:2] == ("policy", "keys")):
            out.append("*")
        else:
            out.append(part.replace("_", "-"))
    return tuple(out)


def dotted(at: Path_) -> str:
    """``policy.keys.producer_byte_rate.min``, ``clusters.prod.manifests[1]``; a name that is no
    bare TOML key in quotes, as the file spells it (``clusters."x y"``)."""
    text = ""
    for part in at:
        if isinstance(part, int):
            text += f"[{part}]"
            continue
        key = part if _BARE_KEY.fullmatch(part) else '"' + visible(part).replace('"', '\\"') + '"'
        text += f".{key}" if text else key
    return text or "(top level)"


def shown(value: object) -> str:
    """A value as a message quotes it: ``'ten'``, ``-1``, ``true``, ``a list``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        text = visible(value)
        return f"'{text}'" if len(text) <= 40 else f"'{text[:30]}…'"
    if isinstance(value, int | float):
        text = str(value)
        return text if len(text) <= 40 else text[:30] + "…"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a table"
    return "a date or time"  # the one TOML type left


def _problem(path: Path, text: str, raw: dict[str, Any], at: Path_, kind: str) -> Diagnostic:
    generic = _generic(at)
    if kind == "extra_forbidden":
        name = str(at[-1])
        choices = _FIELDS.get(generic[:-1], ())
        guess = did_you_mean(name, choices)
        hint = f"did you mean '{guess}'?" if guess else (
            f"valid keys here: {', '.join(choices)}" if choices else None)
        return config_error(path, text, at, f"unknown key '{visible(name)}' in "
                            f"{'[' + dotted(at[:-1]) + ']' if at[:-1] else 'the top level'}", hint)
    expected = _EXPECTED.get(generic, "something else")
    return config_error(path, text, at, f"{dotted(at)}: must be {expected}, not {shown(_value(raw, at))}")


def name_problems(path: Path, text: str, raw: dict[str, Any]) -> list[tuple[str, Diagnostic]]:
    """Each cluster name that cannot be one file name, with its problem: the fleet commands write
    files named after each cluster under ``--out`` (``fleet snapshot``'s ``NAME.json``), so
    ``../evil`` or ``/abs/victim`` would write outside it."""
    listed = raw.get("clusters")
    if not isinstance(listed, dict):
        return []
    found = []
    seen: dict[str, str] = {}
    for name in listed:
        other = seen.setdefault(name.casefold(), name)
        if other != name:
            found.append((name, config_error(
                path, text, ("clusters", name),
                f"cluster name \"{visible(name)}\" differs from \"{visible(other)}\" only in case",
                "fleet commands write files named after each cluster under --out, and on macOS and "
                "Windows the two would be one file: rename one of them")))
            continue
        problem = component_problem(name)
        if problem is not None:
            found.append((name, config_error(
                path, text, ("clusters", name),
                f"cluster name \"{visible(name)}\" cannot be used: {problem}",
                "fleet commands write files named after each cluster under --out: name the cluster "
                "with letters, digits, '.', '_' and '-' (at most 200 bytes, not starting with '-')")))
    return found
