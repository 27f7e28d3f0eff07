"""The console entry point: ``kqplan`` (and ``python -m kqplan``) run :func:`main`."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import typer

# Importing a group module registers its commands, and `kqplan --help` lists them in the order
# they were registered: keep these imports in that order (fleet, a sub-app, is listed last anyway).
# isort: off
from kqplan.cli import plan, intent, show, cluster, sandbox, manifests, throttled, fleet, fleet_apply  # noqa: F401
# isort: on
from kqplan.cli.app import app
from kqplan.core.errors import ExitCode

__all__ = ["app", "main", "optional_values"]

# typer vendors click privately (typer._click); reach its exception types through public names.
_UsageError: type[Exception] = next(
    c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")




def optional_values(argv: Sequence[str]) -> list[str]:
    """Give ``--sandbox`` an optional value: it takes the next word only when that names a
    ``.json`` seed, so ``plan DIR --sandbox`` and ``plan --sandbox DIR`` both work. And
    ``--verify-enforcement[=WINDOW]``: alone, it is ``--verify-enforcement=`` (the default
    window); a next word that is a duration (``5m``) and no file is its window too."""
    out: list[str] = []
    args = list(argv)
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg == "--":
            return out + args[i:]
        out.append(arg)
        if arg == "--verify-enforcement":
            window = args[i + 1] if i + 1 < len(args) else ""
            from kqplan.core.units import looks_like_duration

            if looks_like_duration(window) and not os.path.exists(window):
                out[-1] = f"--verify-enforcement={window}"  # its window, written with a space
                skip = True
            else:
                out[-1] = "--verify-enforcement="
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
    files = sys.modules.get("kqplan.files")  # not imported at start-up only for this (--version)
    if files is not None:  # an earlier command in this process: its root is not this one's
        files.reset_display_root()
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
