"""Big files are located by scanning lines, not by composing them: same answer, a fraction of
the time and memory (benchmarks/manifest_memory.py measures both)."""

from __future__ import annotations

import pytest

from benchmarks.generate import manifest_text
from kqplan.manifest.positions import Locator, fast_span

TEXT = manifest_text(300)


@pytest.mark.parametrize("loc", [
    ("entities", 0), ("entities", 2, "quotas"), ("entities", 2, "quotas", "request_percentage"),
    ("entities", 299, "quotas", "consumer_byte_rate"), ("entities", 151, "user"),
    ("entities", 150, "client-id")])
@pytest.mark.parametrize("at_key", [False, True])
def test_the_line_scan_agrees_with_the_composer(loc, at_key):
    fast = fast_span("m.yaml", TEXT, loc, at_key=at_key)
    # None: the entry lacks that key, and the caller composes the file (as before)
    assert fast is None or fast == Locator("m.yaml", TEXT).span(loc, at_key=at_key)
    if loc[-1] != "client-id":
        assert fast is not None


def test_other_layouts_fall_back_to_the_composer():
    flow = ("apiVersion: kqplan/v1\nkind: ClientQuotas\n"
            "entities: [{user: a, quotas: {producer_byte_rate: 0}}]\n")
    assert fast_span("m.yaml", flow, ("entities", 0, "quotas")) is None
    assert fast_span("m.yaml", TEXT, ("entities", 5000)) is None
    assert fast_span("m.yaml", TEXT, ("profiles", "gold")) is None
