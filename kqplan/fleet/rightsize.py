"""What each observed principal's quotas should be: the usage statistic × headroom, rounded up to a
value people write, floored and capped, compared with the effective quota it gets now.

The rules, in the order applied (the README's "rightsize" section says the same in prose):

* ``need = statistic × headroom`` per principal and key (the statistic is impact's: max or pNN).
* **Rounding up** to the next value of one series, ``1, 2, 3, 4, 5, 6, 8`` then ``10, 12, 15, 20, 25,
  30, 40, 50, 60, 80`` in every decade: byte rates as that many KiB, MiB, GiB (below 1024 of the
  unit) or TiB, so that a proposal reads ``20MiB`` or ``250KiB``, and is exactly what ``kqplan fmt``
  writes; request_percentage and controller_mutation_rate as plain numbers from 1. Above 10 units a
  step adds at most a third.
* **Floor and cap**: ``--min KEY=VALUE`` and ``[policy] keys.KEY.min`` raise a proposal, ``[policy]
  keys.KEY.max`` lowers it (the table then shows a need above the proposal).
* **Tolerance**: the current effective quota ``V`` (from :func:`kqplan.core.resolve.effective`, any source:
  a ``<default>`` entity or the principal's own) is *kept* when ``P <= V <= P × (1 + tolerance)``:
  it covers the proposal ``P`` and is not too generous. A principal covered so by a default gets no
  entity of its own; an explicit quota does not flap between two steps from week to week.
  Otherwise the action is ``raise`` (V < P), ``lower`` (V > P × (1 + tolerance)) or ``limit`` (no
  quota now), and P is written on the principal's own entity: ``{user=U, client-id=C}``, which no
  other connection resolves to, or ``{user=U}`` for a client that sends no client-id (Kafka looks
  only at ``{user=U}`` and ``{user=<default>}`` for it).
* **Pins**: ``{user=U}`` is also where U's other clients fall back. An observed client of U whose
  kept quota would move because of it gets its current value on its own entity (action ``pin``), so
  no observed principal-key changes by accident.

Two engines give the same rows: :func:`proposal_rows` (local, the core's resolve) and
:func:`spark_proposal_rows` (DataFrame operations over the join of :mod:`kqplan.fleet.spark`).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from kqplan.core.diagnostics import did_you_mean
from kqplan.core.entity import Entity
from kqplan.core.errors import KqplanError
from kqplan.core.policy import Policy
from kqplan.core.quotas import QUOTA_KEYS, value_error
from kqplan.core.resolve import QuotaIndex, effective
from kqplan.core.state import QuotaState
from kqplan.core.units import UnitError, parse_bytes
from kqplan.fleet.impact import usage_stats
from kqplan.fleet.usage import USAGE_KEYS, Sample, parse_stat
from kqplan.manifest.export import yaml_value

# -- rounding ------------------------------------------------------------------------------------

_SMALL = (1, 2, 3, 4, 5, 6, 8)  # whole counts below 10: a fraction of a unit is not written
_DECADE = (10, 12, 15, 20, 25, 30, 40, 50, 60, 80)


def _series(limit: int) -> tuple[int, ...]:
    """1, 2, 3, 4, 5, 6, 8, 10, 12, 15, …, 80, 100, 120, … up to ``limit``."""
    out = list(_SMALL)
    scale = 1
    while _DECADE[0] * scale <= limit:
        out += [m * scale for m in _DECADE if m * scale <= limit]
        scale *= 10
    return tuple(out)


_KiB = 1024
BYTE_STEPS: tuple[float, ...] = tuple(
    [float(n * _KiB**power) for power in (1, 2, 3) for n in _series(999)]
    # TiB goes on to the largest count a LONG quota holds (8,000,000 TiB < 2^63 bytes)
    + [float(n * _KiB**4) for n in _series(8_000_000)])
"""Byte rates a proposal can take: 1KiB … 800KiB, 1MiB … 800MiB, 1GiB … 800GiB, 1TiB …, ascending."""
PLAIN_STEPS: tuple[float, ...] = tuple(float(n) for n in _series(8 * 10**15))
"""request_percentage and controller_mutation_rate: 1 … 8e15 (whole numbers, exact as doubles)."""


def steps_for(key: str) -> tuple[float, ...]:
    return BYTE_STEPS if QUOTA_KEYS[key].bytes_per_second else PLAIN_STEPS


def round_up(key: str, need: float) -> float | None:
    """The first step of ``key``'s series at or above ``need``; None beyond the last (or NaN)."""
    steps = steps_for(key)
    if not need <= steps[-1]:  # NaN fails this too, as it fails every comparison in Spark's tree
        return None
    return steps[bisect.bisect_left(steps, need)]


# -- the rules of one run ------------------------------------------------------------------------

class Action(StrEnum):
    KEEP = "keep"  # the current effective quota stays; nothing written
    RAISE = "raise"
    LOWER = "lower"
    LIMIT = "limit"  # unlimited now
    PIN = "pin"  # kept value, written on the principal's own entity (see the module docstring)


@dataclass(frozen=True, slots=True)
class Rules:
    stat: str
    """As given (``max``, ``p99``): shown in comments and summaries."""
    q: float | None
    headroom: float
    tolerance: float
    floors: Mapping[str, float] = field(default_factory=dict)
    """Per key: the larger of ``--min`` and ``[policy] keys.KEY.min``."""
    caps: Mapping[str, float] = field(default_factory=dict)
    """Per key: ``[policy] keys.KEY.max``."""

    @classmethod
    def of(cls, *, stat: str, headroom: float, tolerance: float, mins: Sequence[str] = (),
           policy: Policy | None = None) -> Rules:
        """Checked options; every problem a :class:`KqplanError` naming the option."""
        q = parse_stat(stat)
        if not (math.isfinite(headroom) and headroom >= 1):
            raise KqplanError(f"--headroom {headroom:g} must be a number of at least 1",
                              hint="it multiplies the statistic: 1.5 proposes 50 % above it")
        if not (math.isfinite(tolerance) and tolerance >= 0):
            raise KqplanError(f"--tolerance {tolerance:g} must be a number of at least 0",
                              hint="0.5 keeps a current quota up to 50 % above the proposal")
        floors = parse_mins(mins)
        caps: dict[str, float] = {}
        for bound in policy.key_bounds if policy is not None else ():
            if bound.key not in USAGE_KEYS:
                continue
            if bound.min is not None:
                floors[bound.key] = max(floors.get(bound.key, bound.min), bound.min)
            if bound.max is not None:
                caps[bound.key] = bound.max
        for key, floor in floors.items():
            if key in caps and floor > caps[key]:
                raise KqplanError(f"--min {key}={yaml_value(key, floor)} is above the [policy] maximum "
                                  f"{yaml_value(key, caps[key])}", hint="lower --min, or change the policy")
        return cls(stat, q, headroom, tolerance, floors, caps)

    def propose(self, key: str, need: float) -> float | None:
        """``need`` rounded up, floored and capped; None when no step is that large."""
        proposal = round_up(key, need)
        if proposal is None:
            return None
        if key in self.floors:
            proposal = max(proposal, self.floors[key])
        if key in self.caps:
            proposal = min(proposal, self.caps[key])
        return proposal

    def decide(self, proposal: float, current: float | None) -> Action:
        """Keep, raise, lower or limit (the tolerance rule). A NaN on the cluster is lowered."""
        if current is None:
            return Action.LIMIT
        if proposal <= current <= proposal * (1.0 + self.tolerance):
            return Action.KEEP
        return Action.RAISE if current < proposal else Action.LOWER


def parse_mins(items: Sequence[str]) -> dict[str, float]:
    """``--min`` values: ``KEY=VALUE`` (or several, comma-separated); byte rates take units."""
    floors: dict[str, float] = {}
    for item in (part.strip() for text in items for part in text.split(",")):
        key, sep, raw = item.partition("=")
        key, raw = key.strip(), raw.strip()
        if not sep or not raw:
            raise KqplanError(f"--min {item!r} is not KEY=VALUE", hint="e.g. --min producer_byte_rate=1MiB")
        if key not in USAGE_KEYS:
            guess = did_you_mean(key, USAGE_KEYS)
            raise KqplanError(f"--min {item!r}: '{key}' is not a user/client-id quota key",
                              hint=f"did you mean '{guess}'?" if guess
                              else f"use one of {', '.join(USAGE_KEYS)}")
        if key in floors:
            raise KqplanError(f"--min {key} is given twice", hint="give each key once")
        try:
            value = float(parse_bytes(raw)) if QUOTA_KEYS[key].bytes_per_second and not _is_number(raw) \
                else float(raw)
        except UnitError as exc:
            raise KqplanError(f"--min {item!r}: {exc}", hint=exc.hint) from None
        except ValueError:
            raise KqplanError(f"--min {item!r}: '{raw}' is not a number") from None
        problem = value_error(key, value) if math.isfinite(value) else "it must be a finite number"
        if problem is not None:
            raise KqplanError(f"--min {item!r}: {problem}")
        floors[key] = value
    return floors


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# -- the rows ------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, order=True)
class ProposalRow:
    """One observed principal-key (``DIR/proposals.parquet``)."""

    cluster: str
    user: str
    client_id: str
    """The empty string for a client that sends no client-id."""
    key: str
    usage: float
    """The statistic over the principal's samples of this key."""
    need: float
    """usage × headroom."""
    proposal: float
    """need rounded up, floored and capped (the table shows it even when the action is keep)."""
    current_value: float | None
    """Effective quota now (null: unlimited)…"""
    current_source: str | None
    """…and the entity it comes from (display form)."""
    action: str
    """:class:`Action`: keep, raise, lower, limit or pin."""
    after_value: float
    """Effective quota once the manifests are applied: the proposal, or the kept value."""
    after_source: str
    """The entity that supplies it then."""


PROPOSAL_COLUMNS = tuple(ProposalRow.__slots__)


def target(user: str, client_id: str) -> Entity:
    """The principal's own entity: what only this connection resolves to (or, without a client-id,
    the only named entity Kafka looks at for it)."""
    return Entity.user_client(user, client_id) if client_id else Entity.user(user)


def _beyond(cluster: str, user: str, client_id: str, key: str, need: float) -> KqplanError:
    largest = yaml_value(key, steps_for(key)[-1])
    return KqplanError(f"cluster {cluster}: {target(user, client_id).display} needs {key} = {need:.6g} "
                       f"(usage × headroom), beyond any quota kqplan proposes (at most {largest})",
                       hint="check that principal's usage samples")


def check_rows(rows: Sequence[tuple[Any, ...]]) -> None:
    """The first row (in table order) whose need no step covers: an error naming it.
    Rows are ``(cluster, user, client_id, key, usage, need, proposal, …)``."""
    bad = [r for r in rows if r[6] is None]
    if bad:
        first = min(bad, key=lambda r: r[:4])
        raise _beyond(first[0], first[1], first[2], first[3], first[5])


def proposal_rows(states: Mapping[str, QuotaState], samples: Iterable[Sample],
                  rules: Rules) -> list[ProposalRow]:
    """The local engine: every observed principal-key of the clusters in ``states`` (the state now)."""
    stats = usage_stats(samples, rules.q)
    indexes = {cluster: QuotaIndex.of(state) for cluster, state in states.items()}
    drafts: list[tuple[Any, ...]] = []
    for (cluster, user, client_id), usage in sorted(stats.items()):
        index = indexes.get(cluster)
        if index is None:
            continue  # usage of a cluster not asked for
        now = effective(index, user, client_id)
        for key, (value, source) in zip(USAGE_KEYS, now, strict=True):
            u = usage.get(key)
            if u is None:
                continue
            need = u * rules.headroom
            proposal = rules.propose(key, need)
            action = rules.decide(proposal, value) if proposal is not None else None
            drafts.append((cluster, user, client_id, key, u, need, proposal, value,
                           source.display if source is not None else None, action))
    check_rows(drafts)
    # {user=U} written for U's client without a client-id: where U's other clients fall back
    shared = {(d[0], d[1], d[3]): d[6] for d in drafts if d[2] == "" and d[9] is not Action.KEEP}
    after_indexes: dict[str, QuotaIndex] = {}
    for cluster in {c for c, _, _ in shared}:
        state = dict(states[cluster])
        for (c, user, key), proposal in shared.items():
            if c == cluster:
                state[Entity.user(user)] = {**state.get(Entity.user(user), {}), key: proposal}
        after_indexes[cluster] = QuotaIndex.of(state)
    rows = []
    for cluster, user, client_id, key, u, need, proposal, value, source, decided in drafts:
        action, after_value, after_source = decided, value, source
        if action is not Action.KEEP:
            after_value, after_source = proposal, target(user, client_id).display
        elif client_id and (cluster, user, key) in shared:
            moved_value, moved_source = effective(after_indexes[cluster], user, client_id)[
                USAGE_KEYS.index(key)]
            if moved_value != value:
                action, after_source = Action.PIN, target(user, client_id).display
            else:
                after_source = moved_source.display if moved_source is not None else None
        rows.append(ProposalRow(cluster, user, client_id, key, u, need, proposal, value, source,
                                str(action), after_value, after_source))
    return sorted(rows)


# -- the Spark engine -----------------------------------------------------------------------------

def _buckets() -> list[tuple[str, int, list[float]]]:
    """``(family, bucket, steps)``: the steps a need of ``floor(log2(need)) == bucket`` can round
    up to. A step is at most twice the one before, so the answer lies in that bucket or the next;
    one more on each side absorbs a log2 that errs by one near a power of two."""
    rows = []
    for family, steps in (("bytes", BYTE_STEPS), ("plain", PLAIN_STEPS)):
        exponents = [math.frexp(step)[1] - 1 for step in steps]  # floor(log2(step)), exactly
        for bucket in range(exponents[0] - 1, exponents[-1] + 2):
            rows.append((family, bucket, [step for step, e in zip(steps, exponents, strict=True)
                                          if bucket - 1 <= e <= bucket + 2]))
    return rows


def _with_rounded(spark: Any, table: Any) -> Any:
    """``table`` with ``rounded``: ``need`` rounded up as :func:`round_up` does. A lookup rather
    than arithmetic: log2 picks a small broadcast bucket of candidate steps, and the exact
    comparison ``step >= need`` picks the step (a CASE over all 150 steps outgrew Spark's 64 KB
    generated-method limit once the optimizer inlined it)."""
    from pyspark.sql import functions as F

    byte_keys = [k for k in USAGE_KEYS if QUOTA_KEYS[k].bytes_per_second]
    is_bytes = F.col("key").isin(byte_keys)
    first = F.when(is_bytes, F.lit(BYTE_STEPS[0])).otherwise(F.lit(PLAIN_STEPS[0]))
    last = F.when(is_bytes, F.lit(BYTE_STEPS[-1])).otherwise(F.lit(PLAIN_STEPS[-1]))
    need = F.greatest(F.col("need"), first)  # below the first step: the first step
    buckets = spark.createDataFrame(_buckets(), "family string, bucket int, steps array<double>")
    table = (table.withColumn("family", F.when(is_bytes, F.lit("bytes")).otherwise(F.lit("plain")))
             # NaN and needs beyond the last step get no bucket, so no step (Python: None)
             .withColumn("bucket", F.when(F.col("need") <= last, F.floor(F.log2(need)).cast("int")))
             .join(F.broadcast(buckets), ["family", "bucket"], "left"))
    rounded = F.array_min(F.filter(F.col("steps"), lambda step: step >= need))
    return table.withColumn("rounded", rounded).drop("family", "bucket", "steps")


def _per_key(values: Mapping[str, float]) -> Any:
    """A column with ``values[key]`` for the row's key, null for other keys."""
    from pyspark.sql import functions as F

    column = F.lit(None).cast("double")
    for key, value in values.items():
        column = F.when(F.col("key") == key, F.lit(value)).otherwise(column)
    return column


def spark_proposal_rows(spark: Any, states: Mapping[str, QuotaState], usage: Any,
                        rules: Rules) -> list[ProposalRow]:
    """The rows of :func:`proposal_rows` from a usage frame (:func:`kqplan.fleet.spark_impact.usage_frame`)
    as DataFrame operations: impact's statistic and eight-level join (again for the principals a
    new ``{user=U}`` may move), the rounding as a broadcast lookup; rows come back only at the end."""
    from pyspark.sql import functions as F

    from kqplan.fleet.spark import collect_rows
    from kqplan.fleet.spark_impact import quota_entries, usage_table, with_effective

    keys = ["cluster", "user", "client_id", "key"]
    entries = quota_entries(spark, states)
    table = with_effective(spark, usage_table(spark, usage, list(states), rules.q)
                           .where(F.col("usage").isNotNull()), entries, "current")
    table = _with_rounded(spark, table.withColumn("need", F.col("usage") * F.lit(rules.headroom)))
    rounded = F.col("rounded")
    proposal = F.when(rounded.isNotNull(), F.greatest(rounded, _per_key(rules.floors))) if rules.floors \
        else rounded
    if rules.caps:
        proposal = F.least(proposal, _per_key(rules.caps))  # least/greatest skip a null bound
    value, p = F.col("current.value"), F.col("proposal")
    action = (F.when(p.isNull(), F.lit(None))
              .when(value.isNull(), F.lit(Action.LIMIT.value))
              # Spark orders NaN above every number (Python: no comparison holds); both give lower
              .when((p <= value) & (value <= p * F.lit(1.0 + rules.tolerance)), F.lit(Action.KEEP.value))
              .when(value < p, F.lit(Action.RAISE.value)).otherwise(F.lit(Action.LOWER.value)))
    table = table.withColumn("proposal", proposal).withColumn("action", action)

    written = (F.col("action") != Action.KEEP.value)
    shared = table.where((F.col("client_id") == "") & written)
    new_users = shared.select("cluster", F.concat(F.lit("N:"), F.col("user")).alias("u"),
                              F.lit("A").alias("c"), "key", p.alias("value"),
                              F.lit(None).cast("string").alias("source"))  # source: {user=U}, named below
    after_entries = (entries.join(new_users, ["cluster", "u", "c", "key"], "left_anti")
                     .unionByName(new_users))
    kept = (table.where((F.col("client_id") != "") & ~written)
            .join(shared.select("cluster", "user", "key"), ["cluster", "user", "key"], "left_semi"))
    moved = with_effective(spark, kept.select(*keys), after_entries, "after").select(*keys, "after")
    table = table.join(moved, keys, "left")
    pinned = F.col("after").isNotNull() & (F.col("after.value") != value)
    final_action = F.when(pinned, F.lit(Action.PIN.value)).otherwise(F.col("action"))
    after_value = F.when(written, p).otherwise(value)  # a pin keeps the current value
    after_source = (F.when(written | pinned, F.lit(None).cast("string"))  # the principal's own entity
                    .when(F.col("after").isNotNull(), F.col("after.source"))  # null: the new {user=U}
                    .otherwise(F.col("current.source")))
    result = table.select(*keys, "usage", "need", "proposal", value.alias("current_value"),
                          F.col("current.source").alias("current_source"), final_action.alias("action"),
                          after_value.alias("after_value"), after_source.alias("after_source"))
    collected = collect_rows(result)
    check_rows(collected)
    rows = []
    for r in collected:
        shown = r[11]
        if shown is None:  # written on the principal's own entity, or a new {user=U}
            shown = target(r[1], r[2]).display if r[9] != Action.KEEP.value else Entity.user(r[1]).display
        rows.append(ProposalRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], shown))
    return sorted(rows)
