"""Builders and runners shared by tests (the CLI in-process, entities and states, the live
targets: the sandbox broker or a real one)."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kqplan.cluster.connection import config_from_properties
from kqplan.cluster.kafka import KafkaCluster
from kqplan.core.cluster import ALL, Alteration, Op
from kqplan.core.entity import Entity
from kqplan.core.state import QuotaState
from tests.kafka.broker import KafkaSpec

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


@contextlib.contextmanager
def serving(command: list[str]) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A sandbox process started by ``command`` (its ``--port 0`` announced on stdout): yields
    (process, bootstrap); killed at the end if still running."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("listening on 127.0.0.1:"), (line, proc.stderr.read() if proc.stderr else "")
        yield proc, line.split()[-1]
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def entity(**parts: str | None) -> Entity:
    """``entity(user="a", client_id=None)`` → ``{user=a, client-id=<default>}``."""
    return Entity.of({k.replace("_", "-"): v for k, v in parts.items()})


def write_manifest(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("apiVersion: kqplan/v1\nkind: ClientQuotas\n" + body, encoding="utf-8")
    return path


def shown(path: Path | str, root: Path) -> str:
    """``path`` as output shows it when ``root`` is the repository root (issue 43): relative to
    ``root`` (``m/q.yaml``, ``kqplan.toml``). ``path`` must lie under ``root``."""
    return str(Path(path).relative_to(root))


@dataclass(frozen=True)
class Live:
    name: str
    bootstrap: str
    sasl_bootstrap: str
    users: dict[str, str]
    kafka: KafkaSpec | None = None  # the real broker's version and mode; None for the sandbox

    @property
    def zookeeper(self) -> bool:
        """A ZooKeeper-mode broker: other rules for the same requests (KQP145, kafka-quota-rules.md)."""
        return self.kafka is not None and self.kafka.zookeeper

    def command_config(self, tmp_path: Path, user: str, password: str | None = None) -> Path:
        path = tmp_path / f"{user}.properties"
        path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
                        "org.apache.kafka.common.security.plain.PlainLoginModule required "
                        f'username="{user}" password="{password or self.users[user]}";\n')
        return path

    def cluster(self) -> KafkaCluster:
        return KafkaCluster(config_from_properties(self.client_properties, bootstrap=self.bootstrap,
                                                   source="(test)", env={}))

    @property
    def client_properties(self) -> str:
        """Client settings for this target: a ZooKeeper-mode broker writes one ZooKeeper node per
        entity in turn, and an alter of 5000 entities takes it longer than the default 30 s
        request timeout on this machine (a KRaft broker: under 2 s)."""
        return "request.timeout.ms=180000\n" if self.zookeeper else ""

    def state(self, owned: Callable[[Entity], bool]) -> QuotaState:
        with self.cluster() as c:
            return {e: q for e, q in c.describe(ALL).items() if owned(e)}

    def until(self, owned: Callable[[Entity], bool], want: QuotaState, timeout: float = 15.0) -> QuotaState:
        """The owned part of the cluster, polled until it equals ``want`` (Kafka's lag, §2.8)."""
        deadline = time.monotonic() + timeout
        while True:
            got = self.state(owned)
            if got == want or time.monotonic() > deadline:
                return got
            time.sleep(0.1)

    def remove_all(self, owned: Callable[[Entity], bool]) -> None:
        with self.cluster() as c:
            mine = c.describe(ALL)
            undo = [Alteration(e, tuple(Op(k, None) for k in q)) for e, q in mine.items() if owned(e)]
            # in slices: a ZooKeeper-mode broker writes each entity before answering, and 5001 in
            # one request outlast the 30 s request timeout on a busy machine
            for start in range(0, len(undo), 1000):
                c.alter(undo[start:start + 1000], validate_only=False)


def mine(prefix: str) -> Callable[[Entity], bool]:
    return lambda e: (e.get("user") or "").startswith(prefix)


def kq(live: Live, *args: str | Path) -> Result:
    return run_cli(*args, "--bootstrap-server", live.bootstrap)


def manifests(tmp_path: Path, prefix: str, body: str) -> Path:
    return write_manifest(tmp_path / "m" / "quotas.yaml", body.replace("P", prefix))


def fleet_cli(root: Path, *args: str | Path) -> Result:
    """``kqplan fleet ARGS`` with the kqplan.toml in ``root``."""
    return run_cli("--config", root / "kqplan.toml", "fleet", *args)
