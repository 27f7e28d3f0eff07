"""A series' labels to the quota bucket, and the entity that supplies a bucket's quota."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kqplan.core.buckets import bucket_levels, bucket_of, bucket_quota
from kqplan.core.entity import Entity
from kqplan.core.resolve import QuotaIndex, resolve
from kqplan.core.state import QuotaState
from kqplan.metrics.buckets import (
    bucket_of_labels,
    bucket_of_tags,
    jmx_unquote,
    tag,
)

P = "producer_byte_rate"


@pytest.mark.parametrize(("label", "name"), [
    ("plain", "plain"),
    ('"shared app:v2"', "shared app:v2"),
    # as the exporter published them for a real Kafka 4.3.1 broker (tests/metrics/exporter_test.py)
    ('"q\\"uote\\*star\\?\\\\back"', 'q"uote*star?\\back'),
    ('"new\\nline"', "new\nline"),
    ('"odd:client id,1"', "odd:client id,1"),
    ('"a%41+b"', "a%41+b"),  # a client-id is not URL-encoded
    ('"', '"'),
])
def test_jmx_quotes_are_undone(label, name):
    assert tag(label, user=False) == name


def test_the_user_tag_is_url_decoded_as_kafka_encoded_it():
    assert tag("svc%24team", user=True) == "svc$team"
    assert tag("CN%3Dapp%2COU%3Dteam", user=True) == "CN=app,OU=team"
    assert tag("alice", user=True) == "alice"
    assert jmx_unquote("alice") == "alice"


@pytest.mark.parametrize(("labels", "bucket"), [
    ({"user": "alice"}, Entity.user("alice")),
    ({"user": "alice", "client_id": ""}, Entity.user("alice")),
    ({"client_id": "app"}, Entity.client("app")),
    ({"user": "erin%24ro", "client_id": "reader-1"}, Entity.user_client("erin$ro", "reader-1")),
    ({"resource": "Produce"}, None),
])
def test_the_bucket_of_a_series(labels, bucket):
    assert bucket_of_labels(labels, "user", "client_id") == bucket


def test_other_label_names():
    assert bucket_of_labels({"clientId": "app"}, "user", "clientId") == Entity.client("app")


def test_levels_per_bucket_shape():
    assert [lv.rank for lv in bucket_levels(Entity.user_client("u", "c"))] == [1, 2, 4, 5]
    assert [lv.rank for lv in bucket_levels(Entity.user("u"))] == [3, 6]
    assert [lv.rank for lv in bucket_levels(Entity.client("c"))] == [7, 8]
    assert bucket_of_tags("", "") is None


def _state(entries: dict[Entity, float]) -> QuotaState:
    return {entity: {P: value} for entity, value in entries.items()}


# ClientQuotaManagerTest.testQuotaConfigPrecedence (reference §4.1), at the bucket level
PRECEDENCE = _state({
    Entity.user(None): 1000, Entity.client(None): 2000, Entity.user_client(None, None): 3000,
    Entity.user("userA"): 4000, Entity.user_client("userA", "client1"): 5000, Entity.user("userB"): 6000,
    Entity.user_client("userB", "client1"): 7000, Entity.user_client("userB", None): 8000,
    Entity.user("userC"): 10000, Entity.client("client1"): 9000,
})


@pytest.mark.parametrize(("bucket", "value", "source"), [
    (Entity.user_client("userA", "client1"), 5000, Entity.user_client("userA", "client1")),
    (Entity.user_client("userB", "client2"), 8000, Entity.user_client("userB", None)),
    (Entity.user_client("userD", "client1"), 3000, Entity.user_client(None, None)),
    (Entity.user("userA"), 4000, Entity.user("userA")),
    (Entity.user("userD"), 1000, Entity.user(None)),
    (Entity.client("client1"), 9000, Entity.client("client1")),
    (Entity.client("client4"), 2000, Entity.client(None)),
])
def test_the_quota_of_a_bucket(bucket, value, source):
    assert bucket_quota(QuotaIndex.of(PRECEDENCE), bucket, P) == (value, source)


def test_a_bucket_without_a_quota_now():
    assert bucket_quota(QuotaIndex.of(_state({Entity.user("a"): 1.0})), Entity.client("x"), P) is None
    assert bucket_quota(QuotaIndex.of(PRECEDENCE), Entity.user("userA"), "consumer_byte_rate") is None


_USERS = st.sampled_from(["a", "b", None])
_CLIENTS = st.sampled_from(["x", "y", None])
_ENTITIES = st.one_of(st.builds(Entity.user, _USERS), st.builds(Entity.client, _CLIENTS),
                      st.builds(Entity.user_client, _USERS, _CLIENTS))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_ENTITIES, st.integers(1, 10**6).map(float), max_size=8),
       st.sampled_from(["a", "b", "c"]), st.sampled_from(["x", "y", "z"]))
def test_a_connections_bucket_has_the_quota_resolve_gives_it(entries, user, client_id):
    """What the bucket Kafka measured a connection in says is the quota that connection resolves
    to: the metric tags and the quota come from one level of the table (core.resolve)."""
    state = _state(entries)
    resolved = resolve(state, user, client_id)[P]
    if resolved.source is None:
        return
    measured = bucket_of(resolved.source, user, client_id)
    assert measured is not None
    assert bucket_quota(QuotaIndex.of(state), measured, P) == (resolved.value, resolved.source)


@given(st.text(min_size=1, max_size=20), st.booleans())
def test_the_label_a_name_carries_reads_back_as_the_name(name, user):
    """kqplan.metrics.buckets.label writes a name as Kafka's JMX name and the exporter carry it
    (sanitized for the user tag, quoted by JMX when it holds a reserved character); tag reads it
    back. A watched bucket is asked for by these labels (apply --verify-enforcement, throttled)."""
    from kqplan.metrics.buckets import label

    assert tag(label(name, user=user), user=user) == name


@given(st.lists(st.tuples(st.text(min_size=1, max_size=12), st.text(min_size=1, max_size=12)),
                min_size=1, max_size=4))
def test_the_matchers_of_watched_buckets_select_their_series(pairs):
    """The regular expressions of matchers() (Go's RE2 syntax, inside PromQL strings) match every
    watched bucket's labels, whole — checked with Python's re, which reads RE2's escapes alike."""
    import re

    from kqplan.core.entity import Entity
    from kqplan.metrics.buckets import label, matchers

    buckets = [Entity.user_client(u, c) for u, c in pairs]
    buckets += [Entity.user(pairs[0][0]), Entity.client(pairs[0][1])]
    found = dict(re.findall(r'(\w+)=~"((?:[^"\\]|\\.)*)"', matchers(buckets, "user", "client_id")))
    unquoted = {k: re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), v)
                for k, v in found.items()}
    for bucket in buckets:
        user = label(bucket.get("user") or "", user=True) if "user" in bucket else ""
        client = label(bucket.get("client-id") or "", user=False) if "client-id" in bucket else ""
        assert re.fullmatch(unquoted["user"], user), (bucket, unquoted["user"], user)
        assert re.fullmatch(unquoted["client_id"], client), (bucket, unquoted["client_id"], client)
