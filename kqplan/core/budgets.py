"""Cluster-wide budgets: ``producer_byte_rate: {per-cluster: 300MiB}`` divided by the broker count.

Kafka enforces client quotas per broker: a client whose partitions lead on 6 brokers may use 6×
its quota. A budget is the cluster-wide amount; a plan divides it by the cluster's broker count
(the Metadata answer of the cluster, or ``brokers = N`` in the inventory for an offline target)
and writes the per-broker quota. Whole-number keys (``LONG``/``INT``: byte rates,
``connection_creation_rate``) are rounded down, so that the brokers together never allow more
than the budget and the value is one a ZooKeeper-mode broker stores as is (it truncates
fractions, :func:`kqplan.core.quotas.zookeeper_whole`); ``DOUBLE`` keys and custom keys are
divided exactly. A per-broker value of a whole-number key below 1 is refused (KQP119): Kafka
refuses 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from kqplan.core.desired import DesiredState
from kqplan.core.diagnostics import Diagnostic, Pending, locate
from kqplan.core.entity import Entity
from kqplan.core.policy import ABOVE_MAX, BELOW_MIN, Policy, rule_name
from kqplan.core.quotas import QUOTA_KEYS, ValueType, amount, value_error
from kqplan.core.units import format_number

TOO_SMALL = "KQP119"
"""A budget that divides to less than Kafka accepts per broker."""


@dataclass(frozen=True, slots=True)
class Budget:
    """One key of one entity written as a budget, divided."""

    entity: Entity
    key: str
    per_cluster: float
    brokers: int
    per_broker: float

    @property
    def rounded(self) -> bool:
        return self.per_broker * self.brokers != self.per_cluster

    def show(self) -> str:
        """``300 MiB per cluster ÷ 3 brokers = 100 MiB per broker`` (``, rounded down``)."""
        text = (f"{amount(self.key, self.per_cluster)} per cluster ÷ {self.brokers} "
                f"broker{'' if self.brokers == 1 else 's'} = {amount(self.key, self.per_broker)} per broker")
        return text + (" (rounded down)" if self.rounded and whole_key(self.key) else "")


def whole_key(key: str) -> bool:
    """Whether Kafka keeps ``key`` as a whole number (``LONG``/``INT``)."""
    spec = QUOTA_KEYS.get(key)
    return spec is not None and spec.type is not ValueType.DOUBLE


def per_broker(key: str, per_cluster: float, brokers: int) -> float:
    """The per-broker quota of a budget: rounded down for whole-number keys, exact otherwise."""
    if brokers < 1:
        raise ValueError(f"a cluster has at least one broker, not {brokers}")
    if whole_key(key):
        return float(int(per_cluster) // brokers)
    return per_cluster / brokers


def divide(desired: DesiredState, brokers: int, policy: Policy | None = None
           ) -> tuple[dict[Entity, dict[str, float]], tuple[Budget, ...], list[Diagnostic]]:
    """The desired quotas with every budget divided by ``brokers`` (the same mapping when there
    is no budget), the budgets, and the problems of the divided values: below what Kafka accepts
    (KQP119) or outside the policy's bounds (KQP150/KQP151), each at its entry."""
    if not desired.budgets:
        return desired.quotas, (), []
    quotas = dict(desired.quotas)
    found: list[Budget] = []
    problems: list[Diagnostic] = []
    for entity, keys in desired.budgets.items():
        merged = dict(quotas.get(entity, {}))
        for key, value in sorted(keys.items()):
            budget = Budget(entity, key, value, brokers, per_broker(key, value, brokers))
            found.append(budget)
            merged[key] = budget.per_broker
            problems.extend(_problems(desired, budget, policy))
        quotas[entity] = merged
    return quotas, tuple(found), problems


def _problems(desired: DesiredState, budget: Budget, policy: Policy | None) -> list[Diagnostic]:
    origin = desired.origins.get(budget.entity)
    if origin is None:
        return []
    loc = (*origin.loc, "quotas", budget.key)
    out = []
    key, value = budget.key, budget.per_broker
    if key in QUOTA_KEYS and value_error(key, value) is not None:
        out.append(locate(origin.source, Pending(
            TOO_SMALL, f"{key} of {budget.entity.display}: {budget.show()}, which Kafka refuses "
            f"({value_error(key, value)})", loc,
            hint=f"raise the budget to at least {amount(key, float(budget.brokers))} per cluster, or "
            "write a per-broker value")))
    bounds = {b.key: b for b in policy.key_bounds} if policy is not None else {}
    bound = bounds.get(key)
    if bound is not None and bound.min is not None and value < bound.min:
        out.append(locate(origin.source, Pending(
            BELOW_MIN, f"{key} of {budget.entity.display}: {budget.show()}, below the minimum "
            f"{format_number(bound.min)} ({rule_name(policy, f'keys.{key}.min')})", loc,
            hint="raise the budget, or change the policy")))
    if bound is not None and bound.max is not None and value > bound.max:
        out.append(locate(origin.source, Pending(
            ABOVE_MAX, f"{key} of {budget.entity.display}: {budget.show()}, above the maximum "
            f"{format_number(bound.max)} ({rule_name(policy, f'keys.{key}.max')})", loc,
            hint="lower the budget, or change the policy")))
    return out
