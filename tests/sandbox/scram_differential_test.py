"""Kafka's own ``kafka-configs`` (ConfigCommand, from the broker's jars) against the real broker and
against the sandbox: ``--describe --entity-type users`` (all users, and one by name), adding a
SCRAM-SHA-256 credential, describing it, deleting it. Exit code, stdout and stderr must match,
with two things normalized: the bootstrap address, and the order of one user's mechanisms
(random on Kafka's side, see :func:`mechanisms_sorted`).

Before the run the sandbox is given the real broker's quota state and its SCRAM users (same
names, mechanisms and iterations; a describe never shows more), so that describing every user
prints the same lines on both. The user the test creates has a name unique to the run.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kafka.protocol.admin import DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse

from kqplan.cluster.connection import config_from_properties
from kqplan.cluster.kafka import KafkaCluster
from kqplan.sandbox import Sandbox, SandboxConfig
from kqplan.sandbox.scram import MECHANISMS
from tests.kafka.broker import KafkaSpec
from tests.kafka.configcommand import ConfigCommand, ConfigCommandError
from tests.kafka.plugin import RealKafka
from tests.sandbox.server_test import Wire

pytestmark = pytest.mark.real_kafka

Outcome = tuple[int, str, str]  # exit code, stdout, stderr


def scram_users(bootstrap: str) -> dict[str, list[tuple[str, int]]]:
    """Every SCRAM user the broker holds: name -> [(mechanism, iterations)]."""
    wire = Wire(bootstrap)
    try:
        answer = wire.call(DescribeUserScramCredentialsRequest[0](users=None),
                           DescribeUserScramCredentialsResponse)
    finally:
        wire.close()
    assert answer.error_code == 0
    return {r.user: [(MECHANISMS[c.mechanism], c.iterations) for c in r.credential_infos]
            for r in answer.results}


@pytest.fixture
def twin(kafka_spec: KafkaSpec, request: pytest.FixtureRequest) -> Iterator[tuple[RealKafka, Sandbox]]:
    """The real broker, and a sandbox holding what it holds (quotas, SCRAM users' shapes)."""
    if kafka_spec.zookeeper:  # before the broker starts: no JVM only to skip
        pytest.skip("ZooKeeper mode: ZkAdminManager answers the SCRAM RPCs with its own rules, "
                    "which the sandbox does not reproduce (it serves KRaft's)")
    real_kafka: RealKafka = request.getfixturevalue("real_kafka")
    config = config_from_properties("", bootstrap=real_kafka.bootstrap, source="t", env={})
    with KafkaCluster(config) as cluster:
        quotas = cluster.describe()
    with Sandbox.start(SandboxConfig(port=0, seed=quotas)) as sandbox:
        for user, credentials in scram_users(real_kafka.bootstrap).items():
            for mechanism, iterations in credentials:
                sandbox.scram.seed(user, uuid.uuid4().hex, (mechanism,), iterations)
        yield real_kafka, sandbox


def outcome(command: ConfigCommand, *args: str) -> Outcome:
    try:
        done = command.run(*args)
    except ConfigCommandError as failed:
        return failed.returncode, failed.stdout, failed.stderr
    return 0, done.stdout, done.stderr


def mechanisms_sorted(stdout: str) -> str:
    """A user's SCRAM mechanisms in one order. Kafka's own order changes from one broker run to
    the next: ScramImage keeps them in a HashMap keyed by an enum, whose hash is the JVM's
    identity hash (metadata/.../image/ScramImage.java, ScramDelta.java)."""
    lines = []
    for line in stdout.splitlines(keepends=True):
        if line.startswith("SCRAM credential configs for "):
            head, _, items = line.rstrip("\n").rpartition(" are ")
            lines.append(f"{head} are {', '.join(sorted(items.split(', ')))}\n")
        else:
            lines.append(line)
    return "".join(lines)


def entities_sorted(stdout: str) -> str:
    """Each run of lines of one kind (``Quota configs for …``, ``SCRAM credential configs for …``)
    in one order. Kafka answers a describe of every user in its image's order, a HashMap keyed by
    the entity (metadata/.../image/ClientQuotasImage.java): with names drawn at random (this test's
    and another test's left on the shared broker) that order changes from run to run."""
    out: list[str] = []
    run: list[str] = []
    for line in [*stdout.splitlines(keepends=True), ""]:
        kind = line.partition(" for ")[0]
        if run and kind != run[0].partition(" for ")[0]:
            out += sorted(run)
            run = []
        if line:
            run.append(line)
    return "".join(out)


def both(real_kafka: RealKafka, sandbox: Sandbox, *args: str) -> tuple[Outcome, Outcome]:
    """(real broker, sandbox), each with its own address replaced by ``BOOTSTRAP``."""
    answers = []
    for bootstrap in (real_kafka.bootstrap, sandbox.bootstrap):
        code, out, err = outcome(ConfigCommand(real_kafka.libs, bootstrap), *args)
        answers.append((code, entities_sorted(mechanisms_sorted(out.replace(bootstrap, "BOOTSTRAP"))),
                        err.replace(bootstrap, "BOOTSTRAP")))
    return answers[0], answers[1]


def test_kafka_configs_on_users_prints_the_same_on_both(twin):
    real_kafka, sandbox = twin
    user = f"scram-diff-{uuid.uuid4().hex[:8]}"
    users = ["--entity-type", "users"]
    named = [*users, "--entity-name", user]
    steps = [
        ["--describe", *users],
        ["--describe", *named],
        ["--alter", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=diff-secret]", *named],
        ["--describe", *named],
        ["--describe", *users],
        ["--alter", "--add-config", "SCRAM-SHA-256=[iterations=4095,password=too-few]", *named],
        # ConfigCommand refuses quota and SCRAM configs in one command (client-side): one each
        ["--alter", "--add-config", "SCRAM-SHA-512=[password=other],producer_byte_rate=1024", *named],
        ["--alter", "--add-config", "producer_byte_rate=1024", *named],
        ["--alter", "--add-config", "SCRAM-SHA-512=[password=other]", *named],
        ["--describe", *named],
        ["--describe", *users],
        ["--alter", "--delete-config", "SCRAM-SHA-512", *named],
        ["--alter", "--delete-config", "producer_byte_rate", *named],
        ["--alter", "--delete-config", "SCRAM-SHA-256", *named],
        ["--describe", *named],
        ["--alter", "--delete-config", "SCRAM-SHA-256", *named],
    ]
    seen = []
    try:
        for step in steps:
            real, sandboxed = both(real_kafka, sandbox, *step)
            seen.append(real)
            assert sandboxed == real, f"kafka-configs {' '.join(step)}"
    finally:
        if any(user in out for _, out, _ in seen):  # a failed run may leave the credential behind
            for config in ("SCRAM-SHA-256", "SCRAM-SHA-512", "producer_byte_rate"):
                outcome(real_kafka.config_command, "--alter", "--delete-config", config, *named)
    # the run did reach the broker's SCRAM answers, not only its errors
    assert "SCRAM-SHA-256=iterations=8192" in seen[3][1]
    assert "producer_byte_rate=1024" in seen[9][1]
    assert "SCRAM-SHA-512=iterations=4096" in seen[9][1]
