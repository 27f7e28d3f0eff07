"""Diagnostics as data and as GitHub annotations link each code to its page on the site."""

from __future__ import annotations

import json

from kqplan.core.diagnostics import Diagnostic, Severity, Span
from kqplan.render.diagnostics import render_github, render_json

TYPO = Diagnostic("KQP110", "unknown quota key 'producer_rate'", Span("q.yaml", 6, 7),
                  hint="did you mean 'producer_byte_rate'?")
NAME = Diagnostic("KQP172", "user 'User:a' will never match", Span("q.yaml", 4, 11), Severity.WARNING)


def test_json_diagnostics_carry_the_page_of_their_code():
    doc = json.loads(render_json([TYPO, NAME]))
    assert [d["url"] for d in doc] == ["https://kqplan.dev/diagnostics/KQP110/",
                                       "https://kqplan.dev/diagnostics/KQP172/"]


def test_github_annotations_end_with_the_page_of_their_code():
    assert render_github([TYPO, NAME]).splitlines() == [
        "::error title=kqplan KQP110,file=q.yaml,line=6,col=7::unknown quota key 'producer_rate' "
        "(help: did you mean 'producer_byte_rate'?) (see https://kqplan.dev/diagnostics/KQP110/)",
        "::warning title=kqplan KQP172,file=q.yaml,line=4,col=11::user 'User:a' will never match "
        "(see https://kqplan.dev/diagnostics/KQP172/)",
    ]

