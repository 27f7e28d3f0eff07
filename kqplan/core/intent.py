"""Quota intent as code: tests on resolved quotas (``kind: QuotaTests``, ``kqplan test``).

A test names a connection (a principal with or without a client-id, or an ip address) and what
Kafka must give it, key by key: an exact value, ``unlimited``, or a bound (``at-most``,
``at-least``), optionally with the entity that must supply the value (``from``). It is judged on
Kafka's own resolution (:mod:`kqplan.core.resolve`: the eight levels, the empty client-id rule),
the same code as ``kqplan resolve`` and the protected principals. A principal without a client-id
must hold for every client-id it may connect with: none sent, one no entity names, and each one
named beside it (:class:`kqplan.core.resolve.ClientIds`).

A key whose value comes from a per-cluster budget (desired state, offline) cannot be judged without
the cluster's broker count: it is reported as such, never as holding.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from kqplan.core.diagnostics import Diagnostic, Loc, Pending, Source, Span, locate
from kqplan.core.entity import CLIENT_ID, IP, USER, Entity
from kqplan.core.quotas import amount
from kqplan.core.resolve import UNNAMED, ClientIds, QuotaIndex, ResolvedKey, resolve, resolve_ip
from kqplan.core.state import QuotaState


class Declared(Protocol):
    """Where a manifest declares an entity (:class:`kqplan.core.desired.Origin`)."""

    @property
    def source(self) -> Source: ...

    @property
    def loc(self) -> Loc: ...


class Bound(StrEnum):
    """How an expected value is compared with the resolved one."""

    EXACT = "exact"
    AT_MOST = "at-most"
    AT_LEAST = "at-least"


@dataclass(frozen=True, slots=True)
class Expectation:
    """One key of a test: ``value`` None with :attr:`Bound.EXACT` is ``unlimited``."""

    key: str
    bound: Bound
    value: float | None
    loc: Loc
    """Where it is written in its document (``("tests", 0, "expect", "producer_byte_rate")``)."""

    def holds(self, value: float | None) -> bool:
        """Whether a resolved value (None: unlimited) meets this expectation."""
        if self.bound is Bound.EXACT:
            return value == self.value
        if value is None:  # unlimited is above every bound
            return self.bound is Bound.AT_LEAST
        assert self.value is not None
        return value <= self.value if self.bound is Bound.AT_MOST else value >= self.value

    @property
    def text(self) -> str:
        """``10 MiB``, ``unlimited``, ``at most 50 MiB``."""
        if self.value is None:
            return "unlimited"
        shown = amount(self.key, self.value)
        return shown if self.bound is Bound.EXACT else f"{self.bound.value.replace('-', ' ')} {shown}"


@dataclass(frozen=True, slots=True)
class Connection:
    """Whom a test is about: ``user`` with ``client_id`` (None: every client-id), or ``ip``."""

    user: str | None = None
    client_id: str | None = None
    ip: str | None = None

    @property
    def display(self) -> str:
        if self.ip is not None:
            return f"{{ip={self.ip}}}"
        if self.client_id is None:
            return f"{{user={self.user}}} (any client-id)"
        return f"{{user={self.user}, client-id={self.client_id}}}"


@dataclass(frozen=True, slots=True)
class QuotaTest:
    """One test of a ``QuotaTests`` document."""

    name: str
    connection: Connection
    expect: tuple[Expectation, ...]
    supplier: Entity | None
    """``from``: the entity that must supply every expected key (None: any) but those expected
    ``unlimited``, which no entity supplies."""
    source: Source
    loc: Loc
    """The test's item in its document (``("tests", 3)``)."""

    def span(self) -> Span:
        return self.source.span(self.loc)


class Why(StrEnum):
    VALUE = "value"
    """The resolved value does not meet the expectation."""
    SOURCE = "source"
    """The value comes from another entity than ``from``."""
    BUDGET = "budget"
    """The value is a per-cluster budget's share: unknown without the cluster's broker count."""


@dataclass(frozen=True, slots=True)
class Miss:
    """One expected key a test does not get, for one of its connections."""

    expectation: Expectation
    why: Why
    value: float | None
    supplier: Entity | None
    """The entity that supplies the value (None: unlimited, nothing applies)."""
    client_id: str | None
    """The client-id it was found for when the test names none: ``""`` (none sent),
    :data:`kqplan.core.resolve.UNNAMED` or a named one; None when the test names it."""

    @property
    def context(self) -> str | None:
        if self.client_id is None:
            return None
        if self.client_id == UNNAMED:
            return "any client-id no entity names"
        return "no client-id sent" if self.client_id == "" else f"client-id {self.client_id}"

    @property
    def value_text(self) -> str:
        if self.why is Why.BUDGET:
            return "a per-cluster budget's share"
        return "unlimited" if self.value is None else amount(self.expectation.key, self.value)


@dataclass(frozen=True, slots=True)
class Verdict:
    test: QuotaTest
    misses: tuple[Miss, ...]

    @property
    def holds(self) -> bool:
        return not self.misses

    @property
    def unknown(self) -> bool:
        """Fails only for want of a broker count (every miss a budget's)."""
        return bool(self.misses) and all(m.why is Why.BUDGET for m in self.misses)


Budgets = Mapping[Entity, Mapping[str, float]]
"""Per entity, the keys written as per-cluster budgets (:attr:`kqplan.core.desired.DesiredState.budgets`)."""


def with_budgets(quotas: QuotaState, budgets: Budgets) -> QuotaState:
    """``quotas`` with each budget's key present where its entity sets it (its per-cluster value:
    a placeholder that wins where the budget's entity wins; :func:`judge` never compares it)."""
    if not budgets:
        return quotas
    merged: dict[Entity, Mapping[str, float]] = dict(quotas)
    for entity, keys in budgets.items():
        merged[entity] = {**merged.get(entity, {}), **keys}
    return merged


def judge(tests: Iterable[QuotaTest], state: QuotaState, budgets: Budgets | None = None) -> list[Verdict]:
    """Every test judged on ``state``; offline, a desired state with its ``budgets``
    (:func:`with_budgets`): a key one of them supplies is a miss of its own (:attr:`Why.BUDGET`)."""
    tests = list(tests)
    budgets = budgets or {}
    state = with_budgets(_relevant(state, tests), budgets)
    index = QuotaIndex.of(state)
    client_ids: ClientIds | None = None  # indexed on first use: one pass over the state
    out = []
    for test in tests:
        conn = test.connection
        misses: list[Miss] = []
        if conn.ip is not None:
            misses += _misses(test, resolve_ip(index, conn.ip, overridden=False).keys, None, budgets)
        else:
            assert conn.user is not None
            if conn.client_id is not None:
                probes: Sequence[str] = [conn.client_id]
            else:
                client_ids = client_ids or ClientIds.of(index)
                probes = client_ids.every(conn.user)
            for probe in probes:
                resolved = resolve(index, conn.user, probe, overridden=False).keys
                misses += _misses(test, resolved, None if conn.client_id is not None else probe, budgets)
        out.append(Verdict(test, tuple(misses)))
    return out


def _relevant(state: QuotaState, tests: Sequence[QuotaTest]) -> QuotaState:
    """The entities that can apply to a tested connection: another user's never can (indexing
    100k entities for a few tests cost 0.4 s; this pass, a tenth of that)."""
    users = {t.connection.user for t in tests if t.connection.user is not None}
    ips = any(t.connection.ip is not None for t in tests)
    keep = {}
    for entity, quotas in state.items():
        first_type, first_name = entity.parts[0]  # display order: user, client-id, ip
        if first_type == USER:
            if first_name is None or first_name in users:
                keep[entity] = quotas
        elif first_type == CLIENT_ID or (ips and first_type == IP):
            keep[entity] = quotas
    return keep


def _misses(test: QuotaTest, resolved: Sequence[ResolvedKey], client_id: str | None,
            budgets: Budgets) -> list[Miss]:
    by_key = {r.key: r for r in resolved}
    out = []
    for expectation in test.expect:
        got = by_key[expectation.key]
        value, source = got.value, got.source
        if source is not None and expectation.key in budgets.get(source, ()):
            out.append(Miss(expectation, Why.BUDGET, None, source, client_id))
        elif not expectation.holds(value):
            out.append(Miss(expectation, Why.VALUE, value, source, client_id))
        elif test.supplier is not None and expectation.value is not None and source != test.supplier:
            out.append(Miss(expectation, Why.SOURCE, value, source, client_id))
    return out


TEST_FAILS = "KQP201"
"""A quota test does not hold."""
NEEDS_BROKERS = "KQP202"
"""A quota test cannot be judged offline: a key is a per-cluster budget's share."""


def _miss_text(miss: Miss, contexts: Sequence[str]) -> str:
    key = miss.expectation.key
    where = f" with {' and '.join(contexts)}" if contexts else ""
    if miss.why is Why.SOURCE:
        return (f"{key} comes from {miss.supplier.display if miss.supplier else 'no entity'}"
                f"{where} ({miss.value_text})")
    source = f" from {miss.supplier.display}" if miss.supplier is not None else " (no quota at any level)"
    if miss.why is Why.BUDGET:
        return f"{key} is {miss.supplier.display if miss.supplier else '?'}'s per-cluster budget{where}"
    return f"{key} is {miss.value_text}{source}{where}, expected {miss.expectation.text}"


def _misses_text(misses: Iterable[Miss]) -> str:
    """The misses, those alike but for the client-id (a test without one) said once."""
    alike: dict[tuple[object, ...], list[str]] = {}
    first: dict[tuple[object, ...], Miss] = {}
    for miss in misses:
        same = (miss.expectation, miss.why, miss.value, miss.supplier)
        first.setdefault(same, miss)
        contexts = alike.setdefault(same, [])
        if miss.context is not None:
            contexts.append(miss.context)
    return "; ".join(_miss_text(first[k], contexts) for k, contexts in alike.items())


def diagnostics(verdicts: Iterable[Verdict], origins: Mapping[Entity, Declared]) -> list[Diagnostic]:
    """One located error per test that does not hold: at the test, every key it misses with the
    value, the entity that supplies it (and where a manifest declares it) and the expectation."""
    out = []
    for verdict in verdicts:
        if verdict.holds:
            continue
        test = verdict.test
        suppliers = {m.supplier for m in verdict.misses if m.supplier is not None}
        related = tuple((origins[e].source, origins[e].loc, f"{e.display} is declared")
                        for e in sorted(suppliers, key=lambda e: e.display) if e in origins)
        if verdict.unknown:
            out.append(locate(test.source, Pending(
                NEEDS_BROKERS, f"test '{test.name}' cannot be judged without the cluster's broker count: "
                + _misses_text(verdict.misses), test.loc, related=related,
                hint="run kqplan test against the cluster (--cluster NAME or another target), where the "
                "budget is divided by its broker count")))
            continue
        misses = [m for m in verdict.misses if m.why is not Why.BUDGET]
        wanted = f" from {test.supplier.display}" if test.supplier is not None else ""
        out.append(locate(test.source, Pending(
            TEST_FAILS, f"test '{test.name}' fails for {test.connection.display}: "
            + _misses_text(misses), test.loc, related=related,
            hint=f"change the manifests so that Kafka resolves what the test expects{wanted}, or the "
            "test if the change is meant (kqplan resolve --show-overridden shows every level)")))
    return out


def plan_notes(before: Sequence[Verdict], after: Sequence[Verdict]) -> list[str]:
    """What a plan says of the tests (as terraform's check blocks, never a refusal: ``kqplan test``
    is the gate): each test the plan makes stop or start holding, each still failing, and a count."""
    notes = []
    for was, now in zip(before, after, strict=True):
        test = now.test
        where = f"quota test '{test.name}' ({test.span()})"
        reasons = _misses_text(now.misses)
        if was.holds and not now.holds:
            notes.append(f"{where} would stop holding: {reasons}.")
        elif now.holds and not was.holds:
            notes.append(f"{where} would start holding.")
        elif not now.holds:
            notes.append(f"{where} fails before and after this plan: {reasons}.")
    held = sum(v.holds for v in after)
    notes.append(f"Quota tests after this plan: {held} hold, {len(after) - held} fail (of {len(after)}).")
    return notes
