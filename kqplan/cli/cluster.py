"""export, describe, alter, resolve: commands that read or change the cluster itself."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kqplan.cli.app import (
    app,
    choice,
    cluster_entry,
    console_streams,
    global_options,
    project_config,
    use_config,
)
from kqplan.cli.boundary import run
from kqplan.cli.options import (
    BootstrapOpt,
    ClusterOpt,
    CommandConfigOpt,
    ConfigOpt,
    DefaultsOpt,
    NamesOpt,
    SandboxOpt,
    StateOpt,
    TimeoutOpt,
    target_of,
)
from kqplan.core.errors import KqplanError


@app.command()
def init(
    cluster: Annotated[list[str] | None, typer.Option(
        "--cluster", metavar="NAME=HOST:PORT",
        help="A cluster to adopt (repeatable); without any, the clusters of the existing "
             "kqplan.toml.")] = None,
    command_config: CommandConfigOpt = None,
    layers: Annotated[str, typer.Option(
        "--layers", metavar="DIR", help="Where each cluster's layer goes: DIR/NAME.")] = "quotas",
    split_by: Annotated[str, typer.Option("--split-by", help="none | user", metavar="HOW")] = "none",
    timeout: TimeoutOpt = None,
    config: ConfigOpt = None,
) -> int:
    """Adopt clusters: write kqplan.toml with each cluster's id and export each into its own layer."""
    from kqplan.commands.init import init_command, parse_cluster
    from kqplan.config.model import ProjectConfig
    from kqplan.manifest.export import SplitBy

    use_config(config)

    def body() -> int:
        from kqplan.cli.options import start_timeout

        start_timeout(timeout)
        clusters = [parse_cluster(c) for c in cluster or []]
        if clusters and global_options["config"] is not None:
            raise KqplanError("--config names an inventory to read; with --cluster, init writes "
                              "./kqplan.toml",
                              hint="give --cluster NAME=HOST:PORT or --config FILE, not both")
        # with --cluster the inventory is new: a kqplan.toml further up is not this project's
        project = ProjectConfig() if clusters else project_config()
        root = project.source.parent if project.source is not None else Path.cwd()
        return init_command(clusters, project, root=root, command_config=command_config, layers=layers,
                            split_by=choice(SplitBy, split_by, "--split-by"), streams=console_streams())

    return run(body)


@app.command()
def export(
    state: StateOpt = None,
    bootstrap_server: BootstrapOpt = None,
    command_config: CommandConfigOpt = None,
    sandbox: SandboxOpt = None,
    timeout: TimeoutOpt = None,
    cluster: ClusterOpt = None,
    out: Annotated[Path | None, typer.Option(
        "--out", metavar="DIR",
        help="Directory for the manifests (a file with --format json); default stdout.")] = None,
    split_by: Annotated[str, typer.Option("--split-by", help="none | user", metavar="HOW")] = "none",
    fmt: Annotated[str, typer.Option(
        "--format", help="yaml (manifests) | json (snapshot)", metavar="FORMAT")] = "yaml",
    force: Annotated[bool, typer.Option(
        "--force", help="Overwrite files that differ, and remove this cluster's stale exported ones "
        "(another cluster's export is never replaced or removed).")] = False,
    no_ownership: Annotated[bool, typer.Option(
        "--no-ownership", help="Write no ownership block (the cluster is not adopted whole).")] = False,
    config: ConfigOpt = None,
) -> int:
    """Write manifests that reproduce the cluster and own it (adopt an existing cluster)."""
    from kqplan.commands.export import ExportFormat, export_command
    from kqplan.manifest.export import SplitBy

    use_config(config)

    def body() -> int:
        project = project_config()
        entry = cluster_entry(cluster, project)
        target = target_of(state, bootstrap_server, command_config, sandbox, timeout).within(
            project.max_input_bytes).or_cluster(entry)
        return export_command(target, out=out, split_by=choice(SplitBy, split_by, "--split-by"),
                              fmt=choice(ExportFormat, fmt, "--format"), streams=console_streams(),
                              force=force, adopt=not no_ownership, entry=entry)

    return run(body)


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
    timeout: TimeoutOpt = None,
    cluster: ClusterOpt = None,
    fmt: Annotated[str, typer.Option("--format", help="text | json | yaml", metavar="FORMAT")] = "text",
    config: ConfigOpt = None,
) -> int:
    """Show configured quotas of the entities matching a filter (KIP-546 describe)."""
    from kqplan.commands.describe import DescribeFormat, describe_command
    from kqplan.core.selectors import filter_from_flags

    use_config(config)

    def body() -> int:
        project = project_config()
        flt = filter_from_flags(names, defaults, any_types, strict=strict,
                                custom=project.custom_entity_types)
        target = target_of(state, bootstrap_server, command_config, sandbox, timeout).within(
            project.max_input_bytes).or_cluster(cluster_entry(cluster, project))
        return describe_command(target, flt, fmt=choice(DescribeFormat, fmt, "--format"),
                                streams=console_streams())

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
    timeout: TimeoutOpt = None,
    cluster: ClusterOpt = None,
    fmt: Annotated[str, typer.Option("--format", help="text | json", metavar="FORMAT")] = "text",
    config: ConfigOpt = None,
) -> int:
    """Change one entity's quotas directly (KIP-546 alter), checked offline first; prints
    before -> after."""
    from kqplan.commands.describe import AlterFormat, alter_command, parse_ops
    from kqplan.core.selectors import entity_from_flags

    use_config(config)

    def body() -> int:
        project = project_config()
        entity = entity_from_flags(names, defaults, custom=project.custom_entity_types)
        target = target_of(state, bootstrap_server, command_config, sandbox, timeout).or_cluster(
            cluster_entry(cluster, project))
        return alter_command(target, entity, parse_ops(add, delete), validate_only=validate_only,
                             streams=console_streams(), config=project,
                             fmt=choice(AlterFormat, fmt, "--format"))

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
    timeout: TimeoutOpt = None,
    cluster: ClusterOpt = None,
    fmt: Annotated[str, typer.Option("--format", help="text | json", metavar="FORMAT")] = "text",
    config: ConfigOpt = None,
) -> int:
    """Which quota a connection really gets, per key, and from which entity (KIP-546 resolve)."""
    from kqplan.commands.resolve import ResolveFormat, principal_of, resolve_command

    use_config(config)

    def body() -> int:
        paths = desired or []
        project = project_config(paths)
        principal = principal_of(names, custom=project.custom_entity_types)
        target = target_of(state, bootstrap_server, command_config, sandbox, timeout)
        if not paths:
            target = target.or_cluster(cluster_entry(cluster, project))
        return resolve_command(principal, target, paths, project, show_overridden=show_overridden,
                               fmt=choice(ResolveFormat, fmt, "--format"), streams=console_streams())

    return run(body, json_errors=fmt == "json")
