"""``kqplan sandbox`` as a process: startup line, --state durability under kill -9, the request
log, SASL users from a file, clean stop on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from kqplan.cluster.connection import config_from_properties
from kqplan.cluster.kafka import KafkaCluster
from kqplan.core.cluster import Alteration, Op
from kqplan.core.entity import Entity
from kqplan.core.errors import KqplanError
from kqplan.snapshot.file import read_snapshot
from tests.helpers import run_cli, serving, write_manifest


def sandbox_process(*args: str | Path) -> AbstractContextManager[
        tuple[subprocess.Popen[str], str]]:
    return serving([sys.executable, "-m", "kqplan.sandbox", "--port", "0", *map(str, args)])


def client(bootstrap: str, props: str = "") -> KafkaCluster:
    return KafkaCluster(config_from_properties(props, bootstrap=bootstrap, source="t", env={}))


@pytest.mark.parametrize("round_", range(3))
def test_state_survives_kill_9_during_a_stream_of_alters(tmp_path, round_):
    state = tmp_path / "state.json"
    acknowledged: list[int] = []
    with sandbox_process("--state", state) as (proc, bootstrap):
        stop = threading.Event()

        def alters() -> None:
            with client(bootstrap) as c:
                for i in range(100_000):
                    if stop.is_set():
                        return
                    try:
                        change = Alteration(Entity.user(f"u{i}"), (Op("producer_byte_rate", i + 1.0),))
                        results = c.alter([change], validate_only=False)
                    except KqplanError:
                        return  # the broker died under us
                    if results[0].ok:
                        acknowledged.append(i)

        worker = threading.Thread(target=alters)
        worker.start()
        deadline = time.monotonic() + 10
        while len(acknowledged) < 20 + 15 * round_ and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        stop.set()
        worker.join(30)
    assert len(acknowledged) >= 20
    saved, cluster_id = read_snapshot(state)  # parses: never torn
    assert cluster_id == "kqplan-sandbox-cluster"
    for i in acknowledged:  # no acknowledged write lost
        assert saved[Entity.user(f"u{i}")] == {"producer_byte_rate": i + 1.0}


def test_state_file_seeds_a_restart_and_plan_reads_it(tmp_path):
    state = tmp_path / "state.json"
    with sandbox_process("--state", state) as (proc, bootstrap):
        with client(bootstrap) as c:
            c.alter([Alteration(Entity.user("kept"), (Op("consumer_byte_rate", 5.0),))], validate_only=False)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    path = write_manifest(tmp_path / "m" / "q.yaml",
                          "entities:\n  - user: kept\n    quotas: {consumer_byte_rate: 5}\n")
    assert run_cli("plan", path, "--state", state).stdout.startswith("No changes.")
    with sandbox_process("--state", state) as (_, bootstrap), client(bootstrap) as c:
        assert c.describe() == {Entity.user("kept"): {"consumer_byte_rate": 5.0}}


def test_request_log_has_one_json_line_per_request(tmp_path):
    log = tmp_path / "requests.jsonl"
    path = write_manifest(tmp_path / "q.yaml",
                          "entities:\n  - user: a\n    quotas: {producer_byte_rate: 1}\n")
    with sandbox_process("--request-log", log) as (_, bootstrap):
        assert run_cli("apply", path, "--auto-approve", "--bootstrap-server", bootstrap).exit_code == 0
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    names = [line["api_name"] for line in lines]
    assert names.count("AlterClientQuotas") == 2  # validateOnly, then the alter
    assert names.count("DescribeClientQuotas") == 3  # plan, the check before the alter, verify
    alter = [line for line in lines if line["api_name"] == "AlterClientQuotas"]
    assert [a["validate_only"] for a in alter] == [True, False]
    assert all(a["entries"] == 1 and a["error_codes"] == [0] and a["api_version"] == 1 for a in alter)
    assert set(lines[0]) == {"api_key", "api_name", "api_version", "client_id", "connection", "entries",
                             "error_codes", "validate_only"}


def test_sasl_users_file(tmp_path):
    users = tmp_path / "users.json"
    users.write_text(json.dumps({"admin": {"password": "s3cret", "super": True},
                                 "reader": {"password": "r", "operations": ["DESCRIBE_CONFIGS"]}}))
    plain = ('security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username={u}\n'
             'sasl.password={p}\n')
    with sandbox_process("--sasl-users", users) as (_, bootstrap):
        with client(bootstrap, plain.format(u="admin", p="s3cret")) as c:
            assert c.alter([Alteration(Entity.user("x"), (Op("producer_byte_rate", 1.0),))],
                           validate_only=False)[0].ok
        with client(bootstrap, plain.format(u="reader", p="r")) as c:
            assert c.describe() == {Entity.user("x"): {"producer_byte_rate": 1.0}}
            assert c.alter([Alteration(Entity.user("x"), (Op("producer_byte_rate", 2.0),))],
                           validate_only=False)[0].error_code == 31


@pytest.mark.parametrize(("content", "message"), [
    ("{", "not JSON"),
    ("[]", "expected an object of users"),
    ('{"a": {"password": "p", "operations": ["WRITE"]}}', "a.operations.0: Input should be"),
    ('{"a": {"pasword": "p"}}', "a.password: Field required"),
])
def test_bad_sasl_users_file_is_a_clear_error(tmp_path, content, message):
    users = tmp_path / "users.json"
    users.write_text(content)
    result = run_cli("sandbox", "--port", "0", "--sasl-users", users)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {users}: "), result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr
