"""kqplan.toml's plain check (no pydantic) against the pydantic schema: whatever the plain check
accepts, the schema accepts with the same result; ordinary files take the plain path; the
example projects are read without importing pydantic."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kqplan.config.reader import CLUSTER_FIELDS, POLICY_FIELDS, plain_document
from kqplan.config.schema import validate_document
from kqplan.core.diagnostics import DiagnosticsError
from tests.helpers import REPO

# values of every TOML type, including the ones the schema refuses or converts
scalars = st.one_of(st.integers(-5, 300), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
                    st.text(max_size=6), st.just("1KiB"), st.just("25"))
values = st.one_of(scalars, st.lists(scalars, max_size=3), st.lists(st.text(max_size=5), max_size=3))
names = st.sampled_from(["a", "prod", "x y", "é"])
any_names = st.one_of(names, st.sampled_from(["../evil", "/abs", "..", "a\x00b", "a\nb", "-x", "",
                                              "x" * 201]))
"""Names of every kind: plain ones and ones the schema refuses (not one file name)."""


def table(fields: tuple[str, ...], value: st.SearchStrategy[object]) -> st.SearchStrategy[dict[str, object]]:
    """Mostly known fields, sometimes a misspelt or python-style one."""
    keys = st.sampled_from([*fields, *(f.replace("-", "_") for f in fields if "-" in f), "typo"])
    return st.dictionaries(keys, value, max_size=4)


valid_cluster = st.one_of(
    st.text(min_size=1, max_size=8),
    st.fixed_dictionaries({}, optional={
        "id": st.text(max_size=5), "bootstrap-server": st.just("k:9092"), "snapshot": st.just("s.json"),
        "command-config": st.just("c.properties"), "manifests": st.lists(st.text(max_size=4), max_size=2),
        "mode": st.sampled_from(["kraft", "zookeeper", "other"]), "version": st.just("3.9")}))
valid_policy = st.fixed_dictionaries({}, optional={
    "max-delete": st.integers(0, 50), "max-delete-percent": st.one_of(st.integers(0, 100), st.floats(0, 100)),
    "required-keys": st.lists(st.sampled_from(["producer_byte_rate", "nope"]), max_size=2),
    "required-defaults": st.lists(st.sampled_from(["user", "user,client-id", "ip"]), max_size=2),
    "required-labels": st.lists(st.text(max_size=4), max_size=2), "allow-unmanaged": st.booleans(),
    "keys": st.dictionaries(st.sampled_from(["producer_byte_rate", "request_percentage"]),
                            st.fixed_dictionaries({}, optional={
                                "min": st.one_of(st.integers(1, 9), st.just("1KiB")),
                                "max": st.floats(10, 1e9)}), max_size=2)})
valid_documents = st.fixed_dictionaries({}, optional={
    "clusters": st.dictionaries(names, valid_cluster, max_size=3),
    "policy": valid_policy,
    "custom": st.fixed_dictionaries({}, optional={"entity-types": st.lists(st.text(max_size=4), max_size=2),
                                                  "keys": st.lists(st.text(max_size=4), max_size=2)}),
    "limits": st.fixed_dictionaries({}, optional={"max-file-mib": st.integers(1, 512),
                                                  "max-input-mib": st.integers(1, 4096)}),
    "rollout": st.fixed_dictionaries({}, optional={"waves": st.lists(st.lists(names, max_size=2),
                                                                     max_size=2)})})
any_documents = st.one_of(valid_documents, st.fixed_dictionaries({}, optional={
    "clusters": st.one_of(values, st.dictionaries(any_names, st.one_of(values,
                                                                       table(CLUSTER_FIELDS, values)))),
    "policy": st.one_of(values, table(POLICY_FIELDS, st.one_of(values, st.dictionaries(
        st.text(max_size=5), table(("min", "max"), scalars), max_size=2)))),
    "custom": st.one_of(values, table(("entity-types", "keys"), values)),
    "limits": st.one_of(values, table(("max-file-mib", "max-input-mib"), scalars)),
    "rollout": st.one_of(values, table(("waves",), values)),
    "typo": values}))


near_misses = st.sampled_from([True, False, 0, -1, 101, 1.5, -0.5, 100.5, math.nan, math.inf, "x", "25", "",
                               [1], ["a", 1], [True], {}, {"a": 1}, {"min": True}, ["a"]])
"""Values one step from valid: the wrong type, sign or range a hand check can miss."""


def _spots(doc: object, at: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every key path inside ``doc``'s tables."""
    if not isinstance(doc, dict):
        return []
    return [p for k, v in doc.items() for p in ((*at, k), *_spots(v, (*at, k)))]


@st.composite
def corrupted_documents(draw: st.DrawFn) -> dict[str, object]:
    """A valid document with one value replaced, or one key added or misspelt."""
    doc = draw(valid_documents)
    spots = _spots(doc)
    if not spots:
        return {draw(st.sampled_from(["clusters", "policy", "custom", "limits", "typo"])): draw(values)}
    spot = draw(st.sampled_from(spots))
    parent = doc
    for key in spot[:-1]:
        parent = parent[key]
    if draw(st.booleans()):
        parent[spot[-1]] = draw(st.one_of(near_misses, values))
    else:
        misspelt = draw(st.sampled_from(["typo", spot[-1].replace("-", "_"), spot[-1].upper()]))
        parent[misspelt] = parent[spot[-1]]
    return doc


@settings(max_examples=500, deadline=None)
@given(st.one_of(corrupted_documents(), any_documents))
def test_what_the_plain_check_accepts_the_schema_accepts_alike(raw):
    plain = plain_document(raw)
    try:
        schema = validate_document(Path("kqplan.toml"), "", raw)
    except DiagnosticsError:
        assert plain is None, raw
        return
    assert plain is None or plain == schema, raw


FULL = {
    "clusters": {"legacy": "ID",
                 "prod": {"id": "p", "bootstrap-server": "k:9092", "command-config": "c.properties",
                          "manifests": ["base", "prod"], "mode": "kraft", "version": "3.9"},
                 "offline": {"snapshot": "s.json", "manifests": []}},
    "policy": {"max-delete": 10, "max-delete-percent": 25.5, "required-keys": ["producer_byte_rate"],
               "required-defaults": ["user"], "required-labels": ["team"], "allow-unmanaged": False,
               "keys": {"producer_byte_rate": {"min": "1KiB", "max": 1e9}, "request_percentage": {"min": 1}}},
    "custom": {"entity-types": ["group"], "keys": ["x_rate"]},
    "limits": {"max-file-mib": 64, "max-input-mib": 256},
    "rollout": {"waves": [["prod"], ["legacy", "offline"]]},
}
"""Every field of kqplan.toml set, validly: the base of the exhaustive near-miss test."""


def test_every_near_miss_at_every_spot():
    """Deterministic: each value one step from valid, at each key path of a complete file, and
    each key misspelt; the plain check may only pass what the schema passes, unchanged."""
    import copy

    assert plain_document(FULL) == validate_document(Path("kqplan.toml"), "", FULL)
    for spot in _spots(FULL):
        for miss in [*near_misses.elements, "typo", spot[-1].replace("-", "_"), spot[-1].upper()]:
            doc = copy.deepcopy(FULL)
            parent = doc
            for key in spot[:-1]:
                parent = parent[key]
            if isinstance(miss, str) and miss in ("typo", spot[-1].replace("-", "_"), spot[-1].upper()):
                parent[miss] = parent.pop(spot[-1])
            else:
                parent[spot[-1]] = copy.deepcopy(miss)
            plain = plain_document(doc)
            try:
                schema = validate_document(Path("kqplan.toml"), "", doc)
            except DiagnosticsError:
                assert plain is None, (spot, miss)
                continue
            assert plain is None or plain == schema, (spot, miss)


@settings(max_examples=200, deadline=None)
@given(valid_documents)
def test_ordinary_files_take_the_plain_path(raw):
    assert plain_document(raw) == validate_document(Path("kqplan.toml"), "", raw)


@pytest.mark.parametrize("project", ["payments", "fleet"])
def test_the_examples_are_read_without_pydantic(project):
    code = ("import sys; from kqplan.config.find import load_config; "
            f"load_config(__import__('pathlib').Path({str(REPO / 'examples' / project / 'kqplan.toml')!r})); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pydantic'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "[]\n"
