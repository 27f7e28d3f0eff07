"""Reading ``kqplan.toml`` (:mod:`kqplan.config.model` holds what it becomes), every problem a located
KQP190 diagnostic.

A file of the usual shape is checked by hand (:func:`plain_document`) and never imports pydantic
(0.04 s of every command's start-up in a repository with a ``kqplan.toml``); anything it does not
accept goes through the pydantic schema in :mod:`kqplan.config.schema`, which decides and locates
every problem. The plain check accepts only what the schema accepts, with the same result
(tests/config/plain_test.py checks both on generated files).

One run finds every problem it can (:func:`check_config`): a wrong value is reported and its
default taken in its place, so the checks after it (layers, units, quota keys) still run, and a
command that can go on with the rest (``validate``) reports the manifests' problems beside them.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from kqplan.config.locate import config_error
from kqplan.config.model import (
    CONFIG_ERROR,
    MISSING_LAYER,
    ClusterEntry,
    MetricsSettings,
    ProjectConfig,
    missing_layer_hint,
)
from kqplan.core.diagnostics import Diagnostic, DiagnosticsError, Span, did_you_mean, sort_key
from kqplan.core.entity import BUILTIN_TYPES, CLIENT_ID, IP, USER, visible
from kqplan.core.filenames import component_problem
from kqplan.core.policy import (
    DEFAULT_EXPIRY_WARNING as DEFAULT_EXPIRY_WARNING_SPAN,
)
from kqplan.core.policy import (
    DEFAULT_MAX_DELETE,
    DEFAULT_MAX_DELETE_PERCENT,
    KeyBounds,
    Policy,
    ProtectedPrincipal,
)
from kqplan.core.quotas import QUOTA_KEYS

CLUSTER_FIELDS = ("id", "bootstrap-server", "command-config", "snapshot", "manifests", "mode", "version",
                  "brokers", "metrics")
LIMIT_FIELDS = {"max-file-mib": 128, "max-input-mib": 512}
"""``[limits]``: each a positive number of MiB, and its default."""
ENGINE_FIELDS = ("engine-memory-mib", "engine-spill")
"""``[limits]`` of the local fleet engine, unset by default: its memory (a positive number of MiB)
and where it spills (a directory; "" for nowhere)."""
POLICY_FIELDS = ("max-delete", "max-delete-percent", "required-keys", "required-defaults",
                 "required-labels", "keys", "allow-unmanaged", "expiry-warning", "max-expiry",
                 "protected-principals", "quota-callback", "allowed-quota-callbacks")
DEFAULT_EXPIRY_WARNING = "7d"
PRINCIPAL_FIELDS = ("user", "client-id")


# -- the plain check ------------------------------------------------------------------------------

def _int(value: object) -> bool:
    return type(value) is int


def _number(value: object) -> bool:
    return type(value) is int or (type(value) is float and math.isfinite(value))


def _strings(value: object) -> bool:
    return type(value) is list and all(type(v) is str for v in value)


def _table(value: object, fields: Sequence[str]) -> bool:
    return type(value) is dict and all(k in fields for k in value)


def plain_document(raw: dict[str, Any]) -> dict[str, Any] | None:
    """``raw`` with its defaults filled in when it is plainly valid (every key known, spelled as
    documented, every value of its type and range); None sends it to the schema."""
    if not _table(raw, ("clusters", "policy", "custom", "limits", "rollout")):
        return None
    waves = raw.get("rollout", {})
    if not (_table(waves, ("waves",)) and type(waves.get("waves", [])) is list
            and all(_strings(w) for w in waves.get("waves", []))):
        return None
    listed = raw.get("clusters", {})
    if type(listed) is not dict:
        return None
    clusters: dict[str, Any] = {}
    if len({name.casefold() for name in listed}) != len(listed):  # the schema says why
        return None
    for name, value in listed.items():
        if component_problem(name) is not None:  # the schema says why
            return None
        if type(value) is str:
            clusters[name] = value
            continue
        if not _table(value, CLUSTER_FIELDS) or not all(
                type(v) is str for k, v in value.items() if k not in ("manifests", "brokers")):
            return None
        if "brokers" in value and not (_int(value["brokers"]) and value["brokers"] >= 1):
            return None
        if not _strings(value.get("manifests", [])):
            return None
        clusters[name] = {f: value.get(f) for f in CLUSTER_FIELDS}
        clusters[name]["manifests"] = list(value.get("manifests", []))
    policy = raw.get("policy", {})
    if not _table(policy, POLICY_FIELDS):
        return None
    max_delete = policy.get("max-delete", DEFAULT_MAX_DELETE)
    percent = policy.get("max-delete-percent", DEFAULT_MAX_DELETE_PERCENT)
    keys = policy.get("keys", {})
    if not (_int(max_delete) and max_delete >= 0 and _number(percent) and 0 <= percent <= 100
            and all(_strings(policy.get(f, [])) for f in ("required-keys", "required-defaults",
                                                          "required-labels"))
            and type(policy.get("allow-unmanaged", True)) is bool and type(keys) is dict
            and policy.get("quota-callback", "warn") in ("warn", "error")
            and _strings(policy.get("allowed-quota-callbacks", []))):
        return None
    rollout = _plain_rollout(policy)
    if rollout is None:
        return None
    bounds: dict[str, Any] = {}
    for key, b in keys.items():
        if not _table(b, ("min", "max")) or not all(_number(v) or type(v) is str for v in b.values()):
            return None
        bounds[key] = {"min": b.get("min"), "max": b.get("max")}
    custom, limits = raw.get("custom", {}), raw.get("limits", {})
    if not (_table(custom, ("entity-types", "keys")) and all(_strings(v) for v in custom.values())
            and _table(limits, (*LIMIT_FIELDS, *ENGINE_FIELDS))):
        return None
    mib = {f: limits.get(f, default) for f, default in LIMIT_FIELDS.items()}
    if not all(_int(v) and v > 0 for v in mib.values()):
        return None
    engine_memory, spill = limits.get("engine-memory-mib"), limits.get("engine-spill")
    if not ((engine_memory is None or (_int(engine_memory) and engine_memory > 0))
            and (spill is None or type(spill) is str)):
        return None
    mib |= {"engine-memory-mib": engine_memory, "engine-spill": spill}
    return {
        "custom": {"entity-types": list(custom.get("entity-types", [])),
                   "keys": list(custom.get("keys", []))},
        "clusters": clusters,
        "policy": {"max-delete": max_delete, "max-delete-percent": percent,
                   **{f: list(policy.get(f, [])) for f in ("required-keys", "required-defaults",
                                                           "required-labels")},
                   "keys": bounds, "allow-unmanaged": policy.get("allow-unmanaged", True), **rollout,
                   "quota-callback": policy.get("quota-callback", "warn"),
                   "allowed-quota-callbacks": list(policy.get("allowed-quota-callbacks", []))},
        "limits": mib,
        "rollout": {"waves": [list(w) for w in waves.get("waves", [])]},
        "metrics": {"prometheus": None, "selector": None, "headers-file": None, "names": []},
    }


def _plain_rollout(policy: dict[str, Any]) -> dict[str, Any] | None:
    """``expiry-warning``, ``max-expiry`` and ``protected-principals`` of a plain ``[policy]``
    (their meaning is checked later, located), or None for the schema to say what is wrong."""
    warning = policy.get("expiry-warning", DEFAULT_EXPIRY_WARNING)
    longest = policy.get("max-expiry")
    listed = policy.get("protected-principals", [])
    if type(warning) is not str or (longest is not None and type(longest) is not str) \
            or type(listed) is not list:
        return None
    principals = []
    for item in listed:
        if not (_table(item, PRINCIPAL_FIELDS) and type(item.get("user")) is str
                and type(item.get("client-id", "")) is str):
            return None
        principals.append({"user": item["user"], "client-id": item.get("client-id")})
    return {"expiry-warning": warning, "max-expiry": longest, "protected-principals": principals}


# -- problems and values --------------------------------------------------------------------------


def _bound(path: Path, text: str, key: str, which: str, raw: object, *,
           problems: list[Diagnostic]) -> float | None:
    """A ``[policy.keys.K]`` bound as a number, or None with a located problem: a bound that is
    not a finite number ≥ 0 (``nan`` compares false with everything) would turn the rule off."""
    if raw is None:
        return None
    loc = ("policy", "keys", key, which)
    spec = QUOTA_KEYS.get(key)
    sized = spec is not None and spec.bytes_per_second
    allowed = ("a number of bytes per second ≥ 0, or a size such as \"10MiB\"" if sized
               else "a number ≥ 0")

    def refuse(message: str, hint: str | None = None) -> None:
        problems.append(config_error(path, text, loc, f"policy.keys.{key}.{which}: {message}",
                                     hint or f"write {allowed}"))

    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        refuse("must be a number")
        return None
    if isinstance(raw, str):
        from kqplan.core.units import UnitError, parse_bytes

        if not sized:
            refuse(f"{key} takes a plain number, not '{visible(raw)}'")
            return None
        try:
            value = float(parse_bytes(raw))
        except UnitError as exc:
            refuse(visible(str(exc)), exc.hint)
            return None
    else:
        try:
            value = float(raw)
        except OverflowError:  # an integer beyond any double
            value = math.inf
    if not math.isfinite(value) or value < 0:
        shown = visible(str(raw))
        refuse(f"{shown if len(shown) <= 40 else shown[:30] + '…'} is not allowed: a bound must be a "
               "finite number ≥ 0")
        return None
    return value


def _entry(base: Path, name: str, raw: str | dict[str, Any]) -> ClusterEntry:
    if isinstance(raw, str):
        return ClusterEntry(name, id=raw)

    def rel(value: str | None) -> Path | None:
        return None if value is None else (base / value)

    return ClusterEntry(name, id=raw["id"], bootstrap=raw["bootstrap-server"],
                        command_config=rel(raw["command-config"]), snapshot=rel(raw["snapshot"]),
                        manifests=tuple(base / m for m in raw["manifests"]), mode=raw["mode"],
                        version=raw["version"], brokers=raw.get("brokers"),
                        metrics=metrics_settings(base, raw.get("metrics")))


def _with_metrics(entry: ClusterEntry, shared: MetricsSettings) -> ClusterEntry:
    """The cluster's own ``[clusters.NAME.metrics]`` over the shared ``[metrics]``."""
    return replace(entry, metrics=entry.metrics.over(shared))


def metrics_settings(base: Path, raw: dict[str, Any] | None) -> MetricsSettings:
    """A ``[metrics]`` table as settings (a headers file relative to kqplan.toml's directory)."""
    if not raw:
        return MetricsSettings()
    headers = raw.get("headers-file")
    return MetricsSettings(raw.get("prometheus"), raw.get("selector"),
                           base / headers if headers is not None else None, tuple(raw.get("names") or ()))


def _check_clusters(path: Path, text: str, doc: dict[str, Any], problems: list[Diagnostic]) -> None:
    """The inventory's rules across fields; what is wrong is left out of ``doc`` (a bad mode, a
    layer that does not exist or is listed twice), so the rest can still be used."""
    for name, raw in doc["clusters"].items():
        if isinstance(raw, str):
            continue
        loc = ("clusters", name)
        if raw["bootstrap-server"] is not None and raw["snapshot"] is not None:
            problems.append(config_error(path, text, (*loc, "snapshot"),
                                         f"cluster '{name}' has both bootstrap-server and snapshot",
                                         "a cluster has one target: keep one of them"))
        if raw["command-config"] is not None and raw["bootstrap-server"] is None:
            problems.append(config_error(path, text, (*loc, "command-config"),
                                         f"cluster '{name}': command-config without bootstrap-server"))
        if raw["mode"] is not None and raw["mode"] not in ("kraft", "zookeeper"):
            problems.append(config_error(path, text, (*loc, "mode"),
                                         f"cluster '{name}': mode must be kraft or zookeeper, "
                                         f"not '{raw['mode']}'"))
            raw["mode"] = None
        kept: list[str] = []
        for i, layer in enumerate(raw["manifests"]):
            try:
                present = (path.parent / layer).exists()
            except OSError as exc:  # a name too long for the file system, a loop: it can never be a layer
                problems.append(config_error(path, text, (*loc, "manifests"),
                                             f"cluster '{name}': manifests layer '{visible(layer)}' cannot "
                                             f"be used: {exc.strerror or exc}",
                                             "fix the path in kqplan.toml"))
                continue
            if not present:  # kept: export, import and init create it
                from kqplan.files import shown_path

                hint = missing_layer_hint(name, shown_path(path.parent / layer), first=i == 0)
                problems.append(config_error(path, text, (*loc, "manifests"),
                                             f"cluster '{name}': manifests layer '{layer}' does not "
                                             "exist", f"paths are relative to {path.parent}; {hint}",
                                             code=MISSING_LAYER))
                kept.append(layer)
            elif raw["manifests"].index(layer) != i:
                problems.append(config_error(path, text, (*loc, "manifests"),
                                             f"cluster '{name}': layer '{layer}' is listed twice"))
            else:
                kept.append(layer)
        raw["manifests"] = kept


def _policy(path: Path, text: str, doc: dict[str, Any], custom_keys: frozenset[str],
            problems: list[Diagnostic]) -> Policy:
    raw = doc["policy"]
    known_keys = set(QUOTA_KEYS) | custom_keys
    required = []
    for key in raw["required-keys"]:
        if key in known_keys:
            required.append(key)
            continue
        guess = did_you_mean(key, known_keys)
        problems.append(config_error(path, text, ("policy", "required-keys"),
                                     f"policy.required-keys: unknown quota key '{key}'",
                                     f"did you mean '{guess}'?" if guess else None))
    defaults: list[tuple[str, ...]] = []
    for spec in raw["required-defaults"]:
        types = tuple(t.strip() for t in spec.split(","))
        canonical = tuple(t for t in (USER, CLIENT_ID, IP) if t in types)
        if len(canonical) != len(types) or not canonical or (IP in types and len(types) > 1):
            problems.append(config_error(
                path, text, ("policy", "required-defaults"),
                f"policy.required-defaults: '{spec}' is not a default entity",
                "write \"user\", \"client-id\", \"user,client-id\" or \"ip\""))
            continue
        defaults.append(canonical)
    bounds = []
    for key, b in raw["keys"].items():
        if key not in known_keys:
            guess = did_you_mean(key, known_keys)
            problems.append(config_error(path, text, ("policy", "keys", key),
                                         f"policy.keys: unknown quota key '{key}'",
                                         f"did you mean '{guess}'?" if guess else None))
            continue
        low = _bound(path, text, key, "min", b["min"], problems=problems)
        high = _bound(path, text, key, "max", b["max"], problems=problems)
        if low is not None and high is not None and low > high:
            problems.append(config_error(path, text, ("policy", "keys", key),
                                         f"policy.keys.{key}: min is above max"))
            continue
        bounds.append(KeyBounds(key, low, high))
    from kqplan.files import display_path

    warning, longest = _spans(path, text, raw, problems)
    return Policy(raw["max-delete"], float(raw["max-delete-percent"]), tuple(required),
                  tuple(defaults), tuple(raw["required-labels"]), tuple(bounds), raw["allow-unmanaged"],
                  warning, longest, _principals(path, text, raw, problems), path,
                  quota_callback=raw["quota-callback"],
                  allowed_quota_callbacks=tuple(raw["allowed-quota-callbacks"]), shown=display_path(path))


def _spans(path: Path, text: str, raw: dict[str, Any],
           problems: list[Diagnostic]) -> tuple[timedelta, timedelta | None]:
    """``expiry-warning`` (7d unless set) and ``max-expiry`` (none unless set) as durations."""
    from kqplan.core.expiry import ExpiryError, parse_span

    found: list[timedelta | None] = []
    for name, default in (("expiry-warning", DEFAULT_EXPIRY_WARNING_SPAN), ("max-expiry", None)):
        value = raw.get(name)
        if value is None:
            found.append(default)
            continue
        try:
            found.append(parse_span(value))
        except ExpiryError as exc:
            problems.append(config_error(path, text, ("policy", name), f"policy.{name}: {visible(str(exc))}",
                                         exc.hint))
            found.append(default)
    warning = found[0] if found[0] is not None else DEFAULT_EXPIRY_WARNING_SPAN
    return warning, found[1]


def _principals(path: Path, text: str, raw: dict[str, Any],
                problems: list[Diagnostic]) -> tuple[ProtectedPrincipal, ...]:
    found = []
    for i, item in enumerate(raw.get("protected-principals") or []):
        if not item["user"] or item["client-id"] == "":
            problems.append(config_error(
                path, text, ("policy", "protected-principals", i),
                f"policy.protected-principals[{i}]: an empty {'user' if not item['user'] else 'client-id'}",
                "name the principal as Kafka sees it: user = \"NAME\" (without User:), and a client-id "
                "only to protect that one client (without it, every client-id of the user is protected)"))
            continue
        found.append(ProtectedPrincipal(item["user"], item["client-id"]))
    return tuple(found)


_TOML_PLACE = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")


def _syntax_error(path: Path, text: str, exc: tomllib.TOMLDecodeError) -> Diagnostic:
    """A TOML syntax error, located as ``tomllib`` says (``(at line 3, column 5)``)."""
    message = str(exc)
    place = _TOML_PLACE.search(message)
    if place is not None:
        line, column = int(place.group(1)), int(place.group(2))
        message = message[:place.start()]
    else:  # "(at end of document)"
        line, column = max(1, len(text.splitlines())), 1
        message = message.removesuffix(" (at end of document)") + " at the end of the file"
    return Diagnostic(CONFIG_ERROR, f"invalid TOML: {message}", Span(str(path), line, column),
                      hint="kqplan.toml is TOML (https://toml.io): fix the syntax here; strings are "
                      "in double quotes, tables are [name]")


def read_config(path: Path) -> ProjectConfig:
    """Read and validate a ``kqplan.toml``; every problem located (DiagnosticsError). The file
    goes through the bounded reader: a FIFO or a device is refused, never read until it ends."""
    config, problems = check_config(path)
    if problems:
        raise DiagnosticsError(problems)
    return config


def check_config(path: Path) -> tuple[ProjectConfig, list[Diagnostic]]:
    """A ``kqplan.toml`` as far as it is valid, and every problem in it, in the order of the file:
    a wrong value is reported and its default used in its place (a cluster whose name cannot be
    one, or a layer that does not exist, is left out), so one run reports all of them."""
    from kqplan.files import DEFAULT_INPUT_LIMIT, read_bounded_text

    text = read_bounded_text(path, what="config file", limit=DEFAULT_INPUT_LIMIT)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return ProjectConfig(source=path), [_syntax_error(path, text, exc)]
    doc = plain_document(raw)
    problems: list[Diagnostic] = []
    if doc is None:
        from kqplan.config.schema import checked_document

        doc, problems = checked_document(path, text, raw)
    custom = doc["custom"]
    clash = set(custom["entity-types"]) & set(BUILTIN_TYPES)
    if clash:
        problems.append(config_error(path, text, ("custom", "entity-types"),
                                     f"custom.entity-types redeclares built-in type(s) {sorted(clash)}"))
    types = frozenset(custom["entity-types"]) - clash
    clash = set(custom["keys"]) & set(QUOTA_KEYS)
    if clash:
        problems.append(config_error(path, text, ("custom", "keys"),
                                     f"custom.keys redeclares built-in key(s) {sorted(clash)}"))
    custom_keys = frozenset(custom["keys"]) - clash
    _check_clusters(path, text, doc, problems)
    table = raw.get("policy")  # what kqplan.toml itself sets: doc has every default filled in
    # either spelling (max_delete reads as max-delete, as the schema accepts it)
    configured = (frozenset(str(k).replace("_", "-") for k in table) & frozenset(POLICY_FIELDS)
                  if type(table) is dict else frozenset())
    policy = replace(_policy(path, text, doc, custom_keys, problems), configured=configured)
    base = path.parent.resolve()
    waves = _waves(path, text, doc, problems)
    config = ProjectConfig(
        custom_entity_types=types,
        custom_keys=custom_keys,
        clusters={name: _with_metrics(_entry(base, name, raw), metrics_settings(base, doc.get("metrics")))
                  for name, raw in doc["clusters"].items()},
        policy=policy,
        max_file_bytes=doc["limits"]["max-file-mib"] * 1024 * 1024,
        max_input_bytes=doc["limits"]["max-input-mib"] * 1024 * 1024,
        engine_memory_mib=doc["limits"].get("engine-memory-mib"),
        engine_spill=_spill(base, doc["limits"].get("engine-spill")),
        rollout_waves=waves,
        source=path,
    )
    return config, sorted(problems, key=sort_key)


def _spill(base: Path, spill: str | None) -> str | None:
    """``[limits] engine-spill`` from kqplan.toml's directory ("" stays: no spilling)."""
    return spill if not spill else str(base / Path(spill).expanduser())


def _waves(path: Path, text: str, doc: dict[str, Any],
           problems: list[Diagnostic]) -> tuple[tuple[str, ...], ...]:
    """``[rollout] waves``: each name an inventory cluster, each cluster in one wave at most, no
    wave empty; what is wrong is reported and left out."""
    clusters, seen = doc["clusters"], set()
    waves: list[tuple[str, ...]] = []
    for i, wave in enumerate(doc.get("rollout", {}).get("waves", [])):
        kept = []
        for name in wave:
            if name not in clusters:
                guess = did_you_mean(name, clusters)
                problems.append(config_error(path, text, ("rollout", "waves"),
                                             f"rollout.waves: wave {i + 1} names '{visible(name)}', which is "
                                             "not a cluster of the inventory",
                                             f"did you mean '{guess}'?" if guess else
                                             f"clusters: {', '.join(sorted(clusters))}"))
            elif name in seen:
                problems.append(config_error(path, text, ("rollout", "waves"),
                                             f"rollout.waves: cluster '{name}' is in more than one wave",
                                             "a cluster is applied once: keep it in one wave"))
            else:
                seen.add(name)
                kept.append(name)
        if not wave:
            problems.append(config_error(path, text, ("rollout", "waves"),
                                         f"rollout.waves: wave {i + 1} is empty", "remove it"))
        if kept:
            waves.append(tuple(kept))
    return tuple(waves)
