"""What the torn-apply tests share (issue 33), for the sandbox and the real brokers alike: a set of
users planned from ``OLD`` to ``NEW`` in batches of ``BATCH``, an apply through a fault proxy, and
the invariant every fault must leave true — checked against the cluster read directly."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import jsonschema

from kqplan.cluster.kafka import KafkaCluster
from kqplan.core.cluster import Alteration, Op
from kqplan.core.entity import Entity
from tests.helpers import REPO, run_cli, write_manifest

N = 20  # entities
BATCH = 5  # per alter request: 4 batches; AlterClientQuotas 1-4 validate them, 5-8 alter them
OLD, NEW = 1.0, 100.0
SCHEMA = json.loads((REPO / "schemas" / "report-v1.json").read_text())
STATUSES = {"applied", "unverified", "unknown", "not applied", "not sent", "failed",
            "stored differently", "changed underneath"}


def real_alter(batch: int) -> int:
    """The AlterClientQuotas request that carries real alter batch ``batch`` (1-based)."""
    return N // BATCH + batch


def client_config(tmp_path: Path, timeout_ms: int = 1500) -> Path:
    path = tmp_path / "client.properties"
    path.write_text(f"request.timeout.ms={timeout_ms}\nsocket.connection.setup.timeout.ms=1000\n")
    return path


@dataclass(frozen=True)
class Users:
    """``N`` users named ``{prefix}u{i}`` on the cluster at ``direct`` (its own address, not the
    proxy's)."""

    direct: str
    prefix: str = ""
    count: int = N
    batch: int = BATCH

    @cached_property
    def names(self) -> tuple[str, ...]:
        return tuple(f"{self.prefix}u{i}" for i in range(self.count))

    def real_alter(self, batch: int) -> int:
        """The AlterClientQuotas request that carries real alter batch ``batch`` (1-based)."""
        return -(-self.count // self.batch) + batch

    @cached_property
    def order(self) -> tuple[str, ...]:
        """The plan's order, in which batches are cut."""
        return tuple(sorted(self.names, key=lambda u: Entity.user(u).display))

    def users(self, *batches: int) -> set[str]:
        return {self.order[i] for b in batches for i in range((b - 1) * self.batch, b * self.batch)}

    def seed_state(self) -> dict[Entity, dict[str, float]]:
        return {Entity.user(u): {"producer_byte_rate": OLD} for u in self.names}

    def manifest(self, tmp_path: Path, rate: float = NEW) -> Path:
        return write_manifest(tmp_path / "q" / "q.yaml", "entities:\n" + "".join(
            f"  - user: {u}\n    quotas: {{producer_byte_rate: {rate:g}}}\n" for u in self.names))

    def apply_through(self, proxy_bootstrap: str, tmp_path: Path, report: Path) -> tuple[int, str]:
        result = run_cli("apply", self.manifest(tmp_path), "--auto-approve", "--report", report,
                         "--bootstrap-server", proxy_bootstrap, "--command-config", client_config(tmp_path))
        return result.exit_code, result.stdout + result.stderr

    def set_all(self, rate: float | None) -> None:
        """Every user at ``rate`` (None: removed), straight to the broker, 1,000 per request (a
        KRaft controller takes at most 10,000 records per request); returns once describe shows
        them all so. A KRaft broker answers describe from its metadata image, which follows the
        controller's acknowledgement a little later: a plan made at once could see part of the
        change, and the apply's re-describe before its alter the rest ("changed underneath")."""
        with KafkaCluster.connect(self.direct, None) as cluster:
            for i in range(0, self.count, 1_000):
                results = cluster.alter([Alteration(Entity.user(u), (Op("producer_byte_rate", rate),))
                                         for u in self.names[i:i + 1_000]], validate_only=False)
                assert all(r.ok for r in results), [r for r in results if not r.ok][:3]
        deadline = time.monotonic() + 60
        while (behind := [u for u, v in self.stored().items() if v != rate]):
            assert time.monotonic() < deadline, f"{len(behind)} users not yet at {rate} after 60 s"
            time.sleep(0.1)

    def set_all_removed(self) -> None:
        self.set_all(None)

    def another_writer(self, user: str, rate: float) -> None:
        """Another writer (kafka-configs.sh, another apply) sets ``user``'s rate, straight to the broker."""
        with KafkaCluster.connect(self.direct, None) as cluster:
            [result] = cluster.alter([Alteration(Entity.user(user), (Op("producer_byte_rate", rate),))],
                                     validate_only=False)
        assert result.ok

    def stored(self) -> dict[str, float | None]:
        """The cluster read directly (over the wire, not through the proxy): user → producer_byte_rate."""
        with KafkaCluster.connect(self.direct, None) as cluster:
            state = cluster.describe()
        return {u: (state.get(Entity.user(u)) or {}).get("producer_byte_rate") for u in self.names}

    def check_truthful(self, tmp_path: Path, report_path: Path) -> dict[str, set[str]]:
        """The invariant: every entity has a status; ``applied`` ones hold the new value, ``not sent``
        ones the old; the next plan lists exactly the entities not at the new value, none ``applied``
        and every ``not sent``. Returns the users by status."""
        report = json.loads(report_path.read_text())
        jsonschema.validate(report, SCHEMA)
        by_status: dict[str, set[str]] = {}
        for entity in report["entities"]:
            assert entity["status"] in STATUSES
            by_status.setdefault(entity["status"], set()).add(entity["entity"]["user"])
        assert sorted(e["entity"]["user"] for e in report["entities"]) == sorted(self.names)
        now = self.stored()
        assert all(now[u] == NEW for u in by_status.get("applied", ())), (by_status, now)
        assert all(now[u] == OLD for u in by_status.get("not sent", ())), (by_status, now)
        plan = run_cli("plan", self.manifest(tmp_path), "--bootstrap-server", self.direct, "--format", "json")
        assert plan.exit_code == 0, plan.stderr
        left = {c["entity"]["user"] for c in plan.json["changes"]}
        assert left == {u for u, v in now.items() if v != NEW}
        assert left.isdisjoint(by_status.get("applied", ()))
        assert by_status.get("not sent", set()) <= left
        if report["ok"]:
            assert not left
            assert report["status"] == "finished"
        return by_status
