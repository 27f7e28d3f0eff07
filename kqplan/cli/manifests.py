"""schema, fmt, import: the JSON Schemas, and the commands that write manifests."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from kqplan.cli.app import app, choice, cluster_entry, console_streams, project_config, use_config
from kqplan.cli.boundary import run
from kqplan.cli.options import (
    BootstrapOpt,
    ClusterOpt,
    CommandConfigOpt,
    ConfigOpt,
    DefaultsOpt,
    NamesOpt,
    PathsArg,
    SandboxOpt,
    StateOpt,
    TimeoutOpt,
    target_of,
)
from kqplan.core.errors import ExitCode, KqplanError

SCHEMAS = ("manifest", "quota-tests", "plan", "report", "fleet-report", "errors", "usage")


@app.command()
def schema(
    name: Annotated[str, typer.Argument(
        help="manifest | quota-tests | plan | report | fleet-report | errors | usage",
        metavar="NAME")] = "manifest",
) -> int:
    """Print a JSON Schema: manifests, quota tests, plan JSON, apply reports (single and fleet),
    diagnostics/errors, or a fleet usage sample."""
    import json

    def body() -> int:
        if name not in SCHEMAS:
            raise KqplanError(f"no schema '{name}'", hint=f"one of {', '.join(SCHEMAS)}")
        if name == "manifest":  # generated from the models: always what this kqplan reads
            from kqplan.manifest.models import json_schema

            sys.stdout.write(json.dumps(json_schema(), indent=2) + "\n")
            return ExitCode.OK
        if name == "quota-tests":  # likewise
            from kqplan.manifest.intent import json_schema as tests_schema

            sys.stdout.write(json.dumps(tests_schema(), indent=2) + "\n")
            return ExitCode.OK
        # shipped in the wheel as kqplan/schemas/; in a checkout they sit beside the package
        here = Path(__file__).resolve().parent.parent  # the kqplan package
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
    diff: Annotated[bool, typer.Option(
        "--diff", help="Write nothing; show the changes as a unified diff (with --check: exit 1 if "
        "any). Unlike terraform fmt -diff, which also writes.")] = False,
    config: ConfigOpt = None,
) -> int:
    """Rewrite manifests in canonical form (key order, units, quoting), keeping comments.

    --check and --diff write nothing."""
    from kqplan.commands.fmt import fmt_command

    use_config(config)
    return run(lambda: fmt_command(paths, project_config(paths), check=check, diff=diff,
                                   streams=console_streams()))


@app.command(name="import")
def import_(
    directory: Annotated[Path, typer.Argument(help="The manifests directory to write into.",
                                              metavar="DIR", file_okay=False)],
    names: NamesOpt = None,
    defaults: DefaultsOpt = None,
    all_unmanaged: Annotated[bool, typer.Option(
        "--all-unmanaged", help="Every cluster entity no manifest lists and no scope covers.")] = False,
    drift: Annotated[bool, typer.Option(
        "--drift", help="Accept drift: write the cluster's values of managed entities into the manifests, "
        "where each is declared (with --cluster: in any of its layers).")] = False,
    split_by: Annotated[str | None, typer.Option(
        "--split-by", metavar="HOW", help="none | user: the file a new entity goes to (as export; "
        "default: the layout found in DIR)")] = None,
    state: StateOpt = None,
    bootstrap_server: BootstrapOpt = None,
    command_config: CommandConfigOpt = None,
    sandbox: SandboxOpt = None,
    timeout: TimeoutOpt = None,
    cluster: ClusterOpt = None,
    config: ConfigOpt = None,
) -> int:
    """Pull entities from the cluster into the manifests (comments and formatting kept)."""
    from kqplan.commands.import_ import import_command
    from kqplan.core.selectors import entity_from_flags
    from kqplan.manifest.export import SplitBy

    use_config(config)

    def body() -> int:
        project = project_config([directory])
        wanted = [entity_from_flags(names, defaults, custom=project.custom_entity_types)] \
            if names or defaults else []
        entry = cluster_entry(cluster, project)
        target = target_of(state, bootstrap_server, command_config, sandbox, timeout).or_cluster(entry)
        if drift:
            from kqplan.commands.import_drift import drift_command, drift_paths

            if wanted or all_unmanaged or split_by:
                raise KqplanError("--drift imports the values of managed entities: it takes no --names, "
                                  "--defaults, --all-unmanaged or --split-by",
                                  hint="run `kqplan import --drift DIR` on its own")
            return drift_command(drift_paths(directory, entry), target, project, streams=console_streams(),
                                 entry=entry)
        return import_command(directory, wanted, target, project, all_unmanaged=all_unmanaged,
                              split_by=choice(SplitBy, split_by, "--split-by") if split_by else None,
                              streams=console_streams(), entry=entry)

    return run(body)
