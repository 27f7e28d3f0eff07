"""What each observed principal's quotas should be, per quota bucket: the bucket's usage × headroom,
rounded up to a value people write, floored and capped, compared with the quota it has now.

Kafka enforces a quota per *bucket* (:mod:`kqplan.core.buckets`): all of U's clients share a quota
from ``{user=U}`` or ``{user=<default>}``, all users of client-id C one from ``{client-id=C}`` or
``{client-id=<default>}``. So a proposal is made per bucket and key, and covers its members together.
The rules, in the order applied (the README's "rightsize" section says the same in prose):

* ``need = bucket usage × headroom``: the bucket's usage is ``fleet impact``'s (each member's mean
  per ``--window`` of ts, summed, then the statistic — max or pNN — over the windows; without ts the
  members' statistics summed). A principal unlimited now is sized alone. The per-principal
  statistic stays in the table (``usage``).
* **Rounding up** to the next value of one series, ``1, 2, 3, 4, 5, 6, 8`` then ``10, 12, 15, 20, 25,
  30, 40, 50, 60, 80`` in every decade: byte rates as that many KiB, MiB, GiB (below 1024 of the
  unit) or TiB, so that a proposal reads ``20MiB`` or ``250KiB``, and is exactly what ``kqplan fmt``
  writes; request_percentage and controller_mutation_rate as plain numbers from 1. Above 10 units a
  step adds at most a third.
* **Floor and cap**: ``--min KEY=VALUE`` and ``[policy] keys.KEY.min`` raise a proposal, ``[policy]
  keys.KEY.max`` lowers it (the table then shows a need above the proposal).
* **Tolerance**: the bucket's current quota ``V`` (from :func:`kqplan.core.resolve.effective`, any
  source: a ``<default>`` entity or the principal's own) is *kept* when ``P <= V <= P × (1 +
  tolerance)``: it covers the proposal ``P`` and is not too generous. A bucket covered so by a
  default gets no entity of its own; an explicit quota does not flap between two steps from week
  to week. Otherwise the action is ``raise`` (V < P), ``lower`` (V > P × (1 + tolerance)) or
  ``limit`` (no quota now), and P is written on the bucket's own entity — the one its metric tags
  name: ``{user=U}`` (for a quota from ``{user=U}`` or ``{user=<default>}``), ``{client-id=C}``, or
  ``{user=U, client-id=C}`` — so its members keep sharing one quota, now sized for all of them. An
  unlimited principal gets its own entity: ``{user=U, client-id=C}``, or ``{user=U}`` for a client
  that sends no client-id (Kafka looks only at ``{user=U}`` and ``{user=<default>}`` for it).
* **Evidence**: a lowering needs ``--min-samples`` of the bucket's usage — its windows (a
  bucket's usage is measured once per window), or without ts its samples. Below that the bucket is
  *held* (action ``hold``): nothing is written, the quota now stays, and the row carries the counts
  (``samples``, ``windows``) that say why — one sample says little about the clients not seen.
* **Pins**: a new ``{user=U}`` outranks U's quotas from ``{user=<default>, client-id=…}`` and the
  client-id levels. An observed client of U it would move out of its bucket is written on its own
  entity at the value its bucket gets — its current value when kept (action ``pin``), the bucket's
  proposal otherwise — so no observed principal-key changes by accident.

Three executions give the same rows: :func:`proposal_rows` (the reference: every sample a Python
object), :func:`kqplan.fleet.columnar_rightsize.proposals_of_files` (the local engine: DuckDB's
aggregates of the usage files, then :func:`grouped`, :func:`decided` and :func:`drafted_rows`, the
reference's own decisions) and :func:`kqplan.fleet.spark_rightsize.spark_proposal_rows` (DataFrame
operations over the joins of :mod:`kqplan.fleet.spark_impact`).
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from kqplan.core.buckets import bucket_of
from kqplan.core.diagnostics import did_you_mean
from kqplan.core.entity import Entity
from kqplan.core.errors import KqplanError
from kqplan.core.policy import Policy
from kqplan.core.quotas import QUOTA_KEYS, value_error
from kqplan.core.resolve import QuotaIndex, effective
from kqplan.core.state import QuotaState
from kqplan.core.units import UnitError, parse_bytes
from kqplan.fleet.impact import DEFAULT_WINDOW, group_usage, group_windows, usage_stats, window_means
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
    HOLD = "hold"  # a lowering held back: too few samples to be sure of it; nothing written


UNWRITTEN = (Action.KEEP, Action.HOLD)
"""The actions that write nothing: the quota now stays."""
DAY = 86400
"""``--min-samples`` by default: the windows of one day (``DAY // window``)."""


def default_min_samples(window: float) -> int:
    """The windows of ``--window`` seconds in one day: the evidence a lowering needs by default."""
    return max(1, int(DAY // window))


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
    min_samples: int = 0
    """What a lowering needs of a bucket's usage: that many windows (without ts: samples)."""

    @classmethod
    def of(cls, *, stat: str, headroom: float, tolerance: float, mins: Sequence[str] = (),
           policy: Policy | None = None, min_samples: int = 0) -> Rules:
        """Checked options; every problem a :class:`KqplanError` naming the option."""
        q = parse_stat(stat)
        if not (math.isfinite(headroom) and headroom >= 1):
            raise KqplanError(f"--headroom {headroom:g} must be a number of at least 1",
                              hint="it multiplies the statistic: 1.5 proposes 50 % above it")
        if not (math.isfinite(tolerance) and tolerance >= 0):
            raise KqplanError(f"--tolerance {tolerance:g} must be a number of at least 0",
                              hint="0.5 keeps a current quota up to 50 % above the proposal")
        if min_samples < 0:
            raise KqplanError(f"--min-samples {min_samples} must be a count of at least 0",
                              hint="the windows (without ts: the samples) a lowering needs; 0 lowers on any")
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
        return cls(stat, q, headroom, tolerance, floors, caps, min_samples)

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

    def decide(self, proposal: float, current: float | None, evidence: int | None = None) -> Action:
        """Keep, raise, lower or limit (the tolerance rule); a lowering on less ``evidence`` (the
        bucket's windows, or samples) than :attr:`min_samples` is held. A NaN on the cluster is
        lowered."""
        if current is None:
            return Action.LIMIT
        if proposal <= current <= proposal * (1.0 + self.tolerance):
            return Action.KEEP
        if current < proposal:
            return Action.RAISE
        return Action.HOLD if evidence is not None and evidence < self.min_samples else Action.LOWER


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
    bucket: str | None
    """The bucket the principal's usage of this key is enforced in now (its display form; null:
    unlimited now, the principal is then sized alone)."""
    bucket_usage: float
    """The bucket's usage, as ``fleet impact`` computes it (windows of the members' means summed)."""
    need: float
    """bucket_usage × headroom."""
    proposal: float
    """need rounded up, floored and capped (the table shows it even when the action is keep)."""
    current_value: float | None
    """Effective quota now (null: unlimited)…"""
    current_source: str | None
    """…and the entity it comes from (display form)."""
    action: str
    """:class:`Action`: keep, raise, lower, limit, pin or hold."""
    after_value: float
    """Effective quota once the manifests are applied: the proposal, or the kept value."""
    after_source: str
    """The entity that supplies it then: the one written (the bucket's, or the principal's own for a
    pin), or for keep and hold the current one."""
    samples: int = 0
    """The samples of this key from the bucket's observed members: what ``bucket_usage`` rests on."""
    windows: int | None = None
    """The windows of ``--window`` seconds with any of them (null: a cluster without ts, not
    windowed). A lowering needs ``--min-samples`` of these (without ts: of the samples)."""


PROPOSAL_COLUMNS = tuple(ProposalRow.__slots__)


def target(user: str, client_id: str) -> Entity:
    """The principal's own entity: what only this connection resolves to (or, without a client-id,
    the only named entity Kafka looks at for it)."""
    return Entity.user_client(user, client_id) if client_id else Entity.user(user)


def written_entity(row: ProposalRow) -> Entity | None:
    """The entity ``row``'s quota is written on (None for keep and hold): its bucket's entity
    (``{user=U}``, ``{client-id=C}`` or ``{user=U, client-id=C}``), or its own for a pinned principal."""
    if row.action in UNWRITTEN:
        return None
    for entity in (target(row.user, row.client_id), Entity.user(row.user), Entity.client(row.client_id)):
        if entity.display == row.after_source:
            return entity
    raise ValueError(f"{row.after_source} is not an entity of {target(row.user, row.client_id).display}")


def _beyond(cluster: str, group: str, key: str, need: float) -> KqplanError:
    largest = yaml_value(key, steps_for(key)[-1])
    return KqplanError(f"cluster {cluster}: {group} needs {key} = {need:.6g} (usage × headroom), beyond "
                       f"any quota kqplan proposes (at most {largest})",
                       hint="check the usage samples of that bucket's principals")


def check_rows(rows: Sequence[tuple[Any, ...]]) -> None:
    """The first row (in table order) whose need no step covers: an error naming its bucket.
    Rows are ``(cluster, user, client_id, key, group, need, proposal, …)``, ``group`` the display
    of the entity the proposal would be written on."""
    bad = [r for r in rows if r[6] is None]
    if bad:
        first = min(bad, key=lambda r: r[:4])
        raise _beyond(first[0], first[4], first[3], first[5])


Principal = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class Draft:
    """A principal-key before the pins: its bucket (the entity a proposal is written on) and the
    bucket's decision."""

    principal: Principal
    key: str
    usage: float
    value: float | None
    source: Entity | None
    group: Entity
    group_usage: float
    samples: int
    windows: int | None
    need: float
    proposal: float | None
    action: Action | None


Group = tuple[str, str, Entity]
"""A bucket of one key: (cluster, key, the entity a proposal for it is written on)."""
Found = tuple[Principal, str, float, float | None, Entity | None, Group]
"""An observed principal-key: its statistic, its quota now and source, and its bucket."""


def grouped(states: Mapping[str, QuotaState], stats: Mapping[Principal, Mapping[str, float]]
            ) -> tuple[list[Found], dict[Group, list[Principal]]]:
    """Every observed principal-key (``stats``: principal -> key -> statistic) with its quota now
    and its bucket, and each bucket's members (in the order of the principals): what the engines'
    aggregates of the buckets are computed for."""
    indexes = {cluster: QuotaIndex.of(state) for cluster, state in states.items()}
    found: list[Found] = []
    members: dict[Group, list[Principal]] = {}
    for p, usage in sorted(stats.items()):
        cluster, user, client_id = p
        now = effective(indexes[cluster], user, client_id)
        for key, (value, source) in zip(USAGE_KEYS, now, strict=True):
            if key in usage:
                # unlimited now: sized alone, on its own entity
                group = (cluster, key, bucket_of(source, user, client_id) or target(user, client_id))
                members.setdefault(group, []).append(p)
                found.append((p, key, usage[key], value, source, group))
    return found, members


def decided(found: Sequence[Found], totals: Mapping[Group, tuple[float, int, int | None]],
            rules: Rules) -> list[Draft]:
    """The drafts of the principal-keys ``found``, given each bucket's usage, its members' samples
    and its windows (None: a cluster without ts): the bucket's proposal and action, decided once
    per bucket (its members share one quota, hence one value)."""
    drafts = []
    for p, key, usage, value, source, (cluster, _, entity) in found:
        total, n, windows = totals[cluster, key, entity]
        need = total * rules.headroom
        proposal = rules.propose(key, need)
        seen = n if windows is None else windows  # the evidence: windows, or without ts samples
        action = None if proposal is None else rules.decide(proposal, value, seen)
        drafts.append(Draft(p, key, usage, value, source, entity, total, n, windows, need, proposal, action))
    return drafts


def _drafts(states: Mapping[str, QuotaState], samples: Sequence[Sample], rules: Rules,
            window: float) -> list[Draft]:
    """The reference's aggregates, over the samples in Python: each principal's statistic, each
    bucket's usage (:func:`kqplan.fleet.impact.group_usage`), samples and windows."""
    untimed = frozenset(s.cluster for s in samples if s.ts is None)
    stats = usage_stats(samples, rules.q)
    means = window_means((s for s in samples if s.cluster not in untimed), window)
    counts = Counter(((s.cluster, s.user, s.client_id), s.key) for s in samples)
    found, members = grouped(states, stats)
    totals: dict[Group, tuple[float, int, int | None]] = {}
    for g, m in members.items():
        total = group_usage(m, g[1], rules.q, timed=g[0] not in untimed, stats=stats, means=means)
        assert total is not None  # its members have samples of the key
        totals[g] = (total, sum(counts[p, g[1]] for p in m),
                     None if g[0] in untimed else group_windows(m, g[1], means))
    return decided(found, totals, rules)


def proposal_rows(states: Mapping[str, QuotaState], samples: Iterable[Sample], rules: Rules, *,
                  window: float = DEFAULT_WINDOW) -> list[ProposalRow]:
    """The reference: every observed principal-key of the clusters in ``states`` (the state now).

    A bucket that is not kept is written on its own entity (``{user=U}``, ``{client-id=C}``,
    ``{user=U, client-id=C}``) with the proposal of its usage. A new ``{user=U}`` outranks U's
    quotas from ``{user=<default>, …}`` and client-id levels: a principal it would move out of its
    bucket is pinned on its own entity at the value its bucket gets (the current one when kept)."""
    mine = [s for s in samples if s.cluster in states]
    return drafted_rows(states, _drafts(states, mine, rules, window))


def drafted_rows(states: Mapping[str, QuotaState], drafts: Sequence[Draft]) -> list[ProposalRow]:
    """The rows of ``drafts`` (the engines' aggregates decided): an error for a bucket whose need
    no step covers; a principal a new ``{user=U}`` would move out of its bucket pinned."""
    check_rows([(*d.principal, d.key, d.group.display, d.need, d.proposal) for d in drafts])
    writes: dict[str, dict[Entity, dict[str, float]]] = {}
    for d in drafts:
        if d.action not in UNWRITTEN:
            assert d.proposal is not None
            writes.setdefault(d.principal[0], {}).setdefault(d.group, {})[d.key] = d.proposal
    after = {cluster: QuotaIndex.of({**states[cluster], **{e: {**states[cluster].get(e, {}), **q}
                                                            for e, q in written.items()}})
             for cluster, written in writes.items()}
    rows = []
    for d in drafts:
        cluster, user, client_id = d.principal
        assert d.proposal is not None
        assert d.action is not None
        kept = d.action in UNWRITTEN
        action, value = d.action, d.value if kept else d.proposal
        expected = d.source if kept else d.group
        moved = cluster in after and effective(after[cluster], user, client_id)[
            USAGE_KEYS.index(d.key)][1] != expected
        if moved:  # a new {user=U} outranks its bucket's entity: pinned on its own
            action, expected = (Action.PIN if kept else action), target(user, client_id)
        assert value is not None
        assert expected is not None
        now = bucket_of(d.source, user, client_id)
        rows.append(ProposalRow(cluster, user, client_id, d.key, d.usage,
                                now.display if now is not None else None, d.group_usage, d.need,
                                d.proposal, d.value,
                                d.source.display if d.source is not None else None, str(action), value,
                                expected.display, d.samples, d.windows))
    return sorted(rows)
