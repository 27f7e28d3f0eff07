"""The loader's plain-shape check must never accept what pydantic refuses (it skips pydantic for
entity lists it accepts), and must accept the ordinary manifests it exists for."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from kqplan.manifest.loader import _plain_entities
from kqplan.manifest.models import Manifest

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=5),
                    st.lists(st.integers(), max_size=1), st.dictionaries(st.text(max_size=3), st.integers(),
                                                                         max_size=1))
keys = st.one_of(st.sampled_from(["user", "client-id", "client_id", "ip", "profile", "override", "protect",
                                  "metadata", "quotas", "team"]), st.integers(), st.text(max_size=4))
quota_maps = st.dictionaries(st.one_of(st.sampled_from(["producer_byte_rate", "x"]), st.integers()),
                             scalars, max_size=3)
entries = st.dictionaries(keys, st.one_of(scalars, quota_maps), max_size=5)


def pydantic_accepts(document: dict[str, Any]) -> bool:
    try:
        Manifest.model_validate(document)
    except ValidationError:
        return False
    return True


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.one_of(entries, scalars), min_size=1, max_size=4))
def test_never_accepts_what_pydantic_refuses(items: list[Any]) -> None:
    document = {"apiVersion": "kqplan/v1", "kind": "ClientQuotas", "entities": items}
    if _plain_entities(items):
        assert pydantic_accepts(document), items


def test_accepts_ordinary_entries() -> None:
    items = [{"user": "alice", "quotas": {"producer_byte_rate": "10MiB", "request_percentage": 25.5}},
             {"user": "<default>", "client-id": "c", "quotas": {"consumer_byte_rate": 1048576}},
             {"ip": "10.0.0.1", "quotas": {"connection_creation_rate": 10}},
             {"user": "bob", "profile": "gold", "override": True, "protect": False,
              "quotas": {"producer_byte_rate": None}},
             {"user": "carol", "team-id": "x"}]  # a custom entity type (checked by compile)
    assert _plain_entities(items)
    assert pydantic_accepts({"apiVersion": "kqplan/v1", "kind": "ClientQuotas", "entities": items})
