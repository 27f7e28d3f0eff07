"""What the manifests released at a Git base: the commit a pull request merges into.

kqplan keeps no state, so "a release is shown once" needs a base to compare with: a plan shows
``~ release`` for an entity released now but not at the base — in the pull request that releases
it — and later plans (on the base itself, nightly) say nothing of it. The base is
``KQPLAN_BASE_REF`` (any revision git knows), else, in a GitHub pull request workflow,
``origin/$GITHUB_BASE_REF``. Without one, releases are silent.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

from kqplan.core.entity import Entity, unescape_name
from kqplan.files import repository_root

BASE_ENV = "KQPLAN_BASE_REF"
GIT_TIMEOUT = 30.0


def base_ref(env: Mapping[str, str] | None = None) -> str | None:
    """The base to compare releases with, if the environment names one."""
    env = os.environ if env is None else env
    if env.get(BASE_ENV):
        return env[BASE_ENV]
    if env.get("GITHUB_BASE_REF"):
        return f"origin/{env['GITHUB_BASE_REF']}"
    return None


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[bytes] | None:
    try:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, timeout=GIT_TIMEOUT,
                              check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None


def released_at(base: str, files: Iterable[str]) -> set[Entity] | None:
    """The entities ``files`` (as opened now) released at ``base``; None when git cannot say (no
    repository, ``base`` unknown here: a shallow clone that did not fetch it). A file the base
    does not have released nothing."""
    import yaml_rs

    from kqplan.manifest.parse import ALIAS_LIMITS

    found: set[Entity] = set()
    checked: set[Path] = set()  # repositories where ``base`` is known: asked once each
    for file in files:
        path = Path(file).resolve()
        root = repository_root(path.parent)
        if root is None:
            return None
        if root not in checked:
            known = _git(root, "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}")
            if known is None or known.returncode != 0:
                return None
            checked.add(root)
        shown = _git(root, "show", f"{base}:{path.relative_to(root).as_posix()}")
        if shown is None or shown.returncode != 0:
            continue
        try:
            doc = yaml_rs.loads(shown.stdout.decode("utf-8", errors="replace"), parse_datetime=False,
                                alias_limits=ALIAS_LIMITS)
        except yaml_rs.YAMLDecodeError:
            continue
        released = doc.get("released") if isinstance(doc, dict) else None
        for item in released if isinstance(released, list) else ():
            if isinstance(item, dict) and item and all(isinstance(v, str) for v in item.values()):
                found.add(Entity([(str(t), unescape_name(n)) for t, n in item.items()]))
    return found
