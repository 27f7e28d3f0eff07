"""``kqplan fmt [--check] [--diff] PATH...``: rewrite manifests in canonical form, comments kept;
``--check`` and ``--diff`` only say what would change."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path

from kqplan.config.model import ProjectConfig
from kqplan.console import Streams
from kqplan.core.desired import DesiredState
from kqplan.core.errors import ExitCode, KqplanError
from kqplan.files import read_bounded_text, write_atomically
from kqplan.render.escape import terminal


def is_manifest(text: str) -> bool:
    """A kqplan manifest (other YAML, a CI workflow say, is left alone when a hook passes it)."""
    return any(line.startswith("apiVersion:") and "kqplan/" in line for line in text.splitlines()[:50])


def fmt_command(paths: Sequence[Path], config: ProjectConfig, *, check: bool, diff: bool,
                streams: Streams) -> int:
    """Rewrite every manifest not in canonical form and name it. ``check`` and ``diff`` write
    nothing (a preview, as black's and ruff's ``--diff`` and ``gofmt -d``; terraform's ``fmt -diff``
    also writes): ``check`` names each file that would change and exits 1 if any, ``diff`` prints
    how it would change (a unified diff), both together print the diff and exit 1. Exit 1 too
    when a file cannot be read."""
    from ruamel.yaml.error import YAMLError

    from kqplan.manifest.fmt import format_text
    from kqplan.manifest.loader import discover

    files, problems = discover(paths)
    if problems:
        raise KqplanError(f"{problems[0].span.path}: {problems[0].message}")
    changed = 0
    for path in files:
        text = read_bounded_text(path, what="manifest", limit=config.max_file_bytes)
        if not is_manifest(text):
            continue
        try:
            new = format_text(text)
        except YAMLError:  # a file that does not parse is validate's to explain, with its position
            streams.warn(terminal(f"{path}: not formatted: it is not valid YAML "
                                  f"(run `kqplan validate {path}`)"))
            continue
        if new == text:
            continue
        changed += 1
        if diff:
            streams.print("".join(difflib.unified_diff(text.splitlines(True), new.splitlines(True),
                                                       f"{path}", f"{path} (formatted)")), end="")
        elif check:
            streams.print(terminal(str(path)))
        else:
            _rewrite(path, text, new, config)
            streams.print(terminal(str(path)))
    return ExitCode.ERROR if check and changed else ExitCode.OK


def _rewrite(path: Path, text: str, new: str, config: ProjectConfig) -> None:
    """Write ``new`` over ``path`` (its ``text``), and put ``text`` back if the manifest then asks
    for anything else: ``fmt`` never changes meaning."""
    from kqplan.manifest.compile import load_desired

    def meaning(desired: DesiredState) -> tuple[object, ...]:  # what the manifest asks for
        return (desired.quotas, desired.budgets, sorted((e.entity.display, e.at) for e in desired.expiring),
                sorted((e.entity.display, e.at) for e in desired.expired))

    before = meaning(load_desired([path], config))
    write_atomically(path, new)
    if meaning(load_desired([path], config)) != before:
        write_atomically(path, text)
        raise KqplanError(f"{path}: formatting would change what the manifest asks for; left as it was",
                          hint="please report this as a kqplan bug")
