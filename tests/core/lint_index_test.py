"""Lint indexes the entities the compiler saw with a ``<default>`` part (DesiredState.with_default)
instead of asking every entity: the same shadowing found as by the full scan, on generated
layered manifests (overrides that remove a default entity included)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kqplan.config.model import ProjectConfig
from kqplan.core.lint import shadowed_keys
from kqplan.manifest.compile import load_desired
from tests.helpers import write_manifest

USERS = ["a", "<default>", None]
CLIENTS = ["c", "<default>", "''", None]
KEYS = ["producer_byte_rate", "consumer_byte_rate"]


@st.composite
def entries(draw: st.DrawFn, *, override: bool) -> str:
    text = ""
    for _ in range(draw(st.integers(0, 6))):
        user, client = draw(st.sampled_from(USERS)), draw(st.sampled_from(CLIENTS))
        if user is None and client is None:
            user = "a"
        text += "  - " + "\n    ".join(
            [f"user: '{user}'"] * (user is not None) + [f"client-id: {client}"] * (client is not None))
        if override and draw(st.booleans()):
            text += "\n    override: true"
        keys = draw(st.sets(st.sampled_from(KEYS), min_size=1))
        values = {k: draw(st.sampled_from(["1MiB", "2MiB", "null"])) for k in sorted(keys)}
        text += "\n    quotas: {" + ", ".join(f"{k}: {v}" for k, v in values.items()) + "}\n"
    return "entities:\n" + text if text else "entities: []\n"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(base=entries(override=False), over=entries(override=True), only_some=st.booleans())
def test_indexing_defaults_finds_what_the_full_scan_finds(base: str, over: str, only_some: bool,
                                                           tmp_path_factory: pytest.TempPathFactory) -> None:
    work = tmp_path_factory.mktemp("lint")
    write_manifest(work / "base" / "q.yaml", base)
    write_manifest(work / "over" / "q.yaml", over)
    desired = load_desired([work / "base", work / "over"], ProjectConfig())
    only = list(desired.quotas)[::2] if only_some else None
    assert {e for e in desired.quotas if e.has_default} <= desired.with_default
    assert shadowed_keys(desired.quotas, only, with_default=desired.with_default) == \
        shadowed_keys(desired.quotas, only)


def test_the_index_is_what_finds_a_shadowed_key(tmp_path: Path) -> None:
    write_manifest(tmp_path / "q.yaml", "entities:\n"
                   "  - {user: a, client-id: <default>, quotas: {producer_byte_rate: 1MiB}}\n"
                   "  - {user: a, client-id: c, quotas: {consumer_byte_rate: 1MiB}}\n"
                   "  - {user: a, quotas: {producer_byte_rate: 2MiB}}\n")
    desired = load_desired([tmp_path], ProjectConfig())
    assert len(shadowed_keys(desired.quotas, with_default=desired.with_default)) == 1
    assert shadowed_keys(desired.quotas, with_default=()) == []  # nothing indexed: nothing found
