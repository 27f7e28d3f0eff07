"""Cluster-wide budgets: the division, its rounding by key type, the arithmetic shown, and the
divided values checked by Kafka's rules and the policy's bounds."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kqplan.core.budgets import Budget, amount, divide, per_broker
from kqplan.core.desired import DesiredState
from kqplan.core.entity import Entity
from kqplan.core.policy import KeyBounds, Policy
from kqplan.core.quotas import value_error, zookeeper_whole

P = "producer_byte_rate"
MIB = 1024.0 * 1024


def test_whole_number_keys_round_down_and_doubles_divide_exactly():
    assert per_broker(P, 300 * MIB, 3) == 100 * MIB
    assert per_broker(P, 100 * MIB, 3) == 34952533.0  # 104857600 / 3 = 34952533.33…
    assert per_broker("connection_creation_rate", 100.0, 6) == 16.0
    assert per_broker("request_percentage", 100.0, 3) == pytest.approx(33.333333333333336)
    assert per_broker("controller_mutation_rate", 10.0, 4) == 2.5
    assert per_broker("x_custom_rate", 10.0, 4) == 2.5  # custom keys: exact
    assert per_broker(P, 2.0, 3) == 0.0  # refused later (KQP119)
    with pytest.raises(ValueError, match="at least one broker"):
        per_broker(P, 1.0, 0)


@given(st.integers(1, 2**53), st.integers(1, 1000))
def test_never_more_than_the_budget_and_stored_as_is_by_zookeeper(budget, brokers):
    value = per_broker(P, float(budget), brokers)
    whole = int(value)
    assert value == whole
    # in whole numbers: (value + 1) * brokers in floats rounds 2**53 + 1 down to 2**53
    assert whole * brokers <= budget < (whole + 1) * brokers
    assert zookeeper_whole(value, "LONG") == value  # a ZooKeeper-mode broker keeps it as it is


def test_the_arithmetic_shown():
    assert Budget(Entity.user("etl"), P, 300 * MIB, 3, 100 * MIB).show() == \
        "300 MiB per cluster ÷ 3 brokers = 100 MiB per broker"
    assert Budget(Entity.user("etl"), P, 100 * MIB, 3, 34952533.0).show() == \
        "100 MiB per cluster ÷ 3 brokers = 34952533 (≈33.33 MiB) per broker (rounded down)"
    assert Budget(Entity.user("etl"), "request_percentage", 90.0, 1, 90.0).show() == \
        "90 per cluster ÷ 1 broker = 90 per broker"
    assert amount(P, 1000.0) == "1000"


def test_divide_merges_budgets_and_reports_what_kafka_or_the_policy_refuses():
    a, b = Entity.user("a"), Entity.user("b")
    desired = DesiredState(quotas={a: {"request_percentage": 5.0}, b: {}},
                           budgets={a: {P: 300 * MIB}, b: {P: 2.0}})
    quotas, budgets, problems = divide(desired, 3)
    assert quotas == {a: {"request_percentage": 5.0, P: 100 * MIB}, b: {P: 0.0}}
    assert [(x.entity, x.per_broker) for x in budgets] == [(a, 100 * MIB), (b, 0.0)]
    assert problems == []  # without origins nothing can be located (compile always gives them)
    assert value_error(P, quotas[b][P]) is not None
    assert divide(DesiredState(quotas={a: {P: 1.0}}), 3) == ({a: {P: 1.0}}, (), [])
    policy = Policy(key_bounds=(KeyBounds(P, None, 50 * MIB),))
    assert divide(desired, 3, policy)[0][a][P] == 100 * MIB
