"""The compiler's part for safe rollout: temporary entries (``expires:``, :mod:`kqplan.core.expiry`)
and cluster-wide budgets (``{per-cluster: 300MiB}``, :mod:`kqplan.core.budgets`).

An entry whose ``expires`` has passed (at ``now`` exactly included) is left out of the desired
state and recorded in ``DesiredState.expired``: an override falls back to the layer beneath, an
entity listed only there is no longer listed. The structural rules still see it: listing the
entity again without ``override: true`` is KQP102, and an override of it is inert (its base is
gone). Budgets are kept apart (``DesiredState.budgets``) until a plan divides them by the
cluster's broker count.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from kqplan.core.desired import Expiry, Origin
from kqplan.core.diagnostics import Loc, Pending, did_you_mean
from kqplan.core.entity import Entity
from kqplan.core.expiry import ExpiryError, parse_when
from kqplan.manifest.compiling import Compiling
from kqplan.manifest.source import SourceFile

BAD_EXPIRES = "KQP123"
BAD_BUDGET = "KQP117"
PER_CLUSTER = "per-cluster"


class Temporary(Compiling):
    """Expiries and budgets: the compiler's part."""

    def clock(self) -> datetime:
        """``now`` as given to the compile, else read once (:mod:`kqplan.config.clock`)."""
        if self.now is None:
            from kqplan.config.clock import now

            self.now = self.state.now = now()
        return self.now

    def entry_expiry(self, source: SourceFile, loc: Loc,
                     raw: dict[str, Any]) -> datetime | Literal[False] | None:
        """The entry's ``expires`` (None: it has none); False after reporting one that is no date."""
        text = raw.get("expires")
        if text is None:
            return None
        where = (*loc, "expires")
        if not isinstance(text, str):
            self.report(source, Pending(BAD_EXPIRES, f"expires must be a date or an ISO 8601 datetime, "
                                        f"not {text!r}", where,
                                        hint="write e.g. `expires: 2026-12-01` or "
                                        "`expires: 2026-12-01T18:00Z`"))
            return False
        try:
            return parse_when(text)
        except ExpiryError as exc:
            self.report(source, Pending(BAD_EXPIRES, f"expires: {exc}", where, hint=exc.hint))
            return False

    def settle_expiry(self, entity: Entity, at: datetime | None, origin: Origin, *, override: bool,
                      listed: bool, lapsed: bool) -> bool:
        """Record the entry's expiry; True when the entry takes no effect: it expired, or it
        overrides an entry that did (``lapsed``). ``listed``: an earlier layer lists the entity."""
        if at is not None:
            expiry = Expiry(entity, at, origin, override)
            if at <= self.clock():
                self.state.expired.append(expiry)
                if not override and not listed:
                    self.lapsed[entity] = origin
                return True
            if not lapsed:
                self.state.expiring.append(expiry)
        return lapsed

    def budget(self, source: SourceFile, loc: Loc, key: str, raw: dict[Any, Any]) -> float | None:
        """``{per-cluster: VALUE}``: the per-cluster value (checked by the key's own rules), or None
        after reporting what is wrong."""
        if list(raw) != [PER_CLUSTER]:
            wrong = next((k for k in raw if k != PER_CLUSTER), None)
            guess = did_you_mean(str(wrong), [PER_CLUSTER]) if wrong is not None else None
            what = f"unknown field '{wrong}'" if wrong is not None else "no value"
            self.report(source, Pending(
                BAD_BUDGET, f"{key}: a quota given as a mapping is a cluster-wide budget, "
                f"{{{PER_CLUSTER}: VALUE}}; this one has {what}", loc,
                hint=f"did you mean '{guess}'?" if guess else
                f"write e.g. `{key}: {{{PER_CLUSTER}: 300MiB}}`, or a plain per-broker value"))
            return None
        return self.values.valid(source, (*loc, PER_CLUSTER), key, raw[PER_CLUSTER])
