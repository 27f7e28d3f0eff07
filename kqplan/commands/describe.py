"""``kqplan describe`` and ``kqplan alter``: KIP-546's ad-hoc commands."""

from __future__ import annotations

import json
from dataclasses import replace
from enum import StrEnum
from typing import Any

from kqplan.config.model import ProjectConfig
from kqplan.console import Streams
from kqplan.core.cluster import Alteration, DescribeFilter, FilterComponent, MatchType, Op, error_name
from kqplan.core.diagnostics import Diagnostic, DiagnosticsError, Span
from kqplan.core.entity import Entity, escape_name
from kqplan.core.errors import ExitCode, KqplanError
from kqplan.core.plan import ops_between
from kqplan.core.quotas import QUOTA_KEYS
from kqplan.core.state import Quotas, QuotaState
from kqplan.core.units import UnitError, format_number, parse_bytes
from kqplan.core.versions import ClusterProfile
from kqplan.manifest.export import export
from kqplan.pipeline.target import Target, open_cluster


class DescribeFormat(StrEnum):
    TEXT = "text"
    JSON = "json"
    YAML = "yaml"


class AlterFormat(StrEnum):
    TEXT = "text"
    JSON = "json"


def render_describe(state: QuotaState, fmt: DescribeFormat, cluster_id: str | None) -> str:
    entities = sorted(state, key=Entity.sort_key)
    if fmt is DescribeFormat.JSON:
        doc = [{"entity": e.to_json(), "quotas": dict(sorted(state[e].items()))} for e in entities]
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    if fmt is DescribeFormat.YAML:
        files, _ = export({e: state[e] for e in entities}, cluster_id)
        return files[0].text
    blocks = ["\n".join([e.display, *(f"{k}={format_number(v)}" for k, v in sorted(state[e].items()))])
              for e in entities]
    return "\n\n".join(blocks) + ("\n" if blocks else "")


def _filter_text(flt: DescribeFilter) -> str:
    parts = []
    for c in flt.components:
        name = "*" if c.match_type is MatchType.SPECIFIED else escape_name(c.match)
        parts.append(f"{c.entity_type}={name}")
    return "{" + ", ".join(parts) + "}" + (" (strict)" if flt.strict else "")


def describe_command(target: Target, flt: DescribeFilter, *, fmt: DescribeFormat,
                     streams: Streams, config: ProjectConfig | None = None) -> int:
    """KIP-546 output: ``{user=a, client-id=b}`` then ``key=value`` lines, a blank line between.
    ``config``: its ``[limits]`` bound a snapshot target."""
    if config is not None:
        target = target.within(config.max_input_bytes)
    with open_cluster(target) as cluster:
        ident = cluster.identity()
        cluster_id = ident.cluster_id
        state = cluster.describe(flt)
    if fmt is DescribeFormat.TEXT:  # which cluster, on stderr: stdout stays KIP-546's data
        from kqplan.core.plan import ClusterRef
        from kqplan.render.text import target_line

        streams.warn("# " + target_line(ClusterRef(cluster_id, ident.address, ident.version, ident.mode)))
    if not state and fmt is DescribeFormat.TEXT:
        what = f"matching {_filter_text(flt)}" if flt.components else "at all"
        streams.warn(f"No client quotas are configured {what}.")  # stdout stays data: empty
        return ExitCode.OK
    streams.print(render_describe(state, fmt, cluster_id), end="")
    return ExitCode.OK


def parse_ops(add: str | None, delete: str | None) -> tuple[Op, ...]:
    """``--add k=v,...`` (byte units allowed) and ``--delete k,...`` → ops, one per key."""
    ops: list[Op] = []
    for item in filter(None, (add or "").split(",")):
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not raw.strip():
            raise KqplanError(f"--add: '{item}' is not KEY=VALUE", hint="e.g. --add producer_byte_rate=10MiB")
        ops.append(Op(key, _value(key, raw.strip())))
    ops += [Op(k.strip(), None) for k in (delete or "").split(",") if k.strip()]
    if not ops:
        raise KqplanError("nothing to alter", hint="give --add KEY=VALUE,... and/or --delete KEY,...")
    keys = [op.key for op in ops]
    dup = next((k for k in keys if keys.count(k) > 1), None)
    if dup:
        raise KqplanError(f"quota key '{dup}' is given more than once")
    return tuple(ops)


def _value(key: str, raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        pass
    spec = QUOTA_KEYS.get(key)
    if spec is not None and spec.bytes_per_second:
        try:
            exact = parse_bytes(raw)
        except UnitError as exc:
            raise KqplanError(f"--add {key}: {exc}", hint=exc.hint) from None
        return float(exact)
    raise KqplanError(f"--add {key}: '{raw}' is not a number")


def check_offline(entity: Entity, ops: tuple[Op, ...], config: ProjectConfig) -> None:
    """The values alter sets, judged by ``validate``'s rules (same codes and messages): the
    cluster may store what a manifest would refuse (ZooKeeper mode keeps 0, -5 and NaN)."""
    from kqplan.manifest.compile import compile_manifests
    from kqplan.manifest.head import API_VERSION, KIND
    from kqplan.manifest.models import Manifest
    from kqplan.manifest.source import LoadedManifest, SourceFile

    sets = {op.key: op.value for op in ops if op.value is not None}
    if not sets:
        return  # removals are never validated, by Kafka either
    entry: dict[str, Any] = {t: escape_name(n) for t, n in entity.parts}
    entry["quotas"] = sets
    raw = {"apiVersion": API_VERSION, "kind": KIND, "entities": [entry]}
    loaded = LoadedManifest(SourceFile("--add", ""), Manifest.model_validate(raw), raw)
    found = compile_manifests([loaded], config)
    if found.errors:
        raise DiagnosticsError([replace(d, span=Span("--add", 0, 0), related=()) for d in found.errors])


def _check_target(entity: Entity, ops: tuple[Op, ...], profile: ClusterProfile) -> None:
    """What the target's Kafka version or mode refuses or would store differently (KQP145)."""
    from kqplan.core.versions import UNSUPPORTED, entity_problem, value_problem

    problem = entity_problem(entity, profile) or next(
        (p for op in ops if op.value is not None and (p := value_problem(op.key, op.value, profile))), None)
    if problem is not None:
        raise DiagnosticsError([Diagnostic(UNSUPPORTED, f"{entity.display}: {problem}", Span("--add", 0, 0))])


def _exact(entity: Entity) -> DescribeFilter:
    return DescribeFilter(tuple(FilterComponent(t, MatchType.EXACT if n is not None else MatchType.DEFAULT, n)
                                for t, n in entity.parts), strict=True)


def _changes_text(entity: Entity, before: Quotas | None, after: Quotas | None, *, verb: str) -> str:
    from kqplan.render.text import show_value

    ops = ops_between(before, after)
    if not ops:
        return f"{entity.display}: no change ({verb})\n"
    old = before or {}
    lines = [f"{'+' if not before else '-' if not after else '~'} {entity.display} ({verb})"]
    for op in ops:
        if op.value is None:
            lines.append(f"    - {op.key} = {show_value(op.key, old.get(op.key))}")
        elif op.key in old:
            lines.append(f"    ~ {op.key} = {show_value(op.key, old[op.key])} -> "
                         f"{show_value(op.key, op.value)}")
        else:
            lines.append(f"    + {op.key} = {show_value(op.key, op.value)}")
    return "\n".join(lines) + "\n"


def alter_command(target: Target, entity: Entity, ops: tuple[Op, ...], *, validate_only: bool,
                  streams: Streams, config: ProjectConfig | None = None,
                  fmt: AlterFormat = AlterFormat.TEXT) -> int:
    """Check offline, alter one entity, and show its quotas before → after (or the broker's error)."""
    config = config or ProjectConfig()
    check_offline(entity, ops, config)
    with open_cluster(target.within(config.max_input_bytes)) as cluster:
        ident = cluster.identity()
        _check_target(entity, ops, ClusterProfile.of(ident.version, ident.mode))
        before = cluster.describe(_exact(entity)).get(entity)
        results = cluster.alter([Alteration(entity, ops)], validate_only=validate_only)
        if not results:
            raise KqplanError(f"the broker did not answer for {entity.display}; its outcome is unknown",
                              hint="check with `kqplan describe`")
        failed = [r for r in results if not r.ok]
        wanted: dict[str, float] = dict(before or {})
        for op in ops:
            if op.value is None:
                wanted.pop(op.key, None)
            else:
                wanted[op.key] = op.value
        after = None if failed or validate_only else cluster.describe(_exact(entity)).get(entity)
    if fmt is AlterFormat.JSON:
        doc = {"entity": entity.to_json(), "display": entity.display, "validate_only": validate_only,
               "ok": not failed,
               "error": None if not failed else {"code": failed[0].error_code,
                                                 "name": error_name(failed[0].error_code),
                                                 "message": failed[0].error_message},
               "before": dict(sorted(before.items())) if before else None,
               "after": (dict(sorted(after.items())) if after else None) if not validate_only and not failed
               else None,
               "requested": dict(sorted(wanted.items())) or None}
        streams.print(json.dumps(doc, indent=2, ensure_ascii=False))
    for r in failed:
        streams.warn(f"Error: {r.entity.display}: {error_name(r.error_code)}: "
                     f"{r.error_message or ''}".rstrip(": "))
    if failed:
        return ExitCode.ERROR
    if fmt is AlterFormat.TEXT:
        if validate_only:
            text = _changes_text(entity, before, wanted or None, verb="validated, not applied")
            streams.print(text, end="")
        else:
            streams.print(_changes_text(entity, before, wanted or None, verb="altered"), end="")
            if (after or {}) != wanted:
                streams.warn("note: describe does not show the requested values yet (Kafka applies quota "
                             "changes asynchronously, or stored them differently); check with "
                             "`kqplan describe`")
    return ExitCode.OK
