"""Diagnostics as JSON (``--format json``) and as GitHub workflow annotations (the concise text form
is :func:`kqplan.core.diagnostics.render_text`); both carry the code's page (:func:`doc_url`)."""

from __future__ import annotations

import json
from collections.abc import Iterable

from kqplan.core.diagnostics import Diagnostic, doc_url
from kqplan.render.escape import github_data, github_property


def render_json(diagnostics: Iterable[Diagnostic]) -> str:
    return json.dumps(
        [
            {
                "code": d.code,
                "url": doc_url(d.code),
                "severity": d.severity.value,
                "message": d.message,
                "filename": d.span.path,
                "location": {"row": d.span.line, "column": d.span.column},
                "hint": d.hint,
                "related": [
                    {"message": r.message, "filename": r.span.path,
                     "location": {"row": r.span.line, "column": r.span.column}}
                    for r in d.related
                ],
            }
            for d in diagnostics
        ],
        indent=2,
        ensure_ascii=False,
    )


def render_github(diagnostics: Iterable[Diagnostic]) -> str:
    """GitHub Actions workflow commands: each becomes an annotation on the PR, one line each (the file
    name is a property, the message the command's data, each escaped for where it lands), ending
    with the code's page."""
    out = []
    for d in diagnostics:
        level = "error" if d.is_error else "warning"
        text = d.message + (f" (help: {d.hint})" if d.hint else "") + f" (see {doc_url(d.code)})"
        where = f"file={github_property(d.span.path)},line={max(d.span.line, 1)},col={max(d.span.column, 1)}"
        out.append(f"::{level} title={github_property('kqplan ' + d.code)},{where}::{github_data(text)}")
    return "\n".join(out)
