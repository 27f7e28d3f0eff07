from kqplan.entity import Entity, escape_name, unescape_name


def test_display_order_and_default():
    e = Entity.of({"client-id": None, "user": "alice"})
    assert e.display == "{user=alice, client-id=<default>}"
    assert e == Entity.user_client("alice", None)
    assert hash(e) == hash(Entity.of([("user", "alice"), ("client-id", None)]))


def test_literal_default_name_is_escaped():
    assert Entity.user("<default>").display == "{user=\\<default>}"
    assert unescape_name(escape_name("<default>")) == "<default>"
    assert unescape_name("<default>") is None
