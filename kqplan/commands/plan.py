"""``kqplan plan``: diff the manifests against one describe of the cluster."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from kqplan.config.model import ClusterEntry, ProjectConfig
from kqplan.console import Streams
from kqplan.core.diagnostics import Diagnostic, render_text
from kqplan.core.errors import ExitCode, KqplanError
from kqplan.core.plan import Plan
from kqplan.core.state import QuotaState
from kqplan.files import check_writable, write_atomically
from kqplan.perf import keep
from kqplan.pipeline.guarded import (
    DEFAULT_GUARDRAILS,
    Guardrails,
    check_versions,
    compute_plan,
    describing_ahead,
    guardrail_problem,
    lint_warnings,
    load_checked,
    unmanaged_problem,
)
from kqplan.pipeline.inputs import declared_profile, manifest_paths, read_principals
from kqplan.pipeline.target import Target, open_cluster
from kqplan.planfile.codec import dumps_plan
from kqplan.render.escape import terminal
from kqplan.render.formats import Format
from kqplan.render.markdown import MAX_COMMENT_CHARS

if TYPE_CHECKING:
    from kqplan.commands.forecast import UsageOptions
    from kqplan.core.impact import Impact
    from kqplan.core.principals import Principal
    from kqplan.render.forecast import ForecastView


def _notes(plan: Plan, warnings: Sequence[Diagnostic]) -> tuple[str, ...]:
    from kqplan.core.impact import default_warnings

    lint = [render_text([d]).splitlines()[0] for d in warnings]
    return (*plan.notes, *(w.message for w in default_warnings(plan)), *lint)


def apply_hint(out: Path, target: Target, cluster: ClusterEntry | None, config_flag: Path | None) -> str:
    """A command that applies the saved plan, runnable as printed."""
    words = ["kqplan"]
    if config_flag is not None:
        words += ["--config", str(config_flag)]
    words += ["apply", "--plan", str(out)]
    if cluster is not None and not target.chosen() and target.command_config is None:
        words += ["--cluster", cluster.name]
    elif target.bootstrap:
        words += ["--bootstrap-server", target.bootstrap]
        if target.command_config is not None:
            words += ["--command-config", str(target.command_config)]
    elif target.sandbox:
        words += ["--sandbox"] + ([str(target.sandbox_seed)] if target.sandbox_seed else [])
    elif target.state is not None:
        return terminal(f"Saved the plan to {out}. It was made against a snapshot, which cannot be "
                        f"changed: apply it to the live cluster with `kqplan apply --plan "
                        f"{shlex.quote(str(out))} --bootstrap-server HOST:PORT` (it is refused if the "
                        "cluster differs).")
    else:  # from KQPLAN_BOOTSTRAP_SERVER / KQPLAN_COMMAND_CONFIG: the same environment applies it
        pass
    # runnable as printed (each word quoted for the shell), every character visible
    return terminal(f"Saved the plan to {out}. Apply exactly these changes with: "
                    f"{' '.join(map(shlex.quote, words))}")


def plan(paths: Sequence[Path], target: Target, config: ProjectConfig, *, fmt: Format,
         out: Path | None, detailed_exitcode: bool, streams: Streams,
         principals: Path | None = None, cluster: ClusterEntry | None = None,
         guardrails: Guardrails = DEFAULT_GUARDRAILS, color: bool = False,
         config_flag: Path | None = None, github: bool = False,
         markdown_limit: int = MAX_COMMENT_CHARS, usage: UsageOptions | None = None,
         fail_on_throttle: bool = False) -> int:
    """``fmt`` text | markdown | json; ``github`` (fmt ignored): workflow annotations. ``usage``: which
    buckets the plan would throttle, shown with it (``fail_on_throttle``: exit 1 if any newly)."""
    if out is not None:
        check_writable(out, "the plan file")
    text_like = fmt is Format.TEXT
    given = target
    target = target.within(config.max_input_bytes).or_cluster(cluster)
    with ExitStack() as stack:
        ahead = describing_ahead(target, stack)
        desired = load_checked(manifest_paths(paths, cluster), config, streams, quiet=not text_like)
        check_versions(desired, declared_profile(cluster))  # offline: before anything is judged online
        who = read_principals(principals, limit=config.max_input_bytes) if principals is not None else None
        live = ahead if ahead is not None else stack.enter_context(open_cluster(target))
        forecasting = usage is not None and usage.given
        with streams.progress() as progress:
            progress("Describing the cluster")
            actual = live.describe() if who is not None or forecasting else None
            result = compute_plan(desired, live, config, entry=cluster,
                                  record_state=out is not None or fmt is Format.JSON, actual=actual)
    view = _forecast(usage, actual, result, cluster, streams, config=config) if forecasting else None
    refused = guardrail_problem(result, desired, config, guardrails)
    warnings = lint_warnings(desired, result)
    if text_like and warnings:
        streams.warn(render_text(warnings))
    saved = replace(result, notes=_notes(result, warnings))
    # Nothing below reads the manifests: their text and compiled state (~100 MiB at 100k
    # entities) are let go before the plan's JSON is built in the memory they free.
    del desired
    encoded: str | None = None
    if out is not None and refused is None:  # a plan apply would refuse is not saved
        encoded = dumps_plan(saved)
        write_atomically(out, encoded)
    if fmt is Format.TEXT:
        from kqplan.render.text import render_text as render_plan_text

        streams.print(render_plan_text(result, color=color), end="")
    elif github:
        from kqplan.render.github import render_plan_github

        # lint warnings become annotations of their own, not notes as well
        streams.print(render_plan_github(replace(result, notes=_notes(result, ())), warnings), end="")
    elif fmt is Format.MARKDOWN:
        from kqplan.render.markdown import render_markdown

        forecast_md = _forecast_markdown(view)
        streams.print(render_markdown(saved, max_chars=markdown_limit - len(forecast_md),
                                      impact=_impact(result, actual, who),
                                      artifact=str(out) if out is not None else None) + forecast_md, end="")
    else:
        streams.print(_json_shown(encoded or dumps_plan(saved), view, _impact(result, actual, who)), end="")
    if view is not None and (text_like or github):
        from kqplan.render.forecast import render_github
        from kqplan.render.forecast import render_text as render_forecast

        streams.print(render_github(view) if github else "\n" + render_forecast(view), end="")
    if text_like:
        _blast_radius(result, actual, who, streams)
    if refused is not None:
        raise refused
    if out is not None and text_like:
        streams.print("\n" + apply_hint(out, given, cluster, config_flag))
    problem = unmanaged_problem(result, config, guardrails)
    if problem is not None:
        raise problem
    keep(result, saved)  # the state: compute_plan keeps it
    if fail_on_throttle and view is not None and view.newly:
        raise _throttles(view.newly)
    return ExitCode.CHANGES if detailed_exitcode and result.has_changes else ExitCode.OK


def _forecast(usage: UsageOptions | None, actual: QuotaState | None, result: Plan,
              cluster: ClusterEntry | None, streams: Streams, *,
              config: ProjectConfig) -> ForecastView | None:
    """Which buckets the plan would throttle (``--usage``, ``--usage-from-metrics``)."""
    from kqplan.commands.forecast import forecast
    from kqplan.core.plan import apply_ops

    if actual is None or usage is None:
        return None
    with streams.progress() as progress:
        return forecast(usage, actual, apply_ops(actual, result.changes), cluster=cluster, progress=progress,
                        config=config)


def _json_shown(plan_json: str, view: ForecastView | None, radius: Impact | None) -> str:
    """The plan's JSON as printed: the file's bytes (encoded once), with the forecast and the
    blast radius when there are ones (their modules imported only then: ~13 ms of a plan's start)."""
    if view is not None:
        from kqplan.render.forecast import with_forecast

        plan_json = with_forecast(plan_json, view)
    if radius is not None:
        from kqplan.render.impact import with_impact

        plan_json = with_impact(plan_json, radius)
    return plan_json


def _forecast_markdown(view: ForecastView | None) -> str:
    from kqplan.render.forecast import render_markdown

    return render_markdown(view) if view is not None else ""


def _throttles(newly: int) -> KqplanError:
    return KqplanError(f"the plan would newly throttle {newly} bucket{'s' if newly > 1 else ''} "
                       "(--fail-on-throttle)",
                       hint="raise those quotas in the manifests, or merge knowingly without "
                            "--fail-on-throttle (the buckets are listed above)")


def _impact(plan: Plan, actual: QuotaState | None, principals: Sequence[Principal] | None) -> Impact | None:
    if principals is None or actual is None:
        return None
    from kqplan.core.impact import blast_radius
    from kqplan.core.plan import apply_ops

    return blast_radius(actual, apply_ops(actual, plan.changes), principals)


def _blast_radius(plan: Plan, actual: QuotaState | None, principals: Sequence[Principal] | None,
                  streams: Streams) -> None:
    """Who the plan affects: per principal with a principals file, else a warning per default."""
    if not plan.has_changes:
        return
    if principals is None or actual is None:
        from kqplan.core.impact import default_warnings

        for warning in default_warnings(plan):
            streams.warn(warning.message)
        return
    from kqplan.core.impact import blast_radius
    from kqplan.core.plan import apply_ops
    from kqplan.render.impact import render_impact_text

    after = apply_ops(actual, plan.changes)
    streams.print("\n" + render_impact_text(blast_radius(actual, after, principals)), end="")
