"""``kqplan test``: judge the ``kind: QuotaTests`` documents beside the manifests.

Offline (no target) the tests judge the manifests' desired state: layers, overrides, expiry, and
budgets (a key that is a per-cluster budget's share cannot be judged without a broker count: such
a test fails as unknown, KQP202). With a target (``--cluster``, ``--bootstrap-server``,
``--state``, ``--sandbox``) they judge the cluster as it is, one describe. Exit 0 when every test
holds, 1 otherwise; the manifests must be valid either way (their errors are reported instead).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from kqplan.config.model import ClusterEntry, ProjectConfig
from kqplan.console import Streams
from kqplan.core.diagnostics import Diagnostic, Loc
from kqplan.core.errors import ExitCode, KqplanError
from kqplan.core.intent import Verdict, diagnostics, judge
from kqplan.core.state import QuotaState
from kqplan.pipeline.target import Target, open_cluster


class TestFormat(StrEnum):
    TEXT = "text"
    JSON = "json"
    GITHUB = "github"


@dataclass(frozen=True, slots=True)
class TestRun:
    """What ``kqplan test`` found: every verdict, the failures as located errors, and what was judged."""

    verdicts: list[Verdict]
    failures: list[Diagnostic]
    judged: str
    """``the manifests' desired state`` or ``cluster ID``."""


def run_tests(paths: Sequence[Path], target: Target, config: ProjectConfig, streams: Streams, *,
              related: bool = False, entry: ClusterEntry | None = None) -> TestRun | None:
    """Load manifests and tests (errors raise, as validate reports them), then judge. ``related``
    (pre-commit): each path is a changed file, judged with the manifest set it belongs to (its
    inventory layers, else its directory); None when no set holds a test. A target is checked to
    be the cluster the manifests are guarded to (and ``entry``'s id), as a plan checks it."""
    from kqplan.pipeline.guarded import check_guard, check_inventory_id, load_checked

    if related:
        from kqplan.commands.validate import maybe_manifest
        from kqplan.manifest.related import manifest_sets

        sets = manifest_sets([p for p in paths if p.is_file() and maybe_manifest(p, config.max_file_bytes)],
                             config)
    else:
        sets = [tuple(paths)]
    found = [(desired, desired.tests) for desired in (load_checked(s, config, streams) for s in sets)]
    if not any(tests for _, tests in found):
        if related:
            return None
        raise KqplanError("no quota tests in the manifests given",
                          hint="add a file with `apiVersion: kqplan/v1` and `kind: QuotaTests` beside the "
                          "manifests (docs/testing.md)")
    cluster_state: QuotaState | None = None
    judged = "the manifests' desired state"
    if target.chosen():
        with open_cluster(target.within(config.max_input_bytes)) as cluster:
            identity = cluster.identity()
            check_inventory_id(entry, identity.cluster_id, identity.address)
            for desired, _ in found:
                check_guard(desired, identity.cluster_id, identity.address, config, entry)
            cluster_state = cluster.describe()
        shown = identity.cluster_id or identity.address
        judged = f"cluster {entry.name} ({shown})" if entry is not None else f"cluster {shown}"
    verdicts: list[Verdict] = []
    failures: list[Diagnostic] = []
    seen: set[tuple[str, Loc]] = set()
    for desired, tests in found:
        fresh = [t for t in tests if (t.source.path, t.loc) not in seen]  # a file in two sets: once
        seen.update((t.source.path, t.loc) for t in fresh)
        judged_here = judge(fresh, cluster_state) if cluster_state is not None else \
            judge(fresh, desired.quotas, desired.budgets)
        verdicts += judged_here
        failures += diagnostics(judged_here, desired.origins)
    return TestRun(verdicts, failures, judged)


def quota_tests_command(paths: Sequence[Path], target: Target, config: ProjectConfig, *, fmt: TestFormat,
                        streams: Streams, related: bool = False, entry: ClusterEntry | None = None) -> int:
    """``kqplan test``: print every test's verdict; exit 1 if any does not hold."""
    from kqplan.render import intent

    run = run_tests(paths, target, config, streams, related=related, entry=entry)
    if run is None:
        streams.warn("No quota tests beside the changed files.")
        return ExitCode.OK
    render = {TestFormat.TEXT: intent.render_tests_text, TestFormat.JSON: intent.render_json,
              TestFormat.GITHUB: intent.render_github}[fmt]
    streams.print(render(run.verdicts, run.failures, run.judged), end="")
    return ExitCode.OK if not run.failures else ExitCode.ERROR
