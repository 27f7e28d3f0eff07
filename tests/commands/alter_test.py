"""alter: offline checks before any request (KQP112/113/115), `+|~|- {entity} (altered)` with per-key lines,
--format json; describe of nothing; resolve --names with an empty client-id; over TCP against the sandbox."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kqplan.core.entity import Entity
from kqplan.sandbox import Sandbox, SandboxConfig
from tests.helpers import run_cli


@pytest.fixture
def box() -> Iterator[Sandbox]:
    with Sandbox.start(SandboxConfig(cluster_id="alter")) as sandbox:
        yield sandbox


def alter(box: Sandbox, *args: str):
    return run_cli("--no-color", "alter", "--bootstrap-server", box.bootstrap, *args)


@pytest.mark.parametrize(
    ("add", "code"),
    [
        ("producer_byte_rate=0", "KQP112"),
        ("request_percentage=nan", "KQP115"),
        ("producer_byte_rate=1.5", "KQP113"),
    ],
)
def test_offline_checks_send_nothing(box, add, code):
    result = alter(box, "--names", "user=z", "--add", add)
    assert result.exit_code == 1
    assert f"error[{code}]" in result.stderr
    assert result.stdout == ""
    assert box.state == {}


def test_offline_checks_need_no_cluster():
    # nothing listens on port 1: the error must come before any connection attempt
    result = run_cli(
        "alter", "--bootstrap-server", "127.0.0.1:1", "--names", "user=z", "--add", "producer_byte_rate=0"
    )
    assert result.exit_code == 1
    assert "error[KQP112]" in result.stderr


def test_add_change_remove_lines(box):
    first = alter(box, "--names", "user=z", "--add", "producer_byte_rate=1KiB,request_percentage=5")
    assert first.exit_code == 0, first.stderr
    assert first.stdout == (
        "+ {user=z} (altered)\n    + producer_byte_rate = 1024 (1 KiB)\n    + request_percentage = 5\n"
    )
    second = alter(
        box, "--names", "user=z", "--add", "producer_byte_rate=2KiB", "--delete", "request_percentage"
    )
    assert second.exit_code == 0, second.stderr
    assert second.stdout == (
        "~ {user=z} (altered)\n    ~ producer_byte_rate = 1024 (1 KiB) -> 2048 (2 KiB)\n"
        "    - request_percentage = 5\n"
    )
    third = alter(box, "--names", "user=z", "--delete", "producer_byte_rate")
    assert third.exit_code == 0, third.stderr
    assert third.stdout == "- {user=z} (altered)\n    - producer_byte_rate = 2048 (2 KiB)\n"
    assert Entity.user("z") not in box.state


def test_alter_json(box):
    result = alter(
        box, "--names", "user=j,client-id=c", "--add", "consumer_byte_rate=1MiB", "--format", "json"
    )
    assert result.exit_code == 0, result.stderr
    doc = result.json
    assert doc == {
        "entity": {"user": "j", "client-id": "c"},
        "display": "{user=j, client-id=c}",
        "validate_only": False,
        "ok": True,
        "error": None,
        "before": None,
        "after": {"consumer_byte_rate": 2.0**20},
        "requested": {"consumer_byte_rate": 2.0**20},
    }
    assert box.state[Entity.of({"user": "j", "client-id": "c"})] == {"consumer_byte_rate": 2.0**20}


def test_describe_of_nothing(box):
    text = run_cli("describe", "--bootstrap-server", box.bootstrap, "--names", "user=nobody")
    assert (text.exit_code, text.stdout) == (0, "")
    header, message = text.stderr.splitlines()
    # which cluster, its Kafka version range and metadata mode (issue 18), on stderr as well
    assert header == f"# cluster alter ({box.bootstrap}), Kafka >=4.3 (kraft)"
    assert message == "No client quotas are configured matching {user=nobody}."
    js = run_cli(
        "describe", "--bootstrap-server", box.bootstrap, "--names", "user=nobody", "--format", "json"
    )
    assert (js.exit_code, js.json) == (0, [])


def test_resolve_accepts_an_empty_client_id(box):
    # Kafka cannot store an empty client-id name: a client without one resolves through the user levels
    box.engine.load(
        {
            Entity.user("u"): {"producer_byte_rate": 200.0},
            Entity.of({"user": "u", "client-id": None}): {"producer_byte_rate": 300.0},
        }
    )
    result = run_cli(
        "resolve", "--bootstrap-server", box.bootstrap, "--names", "user=u,client-id=", "--format", "json"
    )
    assert result.exit_code == 0, result.stdout + result.stderr
    assert result.json["entity"] == {"user": "u", "client-id": ""}
    assert result.json["quotas"]["producer_byte_rate"]["value"] == 200.0
    assert result.json["quotas"]["producer_byte_rate"]["source"] == {"user": "u"}
