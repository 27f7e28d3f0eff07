"""KIP-546 flags → entities and filters; Kafka's filter matching; describe output."""

from __future__ import annotations

import pytest

from kqplan.core.cluster import DescribeFilter, FilterComponent, MatchType
from kqplan.core.errors import KqplanError
from kqplan.core.selectors import entity_from_flags, filter_from_flags, matches, parse_names
from tests.helpers import REPO, entity, run_cli


def test_names_are_opaque_with_backslash_escapes():
    assert parse_names("user=a\\,b,client-id=x=y") == [("user", "a,b"), ("client-id", "x=y")]
    assert parse_names("user=\\<default>") == [("user", "<default>")]
    assert parse_names("user=with space") == [("user", "with space")]


@pytest.mark.parametrize(("names", "defaults", "message"), [
    ("user=<default>", None, "--names: 'user=<default>' is ambiguous"),
    ("user", None, "--names: 'user' is not TYPE=NAME"),
    ("usr=a", None, "--names: unknown entity type 'usr'"),
    ("user=", None, "--names: empty name for user"),
    ("user=a", "user", "entity type 'user' is given more than once"),
    (None, None, "no entity given"),
])
def test_bad_flags(names, defaults, message):
    with pytest.raises(KqplanError) as err:
        entity_from_flags(names, defaults)
    assert err.value.message == message


def test_entity_and_filter_from_flags():
    assert entity_from_flags("client-id=my-client", "user") == entity(user=None, client_id="my-client")
    flt = filter_from_flags("client-id=c", "user", "ip", strict=True)
    assert flt == DescribeFilter((FilterComponent("client-id", MatchType.EXACT, "c"),
                                  FilterComponent("user", MatchType.DEFAULT),
                                  FilterComponent("ip", MatchType.SPECIFIED)), True)


def test_matching_is_kafkas():
    any_user = DescribeFilter((FilterComponent("user", MatchType.SPECIFIED),))
    assert matches(any_user, entity(user=None))                      # SPECIFIED matches defaults
    assert matches(any_user, entity(user="a", client_id="c"))        # non-strict ignores others
    assert not matches(DescribeFilter(any_user.components, True), entity(user="a", client_id="c"))
    assert matches(DescribeFilter(), entity(ip="1.2.3.4"))           # empty non-strict: all
    assert not matches(DescribeFilter((), True), entity(user="a"))   # empty strict: nothing
    exact = DescribeFilter((FilterComponent("user", MatchType.EXACT, "<default>"),))
    assert not matches(exact, entity(user=None))                     # EXACT is literal
    assert matches(exact, entity(user="<default>"))
    default = DescribeFilter((FilterComponent("user", MatchType.DEFAULT),))
    assert matches(default, entity(user=None, client_id="c"))
    assert not matches(default, entity(user="<default>"))


def test_describe_prints_kip_546_blocks(monkeypatch):
    monkeypatch.chdir(REPO)
    result = run_cli("describe", "--state", "examples/converged/snapshot.json", "--names", "user=alice",
                     "--defaults", "client-id")
    assert result.exit_code == 0
    assert result.stdout == ("{user=alice, client-id=<default>}\nconsumer_byte_rate=10000000\n"
                             "request_percentage=12.5\n")
    as_json = run_cli("describe", "--state", "examples/converged/snapshot.json", "--any", "ip",
                      "--format", "json")
    assert as_json.json == [{"entity": {"ip": "2001:db8::1"}, "quotas": {"connection_creation_rate": 10.0}}]
    none = run_cli("describe", "--state", "examples/converged/snapshot.json", "--names", "user=nobody")
    assert (none.exit_code, none.stdout) == (0, "")
