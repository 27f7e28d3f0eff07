"""The loader's plain-shape check must never accept what pydantic refuses (it skips pydantic for
entity lists it accepts), and must accept the ordinary manifests it exists for."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from kqplan.manifest.head import OWNERSHIP_FIELDS, plain_head
from kqplan.manifest.models import Manifest, Ownership
from kqplan.manifest.shape import plain_entities

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
    if plain_entities(items):
        assert pydantic_accepts(document), items


def test_accepts_ordinary_entries() -> None:
    items = [{"user": "alice", "quotas": {"producer_byte_rate": "10MiB", "request_percentage": 25.5}},
             {"user": "<default>", "client-id": "c", "quotas": {"consumer_byte_rate": 1048576}},
             {"ip": "10.0.0.1", "quotas": {"connection_creation_rate": 10}},
             {"user": "bob", "profile": "gold", "override": True, "protect": False,
              "quotas": {"producer_byte_rate": None}},
             {"user": "carol", "team-id": "x"}]  # a custom entity type (checked by compile)
    assert plain_entities(items)
    assert pydantic_accepts({"apiVersion": "kqplan/v1", "kind": "ClientQuotas", "entities": items})


# The document-level fields: plain_head must accept only what pydantic accepts, with the same values.
head_scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
                         st.floats(), st.sampled_from(["", "x", "kqplan/v1", "ClientQuotas", "10MiB"]),
                         st.lists(st.integers(), max_size=1))
str_maps = st.dictionaries(st.one_of(st.sampled_from(["user", "client-id", "x"]), st.integers()),
                           st.one_of(st.sampled_from(["payments-*", "<default>", ""]), head_scalars),
                           max_size=2)
head_values = {
    "apiVersion": st.one_of(st.just("kqplan/v1"), head_scalars),
    "kind": st.one_of(st.just("ClientQuotas"), head_scalars),
    "cluster": st.one_of(st.sampled_from(["prod", ""]), head_scalars),
    "metadata": st.one_of(head_scalars, st.fixed_dictionaries(
        {}, optional={"labels": st.one_of(str_maps, head_scalars), "description": head_scalars,
                      "owner": st.just("x")})),
    "ownership": st.one_of(head_scalars, st.fixed_dictionaries(
        {}, optional={"prune": head_scalars, "scope": st.one_of(st.lists(st.one_of(str_maps, head_scalars),
                                                                          max_size=2), head_scalars),
                      "extra": st.just(1)})),
    "profiles": st.one_of(head_scalars, st.dictionaries(
        st.one_of(st.sampled_from(["gold", "silver"]), st.integers()),
        st.one_of(head_scalars, st.dictionaries(st.one_of(st.sampled_from(["producer_byte_rate", "x"]),
                                                          st.integers()), head_scalars, max_size=2)),
        max_size=2)),
    "entities": st.one_of(st.just([]), head_scalars),
    "bogus": st.just(1),
}
heads = st.fixed_dictionaries({"apiVersion": st.just("kqplan/v1"), "kind": st.just("ClientQuotas")},
                              optional={k: v for k, v in head_values.items()
                                        if k not in ("apiVersion", "kind")})


@settings(max_examples=4000, deadline=None)
@given(st.one_of(heads, st.fixed_dictionaries({}, optional=head_values)))
def test_plain_head_is_what_pydantic_reads(document: dict[str, Any]) -> None:
    head = plain_head(document)
    entries = document.get("entities", [])
    if head is None or not (isinstance(entries, list) and plain_entities(entries)):  # as validate_model
        return
    model = Manifest.model_validate(document)  # raises if plain_head accepted too much
    assert head.cluster == model.cluster
    assert head.profiles == model.profiles
    assert [{k: v.__class__ for k, v in p.items()} for p in head.profiles.values()] == \
        [{k: v.__class__ for k, v in p.items()} for p in model.profiles.values()]
    if model.ownership is None:
        assert head.ownership is None
    else:
        assert head.ownership is not None
        assert (head.ownership.prune, head.ownership.scope) == (model.ownership.prune, model.ownership.scope)


def test_plain_head_reads_ordinary_documents() -> None:
    document = {"apiVersion": "kqplan/v1", "kind": "ClientQuotas", "cluster": "prod-eu",
                "metadata": {"labels": {"team": "payments"}, "description": "why"},
                "ownership": {"prune": True, "scope": [{"user": "payments-*"}]},
                "profiles": {"gold": {"producer_byte_rate": "50MiB", "request_percentage": 25.5}},
                "entities": []}
    head = plain_head(document)
    assert head is not None
    assert head.ownership is not None
    assert head.ownership.prune
    assert tuple(Ownership.model_fields) == OWNERSHIP_FIELDS


def test_valid_manifests_load_without_pydantic(tmp_path: Path) -> None:
    """A valid run of the usual shape never imports pydantic (a fresh interpreter tells)."""
    (tmp_path / "q.yaml").write_text(
        "apiVersion: kqplan/v1\nkind: ClientQuotas\ncluster: prod\n"
        "profiles:\n  gold: {producer_byte_rate: 1MiB}\n"
        "ownership:\n  prune: true\n  scope: [{user: 'a-*'}]\nentities:\n  - user: a-1\n    profile: gold\n"
        "  - user: a-2\n    client-id: c\n    quotas: {consumer_byte_rate: 2MiB}\n")
    code = ("import sys; from pathlib import Path; from kqplan.config.model import ProjectConfig; "
            "from kqplan.manifest.compile import load_desired; "
            f"d = load_desired([Path({str(tmp_path)!r})], ProjectConfig()); "
            "assert not d.diagnostics, d.diagnostics; assert len(d.quotas) == 2; "
            "assert 'pydantic' not in sys.modules, 'pydantic imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
