"""The ``kqplan`` command line: parse options into typed values, call a command, map errors.

Thin by design: each command lives in ``kqplan/commands/`` as a function returning an exit
code. This module owns the one error boundary: a :class:`KqplanError` prints its message and
exits 1, Ctrl-C exits 130, and a traceback appears only with ``--debug``.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kqplan.console import Streams
from kqplan.core.errors import ExitCode, KqplanError

if TYPE_CHECKING:
    from kqplan.config.model import ClusterEntry, ProjectConfig
    from kqplan.pipeline.target import Target

# typer vendors click privately (typer._click); reach its exception types through public names.
_UsageError: type[Exception] = next(
    c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")

app = typer.Typer(
    name="kqplan",
    help="Kafka client quotas as code: validate, plan, apply, resolve.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

_state: dict[str, Any] = {"debug": False, "config": None, "no_color": False, "no_input": False}


def _streams() -> Streams:
    interactive = (sys.stdin.isatty() and sys.stdout.isatty() and not os.environ.get("CI")
                   and not _state["no_input"])
    return Streams(sys.stdout, sys.stderr, interactive)


def _color() -> bool:
    """Colour on a terminal, unless NO_COLOR (https://no-color.org) or --no-color says no."""
    return (sys.stdout.isatty() and not _state["no_color"] and not os.environ.get("NO_COLOR")
            and os.environ.get("TERM") != "dumb")


def _config(paths: Sequence[Path] = ()) -> ProjectConfig:
    from kqplan.config.reader import find_config, load_config  # pydantic: only when a command runs

    explicit: Path | None = _state["config"]
    if explicit is not None:
        return load_config(explicit)
    start = paths[0] if paths else Path.cwd()
    return find_config(start if start.is_dir() else start.parent)


def _use_config(config: Path | None) -> None:
    """A command's own ``--config`` (same as the global one, given after the command name)."""
    if config is not None:
        _state["config"] = config


def _cluster(name: str | None, config: ProjectConfig) -> ClusterEntry | None:
    return config.cluster(name) if name is not None else None


def _version(value: bool) -> None:
    if value:
        from kqplan import __version__

        sys.stdout.write(f"kqplan {__version__}\n")
        raise typer.Exit(0)


def run(body: Callable[[], int], *, json_errors: bool = False) -> int:
    """The error boundary every command goes through (``json_errors``: errors as JSON on stderr,
    for ``--format json``)."""
    from kqplan.perf import paused_gc

    try:
        # A command is a short batch run that builds many acyclic objects: see paused_gc.
        with paused_gc():
            return int(body())
    except KqplanError as exc:
        from kqplan.core.diagnostics import DiagnosticsError

        if json_errors:
            sys.stderr.write(_error_json(exc) + "\n")
        elif isinstance(exc, DiagnosticsError):
            sys.stderr.write(str(exc) + "\n")
        else:
            sys.stderr.write(f"Error: {exc}\n")
        if _state["debug"]:
            traceback.print_exc()
        return ExitCode.ERROR
    except KeyboardInterrupt:
        sys.stderr.write("Interrupted.\n")
        return ExitCode.INTERRUPTED
    except Exception as exc:  # a bug: say so, without a traceback unless asked
        if _state["debug"]:
            traceback.print_exc()
        else:
            sys.stderr.write(f"kqplan: internal error: {type(exc).__name__}: {exc}\n"
                             "  = help: run again with --debug for the traceback, and please "
                             "report it\n")
        return ExitCode.ERROR


def _error_json(exc: KqplanError) -> str:
    """``{"error": {"message", "hint", "diagnostics"}}``: the same facts as the text form."""
    import json

    from kqplan.core.diagnostics import DiagnosticsError
    from kqplan.render.diagnostics import render_json

    diagnostics = json.loads(render_json(exc.diagnostics)) if isinstance(exc, DiagnosticsError) else []
    message = (f"{sum(d.is_error for d in exc.diagnostics)} error(s) in the input"
               if isinstance(exc, DiagnosticsError) else exc.message)
    return json.dumps({"error": {"message": message, "hint": exc.hint, "diagnostics": diagnostics}},
                      ensure_ascii=False)


@app.callback()
def _global(
    config: Annotated[Path | None, typer.Option(
        "--config", help="Project config file (default: the nearest kqplan.toml).",
        dir_okay=False, metavar="FILE")] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks on errors.")] = False,
    no_color: Annotated[bool, typer.Option(
        "--no-color", help="No colour, even on a terminal (also: NO_COLOR=1).")] = False,
    no_input: Annotated[bool, typer.Option(
        "--no-input", help="Never prompt: fail with the flag to add instead.")] = False,
    version: Annotated[bool, typer.Option(
        "--version", "-V", help="Print the version and exit.", is_eager=True,
        callback=_version)] = False,
) -> None:
    _state["config"] = config
    _state["debug"] = debug
    _state["no_color"] = no_color
    _state["no_input"] = no_input


PathsArg = Annotated[list[Path], typer.Argument(help="Manifest files or directories.",
                                                show_default=False, metavar="PATH...")]
OptionalPathsArg = Annotated[list[Path] | None, typer.Argument(
    help="Manifest files or directories (default: the --cluster's manifests).", show_default=False,
    metavar="[PATH...]")]
ClusterOpt = Annotated[str | None, typer.Option(
    "--cluster", metavar="NAME",
    help="A cluster of the kqplan.toml inventory: its manifests and target (explicit flags win).")]
ConfigOpt = Annotated[Path | None, typer.Option(
    "--config", dir_okay=False, metavar="FILE",
    help="Project config file (default: the nearest kqplan.toml).")]
StateOpt = Annotated[Path | None, typer.Option(
    "--state", help="Plan against a snapshot file instead of a live cluster.", dir_okay=False,
    metavar="SNAPSHOT.json")]
# The KQPLAN_* variables are read when the target opens (kqplan.pipeline.target), not by typer: an
# explicit --state or --sandbox must win over a bootstrap address exported in the shell.
BootstrapOpt = Annotated[str | None, typer.Option(
    "--bootstrap-server", help="Kafka bootstrap HOST:PORT [env: KQPLAN_BOOTSTRAP_SERVER].",
    metavar="HOST:PORT")]
CommandConfigOpt = Annotated[Path | None, typer.Option(
    "--command-config", dir_okay=False, metavar="FILE",
    help="Client properties (as for kafka-configs.sh): security.protocol, sasl.*, ssl.* "
         "[env: KQPLAN_COMMAND_CONFIG].")]
SandboxOpt = Annotated[str | None, typer.Option(
    "--sandbox", metavar="[SEED.json]",
    help="Run against an in-process sandbox broker, optionally seeded from a snapshot.")]


def _target(state: Path | None, bootstrap: str | None, command_config: Path | None,
            sandbox: str | None) -> Target:
    from kqplan.pipeline.target import Target

    return Target(state=state, bootstrap=bootstrap, command_config=command_config,
                  sandbox=sandbox is not None, sandbox_seed=Path(sandbox) if sandbox else None)


@app.command()
def validate(
    paths: OptionalPathsArg = None,
    cluster: ClusterOpt = None,
    fmt: Annotated[str, typer.Option("--format", help="text | json | github", metavar="FORMAT")] = "text",
    strict: Annotated[bool, typer.Option("--strict", help="Warnings fail too.")] = False,
    related: Annotated[bool, typer.Option(
        "--related", help="Each PATH is a changed file (pre-commit): validate it with its manifest set "
        "(its inventory layers, else its directory); skip YAML that is no manifest.")] = False,
    config: ConfigOpt = None,
) -> int:
    """Check manifests offline; report every problem with file:line:column."""
    from kqplan.commands.validate import DiagnosticFormat
    from kqplan.commands.validate import validate as command
    from kqplan.pipeline.inputs import declared_profile, manifest_paths

    _use_config(config)

    def body() -> int:
        given = paths or []
        project = _config(given)
        entry = _cluster(cluster, project)
        return command(manifest_paths(given, entry), project,
                       fmt=_choice(DiagnosticFormat, fmt, "--format"), strict=strict, streams=_streams(),
                       related=related, profile=declared_profile(entry))

    return run(body, json_errors=fmt == "json")


@app.command()
def plan(
    paths: OptionalPathsArg = None,
    cluster: ClusterOpt = None,
    state: StateOpt = None,
    bootstrap_server: BootstrapOpt = None,
    command_config: CommandConfigOpt = None,
    sandbox: SandboxOpt = None,
    fmt: Annotated[str, typer.Option(
        "--format", help="text | markdown | json | github", metavar="FORMAT")] = "text",
    out: Annotated[Path | None, typer.Option(
        "--out", help="Save the plan (JSON) for `kqplan apply --plan`.", dir_okay=False,
        metavar="PLAN.json")] = None,
    detailed_exitcode: Annotated[bool, typer.Option(
        "--detailed-exitcode", help="Exit 2 when there are changes (0: none, 1: error).")] = False,
    principals: Annotated[Path | None, typer.Option(
        "--principals", dir_okay=False, metavar="FILE",
        help="CSV or JSON lines of user,client-id pairs: show whose effective quota changes.")] = None,
    allow_mass_delete: Annotated[bool, typer.Option(
        "--allow-mass-delete", help="Allow more deletions than [policy] max-delete(-percent).")] = False,
    fail_on_unmanaged: Annotated[bool, typer.Option(
        "--fail-on-unmanaged",
        help="Exit 1 when cluster entities are outside every manifest and ownership scope.")] = False,
    markdown_limit: Annotated[int, typer.Option(
        "--markdown-limit", metavar="CHARS", min=2000,
        help="--format markdown stays under this size (GitHub refuses comments over 65536).")] = 60_000,
    config: ConfigOpt = None,
) -> int:
    """Show what apply would change: manifests against one describe of the cluster."""
    from kqplan.commands.plan import plan as command
    from kqplan.pipeline.guarded import Guardrails
    from kqplan.render.formats import Format

    _use_config(config)
    github = fmt == "github"

    def body() -> int:
        given = paths or []
        project = _config(given)
        return command(
            given, _target(state, bootstrap_server, command_config, sandbox), project,
            fmt=Format.MARKDOWN if github else _choice(Format, fmt, "--format"), out=out,
            detailed_exitcode=detailed_exitcode, streams=_streams(), principals=principals,
            cluster=_cluster(cluster, project),
            guardrails=Guardrails(allow_mass_delete, fail_on_unmanaged), color=_color(),
            config_flag=_state["config"], github=github, markdown_limit=markdown_limit)

    return run(body, json_errors=fmt == "json")


class _ApplyFormat(StrEnum):
    TEXT = "text"
    JSON = "json"


@app.command()
def apply(
    paths: Annotated[list[Path] | None, typer.Argument(
        help="Manifest files or directories (or use --plan, or --cluster's manifests).",
        show_default=False, metavar="[PATH...]")] = None,
    plan_file: Annotated[Path | None, typer.Option(
        "--plan", help="Apply exactly this saved plan (refused if stale).", dir_okay=False,
        metavar="PLAN.json")] = None,
    cluster: ClusterOpt = None,
    state: StateOpt = None,
    bootstrap_server: BootstrapOpt = None,
    command_config: CommandConfigOpt = None,
    sandbox: SandboxOpt = None,
    auto_approve: Annotated[bool, typer.Option(
        "--auto-approve", help="Do not ask for confirmation (required without a terminal).")] = False,
    report: Annotated[Path | None, typer.Option(
        "--report", help="Write the per-entity results as JSON.", dir_okay=False,
        metavar="REPORT.json")] = None,
    allow_mass_delete: Annotated[bool, typer.Option(
        "--allow-mass-delete", help="Allow more deletions than [policy] max-delete(-percent).")] = False,
    fmt: Annotated[str, typer.Option(
        "--format", metavar="FORMAT",
        help="text | json (the report on stdout; needs --auto-approve)")] = "text",
    config: ConfigOpt = None,
) -> int:
    """Make the cluster match: validateOnly pre-flight, alter, verify, per-entity report."""
    from kqplan.commands.apply import apply_command
    from kqplan.pipeline.guarded import Guardrails

    _use_config(config)

    def body() -> int:
        manifest_paths = paths or []
        project = _config(manifest_paths)
        return apply_command(
            manifest_paths, plan_file, _target(state, bootstrap_server, command_config, sandbox),
            project, auto_approve=auto_approve, report=report, streams=_streams(),
            cluster_entry=_cluster(cluster, project), guardrails=Guardrails(allow_mass_delete),
            color=_color(), as_json=_choice(_ApplyFormat, fmt, "--format") is _ApplyFormat.JSON)

    return run(body, json_errors=fmt == "json")


@app.command()
def export(
    state: StateOpt = None,
    bootstrap_server: BootstrapOpt = None,
    command_config: CommandConfigOpt = None,
    sandbox: SandboxOpt = None,
    cluster: ClusterOpt = None,
    out: Annotated[Path | None, typer.Option(
        "--out", metavar="DIR",
        help="Directory for the manifests (a file with --format json); default stdout.")] = None,
    split_by: Annotated[str, typer.Option("--split-by", help="none | user", metavar="HOW")] = "none",
    fmt: Annotated[str, typer.Option(
        "--format", help="yaml (manifests) | json (snapshot)", metavar="FORMAT")] = "yaml",
    force: Annotated[bool, typer.Option(
        "--force", help="Overwrite files that differ, and remove stale exported ones.")] = False,
    no_ownership: Annotated[bool, typer.Option(
        "--no-ownership", help="Write no ownership block (the cluster is not adopted whole).")] = False,
    config: ConfigOpt = None,
) -> int:
    """Write manifests that reproduce the cluster and own it (adopt an existing cluster)."""
    from kqplan.commands.export import ExportFormat, export_command
    from kqplan.manifest.export import SplitBy

    _use_config(config)

    def body() -> int:
        target = _target(state, bootstrap_server, command_config, sandbox).or_cluster(
            _cluster(cluster, _config()))
        return export_command(target, out=out, split_by=_choice(SplitBy, split_by, "--split-by"),
                              fmt=_choice(ExportFormat, fmt, "--format"), streams=_streams(),
                              force=force, adopt=not no_ownership)

    return run(body)


NamesOpt = Annotated[str | None, typer.Option(
    "--names", help="Comma-separated TYPE=NAME pairs, e.g. user=alice,client-id=app.",
        metavar="TYPE=NAME,...")]
DefaultsOpt = Annotated[str | None, typer.Option(
    "--defaults", help="Comma-separated entity types whose default entity is meant, e.g. user.",
        metavar="TYPE,...")]


@app.command()
def describe(
    names: NamesOpt = None,
    defaults: DefaultsOpt = None,
    any_types: Annotated[str | None, typer.Option(
        "--any", help="Entity types that must be present with any name (defaults included).",
            metavar="TYPE,...")] = None,
    strict: Annotated[bool, typer.Option(
        "--strict", help="Only entities with exactly the given types.")] = False,
    state: StateOpt = None,
    bootstrap_server: BootstrapOpt = None,
    command_config: CommandConfigOpt = None,
    sandbox: SandboxOpt = None,
    cluster: ClusterOpt = None,
    fmt: Annotated[str, typer.Option("--format", help="text | json | yaml", metavar="FORMAT")] = "text",
    config: ConfigOpt = None,
) -> int:
    """Show configured quotas of the entities matching a filter (KIP-546 describe)."""
    from kqplan.commands.describe import DescribeFormat, describe_command
    from kqplan.core.selectors import filter_from_flags

    _use_config(config)

    def body() -> int:
        project = _config()
        flt = filter_from_flags(names, defaults, any_types, strict=strict,
                                custom=project.custom_entity_types)
        target = _target(state, bootstrap_server, command_config, sandbox).or_cluster(
            _cluster(cluster, project))
        return describe_command(target, flt, fmt=_choice(DescribeFormat, fmt, "--format"),
                                streams=_streams())

    return run(body, json_errors=fmt == "json")


@app.command()
def alter(
    names: NamesOpt = None,
    defaults: DefaultsOpt = None,
    add: Annotated[str | None, typer.Option(
        "--add", help="KEY=VALUE,... to set (byte units allowed, e.g. 10MiB).",
            metavar="KEY=VALUE,...")] = None,
    delete: Annotated[str | None, typer.Option("--delete", help="KEY,... to remove.",
        metavar="KEY,...")] = None,
    validate_only: Annotated[bool, typer.Option(
        "--validate-only", help="Let the broker validate without changing anything.")] = False,
    state: StateOpt = None,
    bootstrap_server: BootstrapOpt = None,
    command_config: CommandConfigOpt = None,
    sandbox: SandboxOpt = None,
    cluster: ClusterOpt = None,
    fmt: Annotated[str, typer.Option("--format", help="text | json", metavar="FORMAT")] = "text",
    config: ConfigOpt = None,
) -> int:
    """Change one entity's quotas directly (KIP-546 alter), checked offline first; prints
    before -> after."""
    from kqplan.commands.describe import AlterFormat, alter_command, parse_ops
    from kqplan.core.selectors import entity_from_flags

    _use_config(config)

    def body() -> int:
        project = _config()
        entity = entity_from_flags(names, defaults, custom=project.custom_entity_types)
        target = _target(state, bootstrap_server, command_config, sandbox).or_cluster(
            _cluster(cluster, project))
        return alter_command(target, entity, parse_ops(add, delete), validate_only=validate_only,
                             streams=_streams(), config=project,
                             fmt=_choice(AlterFormat, fmt, "--format"))

    return run(body, json_errors=fmt == "json")


@app.command()
def resolve(
    names: Annotated[str, typer.Option(
        "--names", help="The connection: user=PRINCIPAL[,client-id=ID] or ip=ADDRESS.",
            metavar="TYPE=NAME,...")],
    show_overridden: Annotated[bool, typer.Option(
        "--show-overridden", help="Also list the less specific entries each key overrides (*).")] = False,
    desired: Annotated[list[Path] | None, typer.Option(
        "--desired", help="Resolve against these manifests instead of a cluster (repeatable).",
            metavar="PATH")] = None,
    state: StateOpt = None,
    bootstrap_server: BootstrapOpt = None,
    command_config: CommandConfigOpt = None,
    sandbox: SandboxOpt = None,
    cluster: ClusterOpt = None,
    fmt: Annotated[str, typer.Option("--format", help="text | json", metavar="FORMAT")] = "text",
    config: ConfigOpt = None,
) -> int:
    """Which quota a connection really gets, per key, and from which entity (KIP-546 resolve)."""
    from kqplan.commands.resolve import ResolveFormat, principal_of, resolve_command

    _use_config(config)

    def body() -> int:
        paths = desired or []
        project = _config(paths)
        principal = principal_of(names, custom=project.custom_entity_types)
        target = _target(state, bootstrap_server, command_config, sandbox)
        if not paths:
            target = target.or_cluster(_cluster(cluster, project))
        return resolve_command(principal, target, paths, project, show_overridden=show_overridden,
                               fmt=_choice(ResolveFormat, fmt, "--format"), streams=_streams())

    return run(body, json_errors=fmt == "json")


class _SandboxFlavor(StrEnum):
    KRAFT = "kraft"
    ZK = "zk"


@app.command()
def sandbox(
    host: Annotated[str, typer.Option("--host", help="Address to listen on.", metavar="HOST")] = "127.0.0.1",
    port: Annotated[int, typer.Option(
        "--port", help="Port (0: pick a free one and print it).", min=0, max=65535,
        metavar="PORT")] = 9092,
    state: Annotated[Path | None, typer.Option(
        "--state", dir_okay=False,
        help="Snapshot file: loaded at start, rewritten atomically after every committed alter.",
            metavar="SNAPSHOT.json")] = None,
    seed: Annotated[Path | None, typer.Option(
        "--seed", dir_okay=False, help="Start from this snapshot (instead of --state's content).",
            metavar="SNAPSHOT.json")] = None,
    cluster_id: Annotated[str | None, typer.Option(
        "--cluster-id", help="Cluster id to report (default: the snapshot's, else a fixed one).",
            metavar="ID")] = None,
    request_log: Annotated[Path | None, typer.Option(
        "--request-log", dir_okay=False, help="Append one JSON line per request served.",
            metavar="FILE")] = None,
    sasl_users: Annotated[Path | None, typer.Option(
        "--sasl-users", dir_okay=False,
        help="JSON users for SASL/PLAIN with their permissions; the listener then requires SASL.",
            metavar="USERS.json")] = None,
    tls_cert: Annotated[Path | None, typer.Option(
        "--tls-cert", dir_okay=False, help="PEM certificate (the listener then speaks TLS).",
            metavar="PEM")] = None,
    tls_key: Annotated[Path | None, typer.Option("--tls-key", dir_okay=False, help="PEM key.",
        metavar="PEM")] = None,
    lag_ms: Annotated[int, typer.Option(
        "--lag-ms", help="Serve the pre-alter state to describes for this long (read-after-write lag).",
            metavar="MS")] = 0,
    flavor: Annotated[_SandboxFlavor, typer.Option(
        "--flavor", help="Answer as a KRaft 4.3 broker (kraft) or a ZooKeeper-mode 3.9 broker (zk).",
        case_sensitive=False)] = _SandboxFlavor.KRAFT,
) -> int:
    """Run the sandbox broker: a Kafka-wire client-quota broker that behaves like Kafka."""
    from kqplan.commands.sandbox import sandbox_command
    from kqplan.sandbox.flavors import Flavor

    return run(lambda: sandbox_command(
        host=host, port=port, state=state, seed=seed, cluster_id=cluster_id, request_log=request_log,
        sasl_users=sasl_users, tls_cert=tls_cert, tls_key=tls_key, lag_ms=lag_ms, streams=_streams(),
        flavor=Flavor(flavor.value)))


SCHEMAS = ("manifest", "plan", "report", "errors")


@app.command()
def schema(
    name: Annotated[str, typer.Argument(
        help="manifest | plan | report | errors", metavar="NAME")] = "manifest",
) -> int:
    """Print a JSON Schema: manifests, plan JSON, apply reports, or diagnostics/errors."""
    import json

    def body() -> int:
        if name not in SCHEMAS:
            raise KqplanError(f"no schema '{name}'", hint=f"one of {', '.join(SCHEMAS)}")
        if name == "manifest":  # generated from the models: always what this kqplan reads
            from kqplan.manifest.models import json_schema

            sys.stdout.write(json.dumps(json_schema(), indent=2) + "\n")
            return ExitCode.OK
        # shipped in the wheel as kqplan/schemas/; in a checkout they sit beside the package
        here = Path(__file__).resolve().parent
        for directory in (here / "schemas", here.parent / "schemas"):
            path = directory / f"{name}-v1.json"
            if path.is_file():
                sys.stdout.write(path.read_text(encoding="utf-8"))
                return ExitCode.OK
        raise KqplanError(f"the {name} schema is not installed with this kqplan")

    return run(body)


# -- fmt / import (manifest writing) -------------------------------------------------------------
# [anchor: manifest-writer commands]
@app.command()
def fmt(
    paths: PathsArg,
    check: Annotated[bool, typer.Option(
        "--check", help="Write nothing; list files that are not canonical and exit 1 if any.")] = False,
    diff: Annotated[bool, typer.Option("--diff", help="Show the changes as a unified diff.")] = False,
    config: ConfigOpt = None,
) -> int:
    """Rewrite manifests in canonical form (key order, units, quoting), keeping comments."""
    from kqplan.commands.fmt import fmt_command

    _use_config(config)
    return run(lambda: fmt_command(paths, _config(paths), check=check, diff=diff, streams=_streams()))

@app.command(name="import")
def import_(
    directory: Annotated[Path, typer.Argument(help="The manifests directory to write into.",
                                              metavar="DIR", file_okay=False)],
    names: NamesOpt = None,
    defaults: DefaultsOpt = None,
    all_unmanaged: Annotated[bool, typer.Option(
        "--all-unmanaged", help="Every cluster entity no manifest lists and no scope covers.")] = False,
    split_by: Annotated[str, typer.Option(
        "--split-by", metavar="HOW", help="none | user: the file a new entity goes to (as export)")] = "none",
    state: StateOpt = None,
    bootstrap_server: BootstrapOpt = None,
    command_config: CommandConfigOpt = None,
    sandbox: SandboxOpt = None,
    cluster: ClusterOpt = None,
    config: ConfigOpt = None,
) -> int:
    """Pull entities from the cluster into the manifests (comments and formatting kept)."""
    from kqplan.commands.import_ import import_command
    from kqplan.core.selectors import entity_from_flags
    from kqplan.manifest.export import SplitBy

    _use_config(config)

    def body() -> int:
        project = _config([directory])
        wanted = [entity_from_flags(names, defaults, custom=project.custom_entity_types)] \
            if names or defaults else []
        entry = _cluster(cluster, project)
        target = _target(state, bootstrap_server, command_config, sandbox).or_cluster(entry)
        return import_command(directory, wanted, target, project, all_unmanaged=all_unmanaged,
                              split_by=_choice(SplitBy, split_by, "--split-by"), streams=_streams(),
                              layers=entry.manifests if entry is not None else ())

    return run(body)


# -- fleet (kqplan/commands/fleet.py defines the sub-app) ------------------------------------------
# [anchor: fleet commands]
fleet_app = typer.Typer(help="Every cluster of the kqplan.toml inventory at once (local or Spark engine).",
                        no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]})
app.add_typer(fleet_app, name="fleet")
FleetClustersOpt = Annotated[list[str] | None, typer.Option(
    "--cluster", metavar="NAME", help="Only this inventory cluster (repeatable; default: all).")]
FleetEngineOpt = Annotated[str, typer.Option("--engine", metavar="ENGINE", help="local | spark")]
FleetFormatOpt = Annotated[str, typer.Option("--format", metavar="FORMAT", help="text | markdown | json")]
SparkMasterOpt = Annotated[str | None, typer.Option(
    "--spark-master", metavar="URL", help="Spark master for --engine spark (default local[*]).")]
SparkRemoteOpt = Annotated[str | None, typer.Option(
    "--spark-remote", metavar="sc://HOST:PORT", help="A Spark Connect server instead.")]


@fleet_app.command("snapshot")
def fleet_snapshot(
    out: Annotated[Path, typer.Option("--out", metavar="DIR", help="Write DIR/<cluster>.json.")],
    cluster: FleetClustersOpt = None,
    config: ConfigOpt = None,
) -> int:
    """One describe per cluster, written as snapshots; exit 1 if any cluster failed."""
    from kqplan.commands.fleet import snapshot_command

    _use_config(config)
    return run(lambda: snapshot_command(_config(), cluster or [], out=out, streams=_streams()))


@fleet_app.command("impact")
def fleet_impact(
    usage: Annotated[list[Path], typer.Option(
        "--usage", metavar="FILE|DIR", help="Usage samples: CSV, JSON lines or Parquet (repeatable).")],
    out: Annotated[Path, typer.Option("--out", metavar="DIR",
                                      help="Write impact.parquet, unused.parquet and charts.")],
    cluster: FleetClustersOpt = None,
    stat: Annotated[str, typer.Option("--stat", metavar="STAT", help="max | pNN (e.g. p99)")] = "max",
    engine: FleetEngineOpt = "local",
    fmt: FleetFormatOpt = "text",
    fail_on_throttle: Annotated[bool, typer.Option(
        "--fail-on-throttle", help="Exit 1 when a principal goes from not throttled to throttled.")] = False,
    spark_master: SparkMasterOpt = None,
    spark_remote: SparkRemoteOpt = None,
    config: ConfigOpt = None,
) -> int:
    """Which observed clients each cluster's plan would throttle, and which quotas nobody hits."""
    from kqplan.commands.fleet import Engine, FleetFormat, impact_command

    _use_config(config)
    return run(lambda: impact_command(
        _config(), cluster or [], usage=usage, stat=stat, engine=_choice(Engine, engine, "--engine"),
        out=out, fmt=_choice(FleetFormat, fmt, "--format"), fail_on_throttle=fail_on_throttle,
        streams=_streams(), spark_master=spark_master, spark_remote=spark_remote),
        json_errors=fmt == "json")


@fleet_app.command("plan")
def fleet_plan(
    cluster: FleetClustersOpt = None,
    engine: FleetEngineOpt = "local",
    out: Annotated[Path | None, typer.Option(
        "--out", metavar="DIR", help="Write DIR/changes.parquet (one row per changed key).")] = None,
    fmt: FleetFormatOpt = "text",
    detailed_exitcode: Annotated[bool, typer.Option(
        "--detailed-exitcode", help="Exit 2 when any cluster would change (0: none, 1: error).")] = False,
    spark_master: SparkMasterOpt = None,
    spark_remote: SparkRemoteOpt = None,
    config: ConfigOpt = None,
) -> int:
    """Every cluster's plan with kqplan plan's semantics: a summary and the changed keys as a table."""
    from kqplan.commands.fleet import Engine, FleetFormat, plan_command

    _use_config(config)
    return run(lambda: plan_command(
        _config(), cluster or [], engine=_choice(Engine, engine, "--engine"), out=out,
        fmt=_choice(FleetFormat, fmt, "--format"), detailed_exitcode=detailed_exitcode,
        streams=_streams(), spark_master=spark_master, spark_remote=spark_remote),
        json_errors=fmt == "json")


@fleet_app.command("rightsize")
def fleet_rightsize(
    usage: Annotated[list[Path], typer.Option(
        "--usage", metavar="FILE|DIR", help="Usage samples: CSV, JSON lines or Parquet (repeatable).")],
    out: Annotated[Path, typer.Option("--out", metavar="DIR", help=(
        "Write DIR/<cluster>/rightsize.yaml, DIR/proposals.parquet and DIR/proposals.md."))],
    cluster: FleetClustersOpt = None,
    stat: Annotated[str, typer.Option("--stat", metavar="STAT", help="max | pNN (e.g. p99)")] = "p99",
    headroom: Annotated[float, typer.Option(
        "--headroom", metavar="X", help="Multiplies the statistic before rounding up (at least 1).")] = 1.5,
    tolerance: Annotated[float, typer.Option("--tolerance", metavar="T", help=(
        "Keep a current quota that covers the proposal and is at most (1+T) x it."))] = 0.5,
    minimum: Annotated[list[str] | None, typer.Option(
        "--min", metavar="KEY=VALUE",
        help="Floor for a key, e.g. producer_byte_rate=1MiB (repeatable).")] = None,
    label: Annotated[list[str] | None, typer.Option(
        "--label", metavar="KEY=VALUE", help="A label of the written manifests (repeatable).")] = None,
    engine: FleetEngineOpt = "local",
    fmt: FleetFormatOpt = "text",
    spark_master: SparkMasterOpt = None,
    spark_remote: SparkRemoteOpt = None,
    config: ConfigOpt = None,
) -> int:
    """Proposed quotas from observed usage (statistic x headroom, rounded up), as manifests per cluster."""
    from kqplan.commands.fleet import Engine, FleetFormat, rightsize_command

    _use_config(config)
    return run(lambda: rightsize_command(
        _config(), cluster or [], usage=usage, stat=stat, headroom=headroom, tolerance=tolerance,
        mins=minimum or [], labels=label or [], engine=_choice(Engine, engine, "--engine"), out=out,
        fmt=_choice(FleetFormat, fmt, "--format"), streams=_streams(), spark_master=spark_master,
        spark_remote=spark_remote), json_errors=fmt == "json")


def _choice(enum: Any, value: str, option: str) -> Any:
    try:
        return enum(value)
    except ValueError:
        allowed = " | ".join(m.value for m in enum)
        raise KqplanError(f"{option} must be one of {allowed}, not '{value}'") from None


def optional_values(argv: Sequence[str]) -> list[str]:
    """Give ``--sandbox`` an optional value: it takes the next word only when that names a
    ``.json`` seed, so ``plan DIR --sandbox`` and ``plan --sandbox DIR`` both work."""
    out: list[str] = []
    args = list(argv)
    for i, arg in enumerate(args):
        if arg == "--":
            return out + args[i:]
        out.append(arg)
        if arg == "--sandbox":
            following = args[i + 1] if i + 1 < len(args) else None
            if following is None or following.startswith("-") \
                    or not following.lower().endswith(".json"):
                out[-1] = "--sandbox="
    return out


def _command_name(info: Any) -> str:
    return str(info.name or info.callback.__name__.replace("_", "-"))


@contextmanager
def _only_named(args: Sequence[str]) -> Iterator[None]:
    """Build only the commands named in ``args`` (all of them when none is): typer turns every
    command's signature into click options on each run, 30 ms for all of kqplan's, 3 ms for one.
    A word that merely looks like a command (a path called ``plan``) only adds that one back."""
    words = set(args)
    commands, groups = list(app.registered_commands), list(app.registered_groups)
    named = [c for c in commands if _command_name(c) in words]
    named_groups = [g for g in groups if g.name in words]
    if named or named_groups:
        app.registered_commands[:], app.registered_groups[:] = named, named_groups
    try:
        yield
    finally:
        app.registered_commands[:], app.registered_groups[:] = commands, groups


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point. Usage errors exit 1 (2 means "changes present")."""
    # kqplan uses no pydantic plugin; looking for them scans every installed distribution's
    # entry points (~15 ms of each command's start-up).
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    if argv is None:  # the console script: it ends with _exit_now
        from kqplan.perf import exit_without_freeing

        exit_without_freeing()
    try:
        args = optional_values(sys.argv[1:] if argv is None else argv)
        with _only_named(args):
            code = app(args=args, prog_name="kqplan", standalone_mode=False)
    except _UsageError as exc:
        message = exc.format_message()  # type: ignore[attr-defined]
        if type(exc).__name__ == "NoArgsIsHelpError":
            sys.stderr.write(message + "\n")
            code = ExitCode.OK
        else:
            sys.stderr.write(f"Error: {message}\n")
            ctx = getattr(exc, "ctx", None)
            if ctx is not None:
                sys.stderr.write(f"  = help: see `{ctx.command_path} --help`\n")
            code = ExitCode.ERROR
    except (typer.Abort, KeyboardInterrupt):
        sys.stderr.write("Interrupted.\n")
        code = ExitCode.INTERRUPTED
    except typer.Exit as exc:
        code = exc.exit_code
    if argv is None:  # the console script (tests call main(argv) and keep their interpreter)
        _exit_now(int(code or 0))
    sys.exit(int(code or 0))


def _exit_now(code: int) -> None:
    """End the process once the output is written, without tearing the interpreter down:
    freeing a 100k-entity plan's objects one by one took 0.07-0.12 s after the last line. kqplan
    registers no exit handler — connections, sandboxes, Spark sessions and temporary files are
    closed by the commands themselves — so nothing is skipped but the freeing."""
    import logging

    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # the reader left early (`kqplan plan | head`): nothing more to say
        pass
    logging.shutdown()
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    main()
