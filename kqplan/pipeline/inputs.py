"""What a command reads besides manifests: an inventory cluster's manifest layers and the Kafka
rules it declares, and a principals file. Light on purpose: ``validate`` needs these without the
cluster-facing modules (and a principals file's reader only when there is one)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kqplan.config.model import ClusterEntry, missing_layer_hint
from kqplan.core.entity import visible
from kqplan.core.errors import KqplanError
from kqplan.core.versions import ClusterProfile
from kqplan.files import DEFAULT_INPUT_LIMIT, read_bounded, shown_path

if TYPE_CHECKING:
    from kqplan.core.principals import Principal


def manifest_paths(paths: Sequence[Path], cluster: ClusterEntry | None, *,
                   missing_ok: bool = False) -> list[Path]:
    """The paths given (as given), else the inventory cluster's layers, relative to the current
    directory when under it (:func:`~kqplan.manifest.source.shown_path`: every file, origin and
    diagnostic shown derives from these paths). A layer that does not exist is an error, unless
    ``missing_ok`` (``validate``, which reports it as KQP191 and reads the others)."""
    if paths:
        return list(paths)
    if cluster is not None and cluster.manifests:
        missing = [layer for layer in cluster.manifests if not layer.exists()]
        if missing and missing_ok and len(missing) < len(cluster.manifests):
            return [shown_path(layer) for layer in cluster.manifests if layer.exists()]
        if missing:
            layer = shown_path(missing[0])
            raise KqplanError(f"cluster '{cluster.name}': manifests layer '{visible(str(layer))}' does not "
                              "exist", hint=missing_layer_hint(cluster.name, layer,
                                                               first=missing[0] == cluster.manifests[0]))
        return [shown_path(layer) for layer in cluster.manifests]
    if cluster is not None:
        raise KqplanError(f"cluster '{cluster.name}' lists no manifests in the inventory",
                          hint=f"add manifests = [\"DIR\", ...] to [clusters.{cluster.name}], or give paths")
    raise KqplanError("no manifests given", hint="give manifest files or directories, or --cluster NAME")


def declared_profile(entry: ClusterEntry | None) -> ClusterProfile:
    """The mode/version an inventory entry declares for offline checks (unknown: KRaft rules)."""
    return ClusterProfile.of(entry.version, entry.mode) if entry is not None else ClusterProfile()


def read_principals(path: Path, *, limit: int = DEFAULT_INPUT_LIMIT) -> list[Principal]:
    """Read a principals file (CSV or JSON lines): a regular file of at most ``limit`` bytes
    (``[limits] max-input-mib``); KqplanError when unreadable or malformed."""
    from kqplan.core.principals import parse_principals

    data = read_bounded(path, what="principals file", limit=limit)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise KqplanError(f"{visible(str(path))}: not UTF-8 (byte {exc.start})",
                          hint="save the principals file as UTF-8") from None
    return parse_principals(text, source=str(path))
