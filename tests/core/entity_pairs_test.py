"""Entity is a tuple of its pairs underneath (hashing and equality in C): what it keeps of the
value type it was — canonical order, hash of its pairs, ``in`` asking for a type, pickling."""

from __future__ import annotations

import copy
import pickle

from hypothesis import given
from hypothesis import strategies as st

from kqplan.core.entity import CLIENT_ID, IP, USER, Entity, EntityKind
from kqplan.core.state import fingerprint

types = st.sampled_from([USER, CLIENT_ID, IP, "group", "team"])
names = st.one_of(st.none(), st.text(max_size=4))
pairs = st.lists(st.tuples(types, names), max_size=4)


@given(pairs)
def test_order_of_construction_does_not_matter(items: list[tuple[str, str | None]]) -> None:
    entity = Entity(items)
    assert entity == Entity(reversed(list(dict(items).items())))
    assert hash(entity) == hash(Entity.of(dict(items)))
    assert entity.parts == tuple(entity)
    assert hash(entity) == hash(entity.parts)  # the hash a dict of states has always used
    assert len({t for t, _ in entity}) == len(entity)
    assert entity == Entity.of(dict(entity))
    assert entity.has_default == any(name is None for _, name in entity)
    for entity_type, _ in items:
        assert entity_type in entity
        assert entity.name(entity_type) == dict(items)[entity_type]  # a repeated type: last wins
    assert pickle.loads(pickle.dumps(entity)) == entity
    assert type(pickle.loads(pickle.dumps(entity))) is Entity
    assert copy.deepcopy(entity) == entity


def test_value_behaviour() -> None:
    e = Entity.user_client("u", None)
    assert ("user", "u") not in e  # `in` asks for an entity type
    assert "user" in e
    assert "ip" not in e
    assert repr(e) == "Entity(parts=(('user', 'u'), ('client-id', None)))"
    assert str(e) == e.display == "{user=u, client-id=<default>}"
    assert e.kind is EntityKind.CLIENT
    assert Entity.of({"ip": "1.2.3.4", "user": "u"}).kind is EntityKind.INVALID
    assert Entity.of({"team": "t", "user": "u"}).parts == (("user", "u"), ("team", "t"))
    assert {e: 1}[Entity.of({"client-id": None, "user": "u"})] == 1
    assert not Entity.of({})


def test_fingerprint_is_the_digest_of_the_pairs_repr() -> None:
    import hashlib

    import orjson

    state = {Entity.user("a"): {"producer_byte_rate": 1.0}, Entity.user_client(None, "c\u00e9"): {"x": 2.5}}
    doc = {repr(tuple(e)): q for e, q in state.items()}
    expected = hashlib.sha256(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]
    assert fingerprint(state) == "sha256:" + expected
