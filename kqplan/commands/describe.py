"""``kqplan describe`` and ``kqplan alter``: KIP-546's ad-hoc commands."""

from __future__ import annotations

import json
from enum import StrEnum

from kqplan.cluster.base import Alteration, DescribeFilter, Op, error_name
from kqplan.console import Streams
from kqplan.entity import Entity
from kqplan.errors import ExitCode, KqplanError
from kqplan.export import export
from kqplan.quotas import QUOTA_KEYS
from kqplan.state import QuotaState
from kqplan.target import Target, open_cluster
from kqplan.units import UnitError, format_number, parse_bytes


class DescribeFormat(StrEnum):
    TEXT = "text"
    JSON = "json"
    YAML = "yaml"


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


def describe_command(target: Target, flt: DescribeFilter, *, fmt: DescribeFormat,
                     streams: Streams) -> int:
    """KIP-546 output: ``{user=a, client-id=b}`` then ``key=value`` lines, a blank line between."""
    with open_cluster(target) as cluster:
        cluster_id = cluster.identity().cluster_id
        state = cluster.describe(flt)
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


def alter_command(target: Target, entity: Entity, ops: tuple[Op, ...], *, validate_only: bool,
                  streams: Streams) -> int:
    """No output on success (as in the KIP); the broker's error for the entity otherwise."""
    with open_cluster(target) as cluster:
        results = cluster.alter([Alteration(entity, ops)], validate_only=validate_only)
    failed = [r for r in results if not r.ok]
    for r in failed:
        streams.warn(f"Error: {r.entity.display}: {error_name(r.error_code)}: "
                     f"{r.error_message or ''}".rstrip(": "))
    if not results:
        raise KqplanError(f"the broker did not answer for {entity.display}; its outcome is unknown",
                          hint="check with `kqplan describe`")
    return ExitCode.ERROR if failed else ExitCode.OK
