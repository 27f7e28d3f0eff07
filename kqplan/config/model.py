"""Project configuration, ``kqplan.toml``: the cluster inventory, guardrails, custom types, limits.

```toml
[clusters.prod]                 # the inventory: one table per cluster
id = "MkU3OEVBNTcwNTJENDM2Qk"   # optional guard: plan/apply refuse any other cluster
bootstrap-server = "kafka-prod:9092"
command-config = "prod.properties"   # relative to this file
manifests = ["base", "overlays/prod"] # ordered layers; a later layer overrides with `override: true`

[clusters.staging]
snapshot = "snapshots/staging.json"  # offline target (tests, fleet jobs)
manifests = ["base", "overlays/staging"]
brokers = 3                     # broker count for budgets ({per-cluster: …}) when the target has none

[clusters]
legacy = "OTHER-ID"             # the older form: a name for the `cluster:` guard only

[policy]                        # guardrails: plan and apply refuse what breaks them
max-delete = 10
max-delete-percent = 25
required-keys = ["producer_byte_rate"]
required-defaults = ["user"]
required-labels = ["team"]
expiry-warning = "7d"           # validate warns of entries expiring sooner (the default)
max-expiry = "30d"              # entries may not expire further ahead (unset: no limit)
protected-principals = [{user = "__strimzi-topic-operator"}, {user = "canary", client-id = "probe"}]
[policy.keys.producer_byte_rate]
min = "1KiB"
max = "1GiB"

[custom]
entity-types = ["group"]        # KIP-546: entity types are open strings
keys = ["x_custom_rate"]        # passed through unvalidated

[limits]
max-file-mib = 128              # refuse larger manifest files
max-input-mib = 512             # refuse larger snapshots, plans, usage and other files read whole
```
Found in the current directory or its parents, unless ``--config`` names one. Every problem is a
located diagnostic (``kqplan.toml:7:1: error[KQP190] …``): a typo in a guardrail must not pass.
A cluster's name is one plain file name (``fleet snapshot`` writes ``OUT/NAME.json``): ``../x``,
``/abs``, a name with a control character are refused here, and every fleet output path is joined
through :func:`kqplan.files.inside` besides.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kqplan.core.diagnostics import did_you_mean
from kqplan.core.errors import KqplanError
from kqplan.core.policy import Policy

CONFIG_NAME = "kqplan.toml"
CONFIG_ERROR = "KQP190"
"""Any problem in kqplan.toml: unknown key, wrong type, bad value."""
MISSING_LAYER = "KQP191"
"""An inventory layer that does not exist yet: an error, except for the commands that create it
(``export --out``, ``import``, ``init``)."""
EMPTY_LAYER_FILE = "overrides.yaml"
"""The manifest that makes a directory an empty layer (a layer after a cluster's first)."""


def toml_string(value: str) -> str:
    """``value`` as a TOML string, as a TOML writer (``tomli_w``) writes it — never by hand (JSON's
    escapes are not TOML's): for kqplan.toml, and for the lines a hint says to add to it."""
    import tomli_w

    return tomli_w.dumps({"v": value}).removeprefix("v = ").removesuffix("\n")


def toml_table(*keys: str) -> str:
    """The header of the table ``keys`` (``[clusters."prod 🚀"]``), as ``tomli_w`` writes it."""
    import tomli_w

    doc: dict[str, Any] = {}
    inner = doc
    for key in keys:
        inner = inner.setdefault(key, {})
    return tomli_w.dumps(doc).strip()


def empty_layer(layer: Path, clusters: Sequence[str]) -> tuple[Path, list[str]]:
    """The file that makes ``layer`` an empty layer and its lines: ``LAYER/overrides.yaml`` (the
    layer itself when it names a YAML file), a manifest of no entity, guarded to the cluster when
    one cluster lists the layer (a layer several clusters share is guarded to none). What ``init``
    writes for a layer after the first, and what KQP191 tells to write: a layer after the first
    holds only what overrides the layers before it, so an export there lists every entity twice.
    The guard is a YAML double-quoted scalar, written as a JSON string (YAML is a superset of
    JSON, and a cluster name is printable: nothing in it is escaped but ``"`` and ``\\``)."""
    import json

    file = layer if layer.suffix in (".yaml", ".yml") else layer / EMPTY_LAYER_FILE
    guard = [f"cluster: {json.dumps(clusters[0], ensure_ascii=False)}"] if len(clusters) == 1 else []
    return file, ["apiVersion: kqplan/v1", "kind: ClientQuotas", *guard, "entities: []"]


def missing_layer_hint(cluster: str, layer: Path, *, first: bool) -> str:
    """What to type for a cluster's layer that does not exist (KQP191, and ``plan``'s error), with
    ``layer`` as it is shown (relative to the current directory when under it): the first layer is
    exported from the cluster; a later one is made empty (an export there would list every entity
    of the first layer again, KQP102), then entities are imported into it one by one."""
    from shlex import quote

    from kqplan.core.entity import visible

    if first:
        return visible(f"`kqplan export --cluster {quote(cluster)} --out {quote(str(layer))}` writes it "
                       "from the cluster (or create it, or fix manifests in kqplan.toml)")
    file, lines = empty_layer(layer, [cluster])
    make = "" if str(file.parent) in ("", ".") else f"mkdir -p {quote(str(file.parent))} && "
    command = f"{make}printf '%s\\n' {' '.join(quote(line) for line in lines)} > {quote(str(file))}"
    return visible(f"a layer after the first holds only what overrides the layers before it (an export "
                   f"there would list every entity again): start it empty, as `kqplan init` does: "
                   f"`{command}`; then `kqplan import --cluster {quote(cluster)} --names TYPE=NAME "
                   f"{quote(str(layer))}` brings an entity into it (or fix manifests in kqplan.toml)")


@dataclass(frozen=True, slots=True)
class MetricsSettings:
    """Where a cluster's metrics are (``[metrics]``, ``[clusters.NAME.metrics]``): the Prometheus
    base URL, the selector that picks the cluster's series (``{cluster}``: the inventory name),
    a file of HTTP headers, metric-name overrides (``ROLE.KEY=SELECTOR``). None: not set here."""

    prometheus: str | None = None
    selector: str | None = None
    headers_file: Path | None = None
    names: tuple[str, ...] = ()

    def over(self, other: MetricsSettings) -> MetricsSettings:
        """These settings over ``other`` (a cluster's over ``[metrics]``)."""
        return MetricsSettings(self.prometheus or other.prometheus,
                               self.selector if self.selector is not None else other.selector,
                               self.headers_file or other.headers_file, (*other.names, *self.names))


@dataclass(frozen=True, slots=True)
class ClusterEntry:
    """One cluster of the inventory: where it is, what it must be, which manifests describe it."""

    name: str
    id: str | None = None
    """The cluster id plan/apply demand (the ``cluster:`` guard of a manifest naming ``name`` maps here)."""
    bootstrap: str | None = None
    command_config: Path | None = None
    snapshot: Path | None = None
    manifests: tuple[Path, ...] = ()
    """Ordered layers (absolute paths): a later layer may override an earlier one's entity."""
    mode: str | None = None
    """Declared metadata mode (``kraft`` | ``zookeeper``) for offline validation; detected online."""
    version: str | None = None
    """Declared Kafka version (``3.9``) for offline validation; detected online."""
    brokers: int | None = None
    """Declared broker count, which budgets (``{per-cluster: …}``) are divided by when the target
    reports none (a snapshot); a live cluster's Metadata answer wins."""
    metrics: MetricsSettings = field(default_factory=MetricsSettings)
    """``[clusters.NAME.metrics]`` over ``[metrics]``: where this cluster's metrics are."""

    @property
    def has_target(self) -> bool:
        return self.bootstrap is not None or self.snapshot is not None


@dataclass(frozen=True, slots=True)
class ProjectConfig:
    custom_entity_types: frozenset[str] = frozenset()
    custom_keys: frozenset[str] = frozenset()
    clusters: Mapping[str, ClusterEntry] = field(default_factory=dict)
    policy: Policy = field(default_factory=Policy)
    max_file_bytes: int = 128 * 1024 * 1024
    max_input_bytes: int = 512 * 1024 * 1024
    """Bound of any other file read whole (snapshot, seed, saved plan, client properties, principals):
    ``[limits] max-input-mib``; ``kqplan.files.DEFAULT_INPUT_LIMIT`` when no kqplan.toml says."""
    engine_memory_mib: int | None = None
    """``[limits] engine-memory-mib``: the fleet engines' memory — DuckDB's, and the heap of a Spark
    driver kqplan starts (None: sized from the machine)."""
    engine_spill: str | None = None
    """``[limits] engine-spill``: where the local fleet engine spills (a directory from kqplan.toml's;
    "" for nowhere; None: the system's temporary directory)."""
    rollout_waves: tuple[tuple[str, ...], ...] = ()
    """``[rollout] waves``: the order ``fleet apply --rollout`` applies clusters in, wave by wave."""
    source: Path | None = None

    def cluster_name_for(self, guard: str) -> str | None:
        """The inventory name a ``cluster:`` guard means: itself, or the cluster whose ``id`` it
        is (a name and its id are one guard); None when it is neither."""
        if guard in self.clusters:
            return guard
        return next((e.name for e in self.clusters.values() if e.id == guard), None)

    def cluster(self, name: str) -> ClusterEntry:
        """The inventory entry ``name``; a KqplanError naming the choices when there is none."""
        entry = self.clusters.get(name)
        if entry is not None:
            return entry
        where = f"in {self.source}" if self.source else "(no kqplan.toml found)"
        guess = did_you_mean(name, self.clusters)
        hint = (f"did you mean '{guess}'?" if guess else
                f"clusters: {', '.join(sorted(self.clusters))}" if self.clusters else
                f"add a [clusters.{name}] table to {CONFIG_NAME}, or pass --config FILE")
        raise KqplanError(f"no cluster '{name}' {where}", hint=hint)
