"""The one error boundary every command goes through: a :class:`KqplanError` prints its message
and exits 1, Ctrl-C exits 130, a module of an extra that is not installed is named with the extra
to install, and a traceback appears only with ``--debug``."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable

from kqplan import deadline
from kqplan.cli.app import global_options
from kqplan.core.errors import ExitCode, KqplanError, error_text


def run(body: Callable[[], int], *, json_errors: bool = False) -> int:
    """The error boundary every command goes through (``json_errors``: errors as JSON on stderr,
    for ``--format json``)."""
    from kqplan.perf import paused_gc

    try:
        # A command is a short batch run that builds many acyclic objects: see paused_gc.
        with paused_gc():
            return int(body())
    except KqplanError as exc:
        return _failed(exc, json_errors=json_errors)
    except KeyboardInterrupt:
        sys.stderr.write("Interrupted.\n")
        return ExitCode.INTERRUPTED
    except Exception as exc:  # a bug: say so, without a traceback unless asked
        missing = missing_extra(exc)
        if missing is not None:  # not a bug: an optional module this command needs
            return _failed(missing, json_errors=json_errors)
        if global_options["debug"]:
            traceback.print_exc()
        else:
            sys.stderr.write(f"kqplan: internal error: {type(exc).__name__}: {error_text(exc)}\n"
                             "  = help: run again with --debug for the traceback, and please "
                             "report it\n")
        return ExitCode.ERROR
    finally:
        deadline.start(None)  # a --timeout is one command's (tests run several in one process)


EXTRAS: dict[str, str] = {
    # the fleet extra: the local fleet engine, usage files (Parquet) and charts
    "duckdb": "fleet", "pyarrow": "fleet", "matplotlib": "fleet", "numpy": "fleet",
    # the spark extra: pyspark, its JVM gateway and what its Connect client imports
    "pyspark": "spark", "py4j": "spark", "pandas": "spark", "grpc": "spark", "grpc_status": "spark",
    "google": "spark", "zstandard": "spark",
    "jks": "jks",  # the purejks package: JKS/JCEKS stores
    "gssapi": "kerberos",  # SASL/GSSAPI
}
"""The top-level module of each optional dependency → the extra of ``pyproject.toml`` that installs it."""

EXTRA_USES = {
    "fleet": "the local fleet engine, usage files and charts",
    "spark": "the Spark engine",
    "jks": "JKS and JCEKS key stores",
    "kerberos": "SASL/GSSAPI (Kerberos)",
}


def missing_extra(exc: BaseException) -> KqplanError | None:
    """A :class:`ModuleNotFoundError` of an optional module (:data:`EXTRAS`) as the error that
    names the extra to install; ``None`` for anything else (a missing module of kqplan's own is a bug)."""
    if not isinstance(exc, ModuleNotFoundError) or exc.name is None:
        return None
    module = exc.name.partition(".")[0]
    extra = EXTRAS.get(module)
    if extra is None:
        return None
    return KqplanError(f"this command needs the Python module '{module}', which is not installed: kqplan's "
                       f"'{extra}' extra brings it ({EXTRA_USES[extra]})",
                       hint=f"pip install 'kqplan[{extra}]' in the environment kqplan runs in ({sys.prefix})")


def _failed(exc: KqplanError, *, json_errors: bool) -> int:
    """Print a :class:`KqplanError`; exit 1."""
    from kqplan.core.diagnostics import DiagnosticsError

    if json_errors:
        sys.stderr.write(_error_json(exc) + "\n")
    elif isinstance(exc, DiagnosticsError):
        sys.stderr.write(str(exc) + "\n")
    else:
        from kqplan.core.entity import visible

        # a message or hint may carry a path or a value from the input: one line each, escaped
        sys.stderr.write(f"Error: {visible(exc.message)}\n" if exc.hint is None else
                         f"Error: {visible(exc.message)}\n  = help: {visible(exc.hint)}\n")
    if global_options["debug"]:
        traceback.print_exc()
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
