"""The plan file's encoding: orjson for speed, the standard library where a cluster holds NaN, and
plans written by earlier kqplan releases (standard-library digests) still accepted."""

from __future__ import annotations

import hashlib
import json
import math

import pytest

from kqplan.core.entity import Entity
from kqplan.core.errors import KqplanError
from kqplan.core.ownership import Ownership
from kqplan.core.plan import ClusterRef, Plan, diff
from kqplan.planfile.codec import _body, dumps_plan, loads_plan

CLUSTER = ClusterRef("abc", "h:9092", ">=2.6", "kraft")


def plan_of(desired: dict[Entity, dict[str, float]], actual: dict[Entity, dict[str, float]]) -> Plan:
    return diff(desired, actual, Ownership(), cluster=CLUSTER, fingerprint="sha256:f")


def test_same_document_as_the_standard_library() -> None:
    plan = plan_of({Entity.user("a\x1b[31m\u2028 é \"q\" \\"): {"producer_byte_rate": 1e16,
                                                               "request_percentage": 12.5},
                    Entity.user_client(None, "c"): {"consumer_byte_rate": 2.0**62}},
                   {Entity.user("gone"): {"producer_byte_rate": 5.0}})
    text = dumps_plan(plan)
    doc = json.loads(text)
    assert text == json.dumps(doc, indent=2, ensure_ascii=False) + "\n"  # layout and escapes alike
    assert loads_plan(text, source="p.json") == plan


def test_a_cluster_holding_nan_is_written_as_nan_not_null() -> None:
    plan = plan_of({Entity.user("a"): {"request_percentage": 5.0}},
                   {Entity.user("a"): {"request_percentage": math.nan}})
    text = dumps_plan(plan)
    assert '"request_percentage": NaN' in text
    back = loads_plan(text, source="p.json")
    assert math.isnan(back.changes[0].before["request_percentage"])  # type: ignore[index]


def test_plans_of_earlier_releases_still_load_and_edits_are_still_caught() -> None:
    plan = plan_of({Entity.user("a"): {"request_percentage": 1e-05}}, {})
    body = _body(plan)
    canonical = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    old = {**body, "digest": "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()}
    old_text = json.dumps(old, indent=2, ensure_ascii=False)
    assert "1e-05" in old_text
    assert "1e-05" not in dumps_plan(plan)
    assert loads_plan(old_text, source="old.json") == plan
    edited = old_text.replace('"unchanged": 0', '"unchanged": 7')
    with pytest.raises(KqplanError, match="edited after it was made"):
        loads_plan(edited, source="old.json")
