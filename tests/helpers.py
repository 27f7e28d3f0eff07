"""Builders and runners shared by tests (the CLI in-process, entities and states)."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kqplan.core.entity import Entity

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Result:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def json(self) -> Any:
        return json.loads(self.stdout)


def run_cli(*args: str | Path) -> Result:
    """Run ``kqplan ARGS`` in this process, capturing its streams and exit code."""
    from kqplan.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([str(a) for a in args])
        except SystemExit as exc:
            code = int(exc.code or 0)
    return Result(code, out.getvalue(), err.getvalue())


def run_kqplan(*args: str | Path, cwd: Path | None = None, stdin: str | None = None,
               env: Mapping[str, str] | None = None, timeout: float = 120) -> Result:
    """Run the installed ``kqplan`` console script in a subprocess."""
    exe = Path(sys.executable).with_name("kqplan")
    proc = subprocess.run([str(exe), *map(str, args)], cwd=cwd, input=stdin, capture_output=True,
                          text=True, timeout=timeout, env=None if env is None else dict(env),
                          check=False)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def entity(**parts: str | None) -> Entity:
    """``entity(user="a", client_id=None)`` → ``{user=a, client-id=<default>}``."""
    return Entity.of({k.replace("_", "-"): v for k, v in parts.items()})


def write_manifest(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("apiVersion: kqplan/v1\nkind: ClientQuotas\n" + body, encoding="utf-8")
    return path
