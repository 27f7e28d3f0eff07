"""``kqplan resolve``: KIP-546's never-shipped ResolveClientQuotas, answered client-side.

Text is KIP-546's form, one line per key: ``consumer_byte_rate=2000000 {user=u, client-id=c}``,
then (``--show-overridden``) the losing entries prefixed ``*``; ``unlimited`` where nothing
applies. JSON lists every key of the entity kind, ``null`` value and source for unlimited.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

from kqplan.config.model import ProjectConfig
from kqplan.console import Streams
from kqplan.core.entity import CLIENT_ID, IP, USER, Entity, Name
from kqplan.core.errors import ExitCode, KqplanError
from kqplan.core.resolve import Resolution, ResolvedKey, resolve, resolve_ip
from kqplan.core.selectors import parse_names, split_escaped
from kqplan.core.state import QuotaState
from kqplan.core.units import format_number
from kqplan.pipeline.target import Target, open_cluster

NAMES_HINT = ("--names user=U,client-id=C (client-id= for a client that sends none), "
              "or --names ip=ADDRESS")


class ResolveFormat(StrEnum):
    TEXT = "text"
    JSON = "json"


def connection_of(entity: Entity) -> tuple[str, str] | str:
    """``{user=U, client-id=C}`` → (U, C); ``{user=U}`` → (U, "") (no client-id sent); ``{ip=A}`` → A."""
    given = dict(entity.parts)
    if any(name is None for name in given.values()):
        raise KqplanError(f"cannot resolve {entity.display}: a connection has real names, "
                          "not <default>", hint=NAMES_HINT)
    if set(given) == {IP}:
        return str(given[IP])
    if IP in given:
        raise KqplanError("--names: ip cannot be combined with user or client-id",
                          hint="ip quotas apply per address; resolve --names ip=ADDRESS alone")
    if set(given) == {USER, CLIENT_ID}:
        return str(given[USER]), str(given[CLIENT_ID])
    if set(given) == {USER}:
        return str(given[USER]), ""
    if CLIENT_ID in given:
        raise KqplanError("--names: every connection has a user (principal) as well",
                          hint="add user=NAME; unauthenticated listeners use user=ANONYMOUS")
    raise KqplanError(f"cannot resolve {entity.display}", hint=NAMES_HINT)


def principal_of(names: str, *, custom: frozenset[str] = frozenset()) -> Entity:
    """``--names`` of a connection: like alter's, but ``client-id=`` is a client that sends none."""
    items = split_escaped(names)
    # parse_names refuses empty names (right for alter); here "client-id=" is a real case.
    empty = [i for i in items if i == f"{CLIENT_ID}="]
    rest = [i for i in items if i != f"{CLIENT_ID}="]
    pairs: list[tuple[str, Name]] = list(parse_names(",".join(rest), custom=custom))
    pairs += [(CLIENT_ID, "")] * len(empty)
    if len({t for t, _ in pairs}) != len(pairs):
        raise KqplanError(f"--names: an entity type is given twice in '{names}'", hint=NAMES_HINT)
    if not pairs:
        raise KqplanError("--names: nothing to resolve", hint=NAMES_HINT)
    return Entity.of(pairs)


def parse_connection(names: str) -> tuple[str, str] | str:
    """``user=U,client-id=C`` → (U, C); ``ip=A`` → A. ``client-id=`` or none: no client-id."""
    return connection_of(principal_of(names))


def resolve_connection(state: QuotaState, connection: tuple[str, str] | str) -> Resolution:
    """Resolve (U, C) or an ip address against ``state``."""
    if isinstance(connection, str):
        return resolve_ip(state, connection)
    return resolve(state, *connection)


def _entry(key: str, value: float, display: str, prefix: str = "") -> str:
    return f"{prefix}{key}={format_number(value)} {display}"


def render_text(resolution: Resolution, *, show_overridden: bool) -> str:
    lines: list[str] = []
    for item in sorted(resolution.keys, key=lambda k: k.key):
        if item.value is None or item.source is None:
            lines.append(f"{item.key}=unlimited")
            continue
        lines.append(_entry(item.key, item.value, item.source.display))
        if show_overridden:
            lines.extend(_entry(item.key, o.value, o.source.display, "*") for o in item.overridden)
    return "\n".join(lines) + "\n"


def _key_json(item: ResolvedKey, show_overridden: bool) -> dict[str, Any]:
    return {
        "value": item.value,
        "source": item.source.to_json() if item.source is not None else None,
        "overridden": [{"source": o.source.to_json(), "value": o.value}
                       for o in item.overridden] if show_overridden else [],
    }


def render_json(resolution: Resolution, *, show_overridden: bool) -> str:
    doc = {"entity": resolution.entity.to_json(),
           "quotas": {k.key: _key_json(k, show_overridden)
                      for k in sorted(resolution.keys, key=lambda k: k.key)}}
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _format(fmt: str) -> ResolveFormat:
    try:
        return ResolveFormat(fmt)
    except ValueError:
        raise KqplanError(f"--format: '{fmt}' is not a resolve format",
                          hint=f"use one of {', '.join(f.value for f in ResolveFormat)}") from None


def render_resolution(resolution: Resolution, *, show_overridden: bool, fmt: str) -> str:
    if _format(fmt) is ResolveFormat.JSON:
        return render_json(resolution, show_overridden=show_overridden)
    return render_text(resolution, show_overridden=show_overridden)


def resolve_output(state: QuotaState, names: str, *, show_overridden: bool, fmt: str) -> str:
    """The output of ``kqplan resolve --names NAMES`` against ``state`` (pure)."""
    _format(fmt)  # a bad --format is reported before a bad --names
    resolution = resolve_connection(state, parse_connection(names))
    return render_resolution(resolution, show_overridden=show_overridden, fmt=fmt)


def _state(target: Target, paths: Sequence[Path], config: ProjectConfig,
           streams: Streams) -> QuotaState:
    """What to resolve against: the manifests' desired state, or one describe of the target."""
    if paths:
        if target.chosen():
            raise KqplanError(f"--desired resolves against manifests; it cannot be combined "
                              f"with {target.chosen()[0]}",
                              hint="drop --desired to resolve against the cluster")
        from kqplan.pipeline.guarded import load_checked

        desired = load_checked(paths, config, streams)
        if desired.budgets:  # their per-broker values depend on a broker count: never shown as unlimited
            entity, keys = next(iter(desired.budgets.items()))
            raise KqplanError(f"--desired: {entity.display} {next(iter(keys))} is a per-cluster budget, "
                              "whose per-broker value depends on the cluster's broker count",
                              hint="resolve against the cluster (drop --desired); `kqplan plan` shows "
                              "the division")
        return desired.quotas
    with open_cluster(target.within(config.max_input_bytes)) as cluster:
        return cluster.describe()


def resolve_command(principal: Entity, target: Target, paths: Sequence[Path],
                    config: ProjectConfig, *, show_overridden: bool, fmt: ResolveFormat,
                    streams: Streams) -> int:
    """``kqplan resolve``: print the effective quotas of ``principal`` ({user, client-id} or {ip})."""
    connection = connection_of(principal)
    if isinstance(connection, tuple) and CLIENT_ID not in principal:
        streams.warn("note: no client-id given: resolving a connection that sends none "
                     "(Kafka then checks only {user=U} and {user=<default>}); "
                     "add client-id=ID for a specific client")
    resolution = resolve_connection(_state(target, paths, config, streams), connection)
    streams.print(render_resolution(resolution, show_overridden=show_overridden, fmt=fmt), end="")
    return ExitCode.OK
