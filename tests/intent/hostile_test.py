"""Hostile test documents: whatever a ``kind: QuotaTests`` file holds, reading it ends in tests or in
located errors, never an exception; and what it reads back is what it says."""

from __future__ import annotations

import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from kqplan.core.diagnostics import Diagnostic
from kqplan.manifest.intent import read_tests
from kqplan.manifest.source import SourceFile

KEYS = ["name", "principal", "expect", "from", "user", "client-id", "ip", "at-most", "at-least",
        "producer_byte_rate", "consumer_byte_rate", "request_percentage", "connection_creation_rate",
        "controller_mutation_rate", "unlimited"]
scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(
                        ["<default>", "\\<default>", "", "10MiB", "1.5KiB", "unlimited", "alice", "10.0.0.1",
                         "::1", "x\u202ey", "a\x00b"]), st.text(max_size=8))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=5)), inner, max_size=4)), max_leaves=12)
entries = st.fixed_dictionaries({}, optional={
    "name": st.one_of(st.text(max_size=6), values),
    "principal": st.one_of(st.fixed_dictionaries({}, optional={k: st.one_of(scalars, values) for k in
                                                            ("user", "client-id", "ip")}), values),
    "expect": st.one_of(st.dictionaries(st.sampled_from(KEYS), values, max_size=3), values),
    "from": st.one_of(st.dictionaries(st.sampled_from(KEYS), scalars, max_size=3), values),
})

near_valid = st.fixed_dictionaries({
    "name": st.text(min_size=1, max_size=6),
    "principal": st.one_of(
        st.fixed_dictionaries({"user": st.sampled_from(["alice", "b", "<default>", "\\<default>", ""])},
                              optional={"client-id": st.sampled_from(["", "app", "<default>"])}),
        st.fixed_dictionaries({"ip": st.sampled_from(["10.0.0.1", "::1", "999.1.1.1", "<default>"])})),
    "expect": st.dictionaries(st.sampled_from([*KEYS[9:14], "producer_rate"]), st.one_of(
        st.sampled_from([1, 0, -1, 1.5, 2**63, "10MiB", "1.5B", "unlimited", "x", math.nan, math.inf]),
        st.fixed_dictionaries({}, optional={"at-most": scalars, "at-least": scalars, "at-mst": scalars})),
        min_size=1, max_size=3),
}, optional={"from": st.dictionaries(st.sampled_from(["user", "client-id", "ip", "usr"]),
                                     st.sampled_from(["alice", "<default>", "app", "10.0.0.1"]), max_size=2)})


def _json(value: object) -> str:
    """JSON is YAML: the text the parsed document came from (NaN and infinity as YAML's)."""
    return json.dumps(value).replace("NaN", ".nan").replace("-Infinity", "-.inf").replace("Infinity", ".inf")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(near_valid, near_valid, entries, values), max_size=4),
       st.one_of(st.just("QuotaTests"), st.just("QuotaTests"), values))
def test_any_document_reads_as_tests_or_located_errors(tests, kind):
    raw = {"apiVersion": "kqplan/v1", "kind": kind, "tests": tests}
    read, problems = read_tests(SourceFile.of("t.yaml", _json(raw)), raw)
    assert all(isinstance(p, Diagnostic) and p.span.path == "t.yaml" for p in problems)
    assert read or problems  # nothing is dropped silently (an empty list of tests is an error too)
    for test in read:
        entry = tests[test.loc[1]]
        assert test.name == entry["name"]
        for expectation in test.expect:
            assert expectation.value is None or math.isfinite(expectation.value)
