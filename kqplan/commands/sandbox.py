"""``kqplan sandbox``: run the sandbox broker in the foreground until SIGINT/SIGTERM."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kqplan.console import Streams
from kqplan.core.entity import visible
from kqplan.core.errors import ExitCode, KqplanError
from kqplan.files import DEFAULT_INPUT_LIMIT, checked_input, read_bounded
from kqplan.sandbox import DEFAULT_CLUSTER_ID, Flavor, Operation, Sandbox, SandboxConfig, SaslUser

USERS_EXAMPLE = ('{"admin": {"password": "admin-secret", "super": true}, '
                 '"reader": {"password": "reader-secret", "operations": ["DESCRIBE_CONFIGS"]}}')


class _User(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    password: str
    super_user: bool = Field(False, alias="super")
    operations: list[Operation] = Field(default_factory=list)


def read_users(path: Path) -> dict[str, SaslUser]:
    """``--sasl-users FILE``: PLAIN users, their passwords and cluster permissions (JSON)."""
    raw = read_bounded(path, what="--sasl-users", limit=DEFAULT_INPUT_LIMIT)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise KqplanError(f"{path}: not JSON: {exc}", hint=f"expected e.g. {USERS_EXAMPLE}") from None
    if not isinstance(data, dict) or not data:
        raise KqplanError(f"{path}: expected an object of users", hint=f"e.g. {USERS_EXAMPLE}")
    users: dict[str, SaslUser] = {}
    for name, raw in data.items():
        try:
            user = _User.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in (name, *first["loc"]))
            raise KqplanError(f"{path}: {where}: {first['msg']}", hint=f"e.g. {USERS_EXAMPLE}") from None
        users[name] = SaslUser(user.password, frozenset(user.operations), user.super_user)
    return users


def parse_broker_configs(items: Sequence[str]) -> dict[str, str]:
    """``--broker-config NAME=VALUE`` items: a Kafka setting name and its value, each once."""
    found: dict[str, str] = {}
    for item in items:
        name, eq, value = item.partition("=")
        name = name.strip()
        if not eq or not re.fullmatch(r"[a-z][a-z0-9._-]*", name):
            raise KqplanError(f"--broker-config '{visible(item)}': expected NAME=VALUE with a Kafka "
                              "setting name",
                              hint="e.g. --broker-config client.quota.callback.class=com.example.Quotas")
        if name in found:
            raise KqplanError(f"--broker-config {name} is given twice", hint="give each setting once")
        found[name] = value.strip()
    return found


def sandbox_command(*, host: str, port: int, state: Path | None, seed: Path | None,
                    cluster_id: str | None, request_log: Path | None, sasl_users: Path | None,
                    tls_cert: Path | None, tls_key: Path | None, lag_ms: int, streams: Streams,
                    flavor: Flavor = Flavor.KRAFT, brokers: int = 1,
                    broker_configs: Sequence[str] = ()) -> int:
    if (tls_cert is None) != (tls_key is None):
        raise KqplanError("--tls-cert and --tls-key go together")
    for flag, path in (("--tls-cert", tls_cert), ("--tls-key", tls_key)):
        if path is not None and not path.exists():
            raise KqplanError(f"{flag} {path}: no such file", hint="give PEM files for the TLS listener")
        if path is not None:  # OpenSSL reads it: a FIFO would hang the listener's start
            checked_input(path, what=flag, limit=DEFAULT_INPUT_LIMIT)
    # --seed wins; otherwise --state's own content (read once here, not again by the broker)
    start_from = seed if seed is not None else state if state is not None and state.exists() else None
    seeded, recorded_id = None, None
    if start_from is not None:
        from kqplan.snapshot.file import read_snapshot

        seeded, recorded_id = read_snapshot(start_from)
    if seed is not None and seeded is not None and state is not None:
        # --seed with --state: the state file holds what is served from the first request on, so a
        # restart without --seed serves the same (it was written only at the first alter)
        from kqplan.snapshot.file import write_snapshot

        try:
            write_snapshot(state, seeded, cluster_id or recorded_id or DEFAULT_CLUSTER_ID)
        except OSError as exc:
            raise KqplanError(f"cannot write --state {state}: {exc.strerror or exc}") from None
    users = read_users(sasl_users) if sasl_users is not None else {}
    config = SandboxConfig(
        host=host, port=port, sasl=bool(users), tls_cert=tls_cert, tls_key=tls_key,
        cluster_id=cluster_id or recorded_id or DEFAULT_CLUSTER_ID, seed=seeded, state_file=state,
        users=users, request_log=request_log, lag_ms=lag_ms, flavor=flavor, brokers=brokers,
        broker_configs=parse_broker_configs(broker_configs))

    def announce(line: str) -> None:
        streams.print(line)
        streams.out.flush()

    try:
        Sandbox.serve_forever(config, announce)
    except OSError as exc:
        raise KqplanError(f"cannot listen on {host}:{port}: {exc.strerror}",
                          hint="choose another --port (0 picks a free one)") from None
    return ExitCode.OK
