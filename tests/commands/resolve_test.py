"""``kqplan resolve`` output (the pure function behind the command): KIP-546's forms and JSON."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from kqplan.commands.resolve import parse_connection, resolve_command, resolve_output
from kqplan.config.model import ProjectConfig
from kqplan.console import Streams
from kqplan.core.entity import Entity
from kqplan.core.errors import KqplanError
from kqplan.pipeline.target import Target
from kqplan.snapshot.file import write_snapshot

U, CL, UC = Entity.user, Entity.client, Entity.user_client

# KIP-546's describe example, whose resolve example this reproduces (plus the ``*`` lines).
STATE = {
    UC("user-one", "my-client"): {"consumer_byte_rate": 4000000, "producer_byte_rate": 1000000},
    UC("user-two", "my-client"): {"consumer_byte_rate": 2000000},
    UC(None, "my-client"): {"consumer_byte_rate": 1000000, "producer_byte_rate": 500000},
    Entity.ip(None): {"connection_creation_rate": 20},
}


def test_text_matches_kip_546() -> None:
    out = resolve_output(STATE, "user=user-two,client-id=my-client", show_overridden=False,
                         fmt="text")
    assert out == """\
consumer_byte_rate=2000000 {user=user-two, client-id=my-client}
controller_mutation_rate=unlimited
producer_byte_rate=500000 {user=<default>, client-id=my-client}
request_percentage=unlimited
"""


def test_overridden_entries_are_starred() -> None:
    out = resolve_output(STATE, "user=user-two,client-id=my-client", show_overridden=True,
                         fmt="text")
    assert out.splitlines()[:2] == [
        "consumer_byte_rate=2000000 {user=user-two, client-id=my-client}",
        "*consumer_byte_rate=1000000 {user=<default>, client-id=my-client}",
    ]


def test_json_lists_every_key_of_the_kind() -> None:
    doc = json.loads(resolve_output(STATE, "user=user-two,client-id=my-client",
                                    show_overridden=True, fmt="json"))
    assert doc == {
        "entity": {"user": "user-two", "client-id": "my-client"},
        "quotas": {
            "consumer_byte_rate": {
                "value": 2000000, "source": {"user": "user-two", "client-id": "my-client"},
                "overridden": [{"source": {"user": None, "client-id": "my-client"},
                                "value": 1000000}]},
            "controller_mutation_rate": {"value": None, "source": None, "overridden": []},
            "producer_byte_rate": {"value": 500000, "source": {"user": None,
                                                              "client-id": "my-client"},
                                   "overridden": []},
            "request_percentage": {"value": None, "source": None, "overridden": []},
        }}


def test_ip_and_fractional_values() -> None:
    state = {Entity.ip("10.0.0.7"): {"connection_creation_rate": 50},
             Entity.ip(None): {"connection_creation_rate": 20},
             U("bob"): {"request_percentage": 12.5}}
    assert resolve_output(state, "ip=10.0.0.7", show_overridden=True, fmt="text") == \
        "connection_creation_rate=50 {ip=10.0.0.7}\n*connection_creation_rate=20 {ip=<default>}\n"
    assert json.loads(resolve_output(state, "ip=1.1.1.1", show_overridden=False, fmt="json")) == {
        "entity": {"ip": "1.1.1.1"},
        "quotas": {"connection_creation_rate": {"value": 20, "source": {"ip": None},
                                                "overridden": []}}}
    assert "request_percentage=12.5 {user=bob}" in resolve_output(
        state, "user=bob,client-id=", show_overridden=False, fmt="text")


def test_names_parsing() -> None:
    assert parse_connection("user=a,client-id=b") == ("a", "b")
    assert parse_connection("client-id=b,user=a") == ("a", "b")
    assert parse_connection("user=a,client-id=") == ("a", "")
    assert parse_connection("user=a") == ("a", "")  # a connection that sends no client-id
    assert parse_connection("user=\\<default>,client-id=x\\,y") == ("<default>", "x,y")
    assert parse_connection("ip=::1") == "::1"


@pytest.mark.parametrize(("names", "message", "hint"), [
    ("client-id=b", "every connection has a user", "user=ANONYMOUS"),
    ("user=a,ip=1.2.3.4", "ip cannot be combined", "--names ip=ADDRESS alone"),
    ("user=a,user=b", "given twice", "--names user=U,client-id=C"),
    ("user=a,client-id=,client-id=", "given twice", "--names user=U"),
    ("user=<default>,client-id=x", "ambiguous", "literally named <default>"),
    ("usr=a", "unknown entity type 'usr'", "entity types: user"),
    ("", "nothing to resolve", "--names user=U"),
    ("user", "is not TYPE=NAME", "--names user=alice"),
])
def test_bad_names_say_how_to_fix(names: str, message: str, hint: str) -> None:
    with pytest.raises(KqplanError) as err:
        resolve_output(STATE, names, show_overridden=False, fmt="text")
    assert message in err.value.message
    assert err.value.hint is not None
    assert hint in err.value.hint


def test_bad_format() -> None:
    with pytest.raises(KqplanError, match="'yaml' is not a resolve format"):
        resolve_output(STATE, "user=a", show_overridden=False, fmt="yaml")


def test_command_against_a_snapshot_and_manifests(tmp_path: Path) -> None:
    from kqplan.commands.resolve import ResolveFormat

    snapshot = tmp_path / "s.json"
    write_snapshot(snapshot, STATE, "c1")
    out, err = io.StringIO(), io.StringIO()
    code = resolve_command(U("user-two"), Target(state=snapshot), [], ProjectConfig(),
                           show_overridden=False, fmt=ResolveFormat.TEXT,
                           streams=Streams(out, err))
    assert code == 0
    assert out.getvalue().splitlines()[0] == "consumer_byte_rate=unlimited"
    assert "no client-id given" in err.getvalue()
    manifest = tmp_path / "q.yaml"
    manifest.write_text("apiVersion: kqplan/v1\nkind: ClientQuotas\nentities:\n"
                        "  - {user: <default>, quotas: {producer_byte_rate: 1MiB}}\n")
    out = io.StringIO()
    resolve_command(UC("x", "y"), Target(), [manifest], ProjectConfig(), show_overridden=False,
                    fmt=ResolveFormat.TEXT, streams=Streams(out, io.StringIO()))
    assert "producer_byte_rate=1048576 {user=<default>}" in out.getvalue()
    with pytest.raises(KqplanError, match="cannot be combined with --state"):
        resolve_command(UC("x", "y"), Target(state=snapshot), [manifest], ProjectConfig(),
                        show_overridden=False, fmt=ResolveFormat.TEXT,
                        streams=Streams(io.StringIO(), io.StringIO()))
