"""``kqplan import --drift``: accept drift as a reviewable change.

For each managed entity whose values on the cluster differ from the manifests (the plan's updates,
not those an expiry causes), the cluster's values are written into the manifests where the plan
says they are declared: each key into the entry that supplies it (an override layer's when the
override supplies it, else the earlier layer's), a key the cluster added into the entity's
latest entry, a key it removed out of the entry that sets it. Comments, quoting and every other
line are kept (round-trip YAML), and a value keeps its form where the value allows: a byte size
stays in units when exact, a per-cluster budget stays a budget when it divides back to the
cluster's value, a plain number stays plain. Then the manifests are read again and planned
against the same describe: the drifted entities must show no change (checked, never assumed).

What is not a value's drift is left, and named: an entity the manifests list that the cluster
lacks, an entity a prune scope would delete, a change an expiry makes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kqplan.config.model import ClusterEntry, ProjectConfig
from kqplan.console import Streams
from kqplan.core.desired import DesiredState, Origin
from kqplan.core.entity import Entity
from kqplan.core.errors import ExitCode, KqplanError
from kqplan.core.plan import Action, Change, Plan, same_value
from kqplan.core.quotas import amount
from kqplan.core.state import QuotaState
from kqplan.pipeline.target import Target, open_cluster
from kqplan.render.escape import terminal


@dataclass(frozen=True, slots=True)
class Written:
    """One key written into a manifest entry."""

    entity: Entity
    key: str
    before: float | None
    after: float | None
    where: str
    """``file:line:column`` of the entry (or its key) before the edit."""

    @property
    def text(self) -> str:
        def shown(value: float | None) -> str:
            return "(none)" if value is None else amount(self.key, value)

        change = f"{shown(self.before)} -> {shown(self.after)}"
        return f"  ~ {self.entity.display} {self.key}: {change}  # {self.where}"


def _chain(origin: Origin) -> list[Origin]:
    """The entity's entries, latest layer first (an override, then what it overrides)."""
    out: list[Origin] = []
    at: Origin | None = origin
    while at is not None:
        out.append(at)
        at = at.overrides
    return out


def _number(value: float) -> int | float:
    return int(value) if value.is_integer() else value


def _form(key: str, written: Any, value: float) -> Any:
    """``value`` in the form ``written`` has: units stay units (when exact), numbers numbers."""
    from kqplan.manifest.yamlio import scalar

    return scalar(key, value) if isinstance(written, str) else _number(value)


class Drift:
    """The round-trip documents being edited, and what was written into them."""

    def __init__(self, brokers: int | None) -> None:
        self.brokers = brokers
        self.docs: dict[Path, tuple[str, Any, Any]] = {}
        """Per file: its text as read, its round-trip tree and the tree's dumper."""
        self.written: list[Written] = []
        self.notes: list[str] = []
        self.edited: dict[Path, set[int]] = {}
        """Per file, the index of each entry edited: only its lines may change."""

    def entry(self, origin: Origin) -> Any:
        path = Path(origin.source.opened)
        if path not in self.docs:
            from kqplan.files import read_bounded_text
            from kqplan.manifest.yamlio import parse_rt

            text = read_bounded_text(path, what="manifest")
            self.docs[path] = (text, *parse_rt(text))
        return self.docs[path][1]["entities"][origin.entry]

    def edit(self, origin: Origin) -> Any:
        """:meth:`entry`, to be changed."""
        self.edited.setdefault(Path(origin.source.opened), set()).add(origin.entry)
        return self.entry(origin)

    def where(self, origin: Origin, key: str | None) -> str:
        item = self.entry(origin)
        quotas = item.get("quotas")
        loc = (*origin.loc, "quotas", key) if key is not None and isinstance(quotas, dict) and key in quotas \
            else origin.loc
        span = origin.source.span(loc)
        return f"{span.path}:{span.line}:{span.column}"

    def accept(self, change: Change, origin: Origin) -> None:
        assert change.before is not None
        assert change.after is not None
        chain = _chain(origin)
        for key in sorted(change.before.keys() | change.after.keys()):
            have, want = change.before.get(key), change.after.get(key)
            if have is not None and want is not None and same_value(have, want):
                continue
            if not self.key(change.entity, chain, key, have, want):
                self.rewrite(change, chain)
                return

    def holds(self, origin: Origin, key: str) -> bool:
        quotas = self.entry(origin).get("quotas")
        return isinstance(quotas, dict) and key in quotas

    def key(self, entity: Entity, chain: list[Origin], key: str, have: float | None,
            want: float | None) -> bool:
        """Write one key where it is declared; False when only rewriting the entry can say it
        (a key a profile supplies is removed, or one an earlier layer would supply again)."""
        from ruamel.yaml.comments import CommentedMap

        holder = next((o for o in chain if self.holds(o, key)), None)
        if have is None:
            if holder is None:
                return False
            below = chain[chain.index(holder) + 1:]
            if any(self.holds(o, key) for o in below) or any(self.entry(o).get("profile") for o in chain):
                if not self.entry(chain[0]).get("override"):
                    return False
                holder = chain[0]  # an override removes what an earlier layer (or profile) sets: null
                where = self.where(holder, key)
                self.quotas(holder)[key] = None
            else:
                where = self.where(holder, key)
                del self.quotas(holder)[key]
            self.written.append(Written(entity, key, want, have, where))
            return True
        target = holder or chain[0]
        where = self.where(target, key)
        quotas = self.quotas(target)
        written = quotas.get(key)
        if isinstance(written, CommentedMap) and "per-cluster" in written:
            self.budget(entity, key, written, have)
        else:
            quotas[key] = _form(key, written, have)
        self.written.append(Written(entity, key, want, have, where))
        return True

    def quotas(self, origin: Origin) -> Any:
        from ruamel.yaml.comments import CommentedMap

        item = self.edit(origin)
        quotas = item.get("quotas")
        if not isinstance(quotas, CommentedMap):
            quotas = item["quotas"] = CommentedMap()
            quotas.fa.set_flow_style()
        return quotas

    def rewrite(self, change: Change, chain: list[Origin]) -> None:
        """The latest entry asks for exactly the cluster's values (its profile dropped; in an
        override, what an earlier layer sets and the cluster lacks as null)."""
        from kqplan.manifest.yamlio import set_quotas

        assert change.before is not None
        assert change.after is not None
        top = chain[0]
        where = self.where(top, None)
        item = self.edit(top)
        removed = change.after.keys() - change.before.keys() if item.get("override") else ()
        notes = set_quotas(item, dict(change.before), removed=removed)
        self.written = [w for w in self.written if w.entity != change.entity]
        for key in sorted(change.before.keys() | change.after.keys()):
            have, want = change.before.get(key), change.after.get(key)
            if not (have is not None and want is not None and same_value(have, want)):
                self.written.append(Written(change.entity, key, want, have, where))
        self.notes += [f"{change.display}: {note}" for note in notes]

    def budget(self, entity: Entity, key: str, written: Any, have: float) -> None:
        from kqplan.core.budgets import per_broker

        brokers = self.brokers
        total = have * brokers if brokers else None
        if total is None or per_broker(key, total, brokers or 1) != have:
            raise KqplanError(f"{entity.display} {key}: the cluster's {amount(key, have)} per broker is no "
                              f"per-cluster budget divided by {brokers or 'an unknown'} broker(s)",
                              hint="write the value by hand; nothing was changed")
        written["per-cluster"] = _form(key, written["per-cluster"], total)


def only_edited(before: str, after: str, entries: set[int]) -> str:
    """``after`` (the round-trip dump) with every change outside the edited entries' lines undone:
    the dump may respell what it did not edit (``[{user: a}]`` as ``[user: a]``, a comment's
    spacing), and the diff of an accepted drift must be the drifted lines only. Entries are found
    in a block-style ``entities:`` list; in another layout the dump is kept whole."""
    import difflib

    from kqplan.manifest.items import entity_lines

    starts, _ = entity_lines(before)
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    if not starts:
        return after
    ranges = [(starts[i] - 1, starts[i + 1] - 1 if i + 1 < len(starts) else len(old))
              for i in sorted(entries)]

    def edited(i1: int, i2: int) -> bool:  # 0-based lines [i1, i2) of ``before``; i1 == i2: an insert
        return any(lo <= i1 <= hi if i1 == i2 else i1 < hi and lo < i2 for lo, hi in ranges)

    out: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        out += new[j1:j2] if tag == "equal" or edited(i1, i2) else old[i1:i2]
    return "".join(out)


def _left(changes: Sequence[Change]) -> list[str]:
    out = []
    for change in changes:
        if change.action is Action.CREATE:
            out.append(f"  {change.display} is in the manifests but not on the cluster: remove its entry "
                       "to accept that")
        elif change.action is Action.DELETE:
            out.append(f"  {change.display} is on the cluster and would be deleted: `kqplan import --names` "
                       "adopts it")
        else:
            out.append(f"  {change.display} changes because an entry expired: not drift")
    return out


def drift_paths(directory: Path, entry: ClusterEntry | None) -> list[Path]:
    """What ``import --drift DIR`` reads and may write: ``--cluster NAME``'s layers (``DIR`` one of
    them), else ``DIR``."""
    if entry is None or not entry.manifests:
        if not directory.is_dir():
            raise KqplanError(f"{terminal(str(directory))} is not a directory of manifests",
                              hint="give the manifests directory the plan reads")
        return [directory]
    from kqplan.pipeline.inputs import manifest_paths

    layers = manifest_paths([], entry)
    if directory.resolve() not in [layer.resolve() for layer in layers]:
        raise KqplanError(f"{terminal(str(directory))} is not a layer of cluster '{entry.name}'",
                          hint=f"give one of {', '.join(map(str, layers))}")
    return layers


def drift_command(paths: Sequence[Path], target: Target, config: ProjectConfig, *, streams: Streams,
                  entry: ClusterEntry | None = None) -> int:
    from kqplan.commands.import_ import _write
    from kqplan.manifest.yamlio import dump_rt
    from kqplan.pipeline.guarded import compute_plan, load_checked

    desired = load_checked(paths, config, streams)
    with open_cluster(target.within(config.max_input_bytes)) as cluster:
        actual = cluster.describe()
        plan = compute_plan(desired, cluster, config, record_state=False, actual=actual, entry=entry)
    drifted = [c for c in plan.changes if c.action is Action.UPDATE and not c.expired
               and c.entity in desired.origins]
    left = [c for c in plan.changes if c not in drifted]
    where = plan.cluster.name or plan.cluster.id or plan.cluster.address
    if not drifted:
        streams.print(f"No drift to import: the managed entities on {terminal(where)} have the "
                      "manifests' values.")
        if left:
            streams.print("Left as they are:\n" + "\n".join(_left(left)))
        return ExitCode.OK
    drift = Drift(plan.cluster.brokers)
    for change in drifted:
        drift.accept(change, desired.origins[change.entity])
    texts = {path: only_edited(text, dump_rt(doc, yaml), drift.edited.get(path, set()))
             for path, (text, doc, yaml) in drift.docs.items()}
    _write(Path("."), texts)
    streams.print(f"Imported the drift of {len(drifted)} entit{'y' if len(drifted) == 1 else 'ies'} from "
                  f"{terminal(where)} into {len(texts)} file(s):")
    streams.print("\n".join(terminal(w.text) for w in drift.written))
    if drift.notes:
        streams.print("\n".join(terminal(f"  note: {n}") for n in drift.notes))
    if left:
        streams.print("Left as they are:\n" + "\n".join(_left(left)))
    return _verify(paths, config, desired, actual, plan=plan, drifted=drifted)


def _verify(paths: Sequence[Path], config: ProjectConfig, before: DesiredState, actual: QuotaState, *,
            plan: Plan, drifted: Sequence[Change]) -> int:
    """The manifests as written, planned against the same describe: no drifted entity may change."""
    from kqplan.manifest.compile import load_desired

    again = load_desired(paths, config, now=before.now)
    if again.errors:
        raise KqplanError("the manifests as written no longer load: " + again.errors[0].message,
                          hint="review `git diff`; this is a kqplan defect, please report it")
    from kqplan.core.budgets import divide

    brokers = plan.cluster.brokers
    wanted = divide(again, brokers)[0] if again.budgets and brokers else again.quotas
    still = [c.entity.display for c in drifted if wanted.get(c.entity) != actual.get(c.entity)]
    if still:
        raise KqplanError(f"after the import, the plan would still change {', '.join(still)}",
                          hint="review `git diff`; this is a kqplan defect, please report it")
    return ExitCode.OK
