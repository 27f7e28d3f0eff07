from kqplan.core.entity import Entity, escape_name, unescape_name


def test_display_order_and_default():
    e = Entity.of({"client-id": None, "user": "alice"})
    assert e.display == "{user=alice, client-id=<default>}"
    assert e == Entity.user_client("alice", None)
    assert hash(e) == hash(Entity.of([("user", "alice"), ("client-id", None)]))


def test_literal_default_name_is_escaped():
    assert Entity.user("<default>").display == "{user=\\<default>}"
    assert unescape_name(escape_name("<default>")) == "<default>"
    assert unescape_name("<default>") is None


def test_kind_and_canonical_order_however_built():
    from kqplan.core.entity import EntityKind

    assert Entity((("client-id", "c"), ("user", "u"))) == Entity.user_client("u", "c")
    assert Entity((("client-id", "c"), ("user", "u"))).parts == (("user", "u"), ("client-id", "c"))
    assert Entity.user_client("u", None).kind is EntityKind.CLIENT
    assert Entity.ip(None).kind is EntityKind.IP
    assert Entity.of({"ip": "1.2.3.4", "user": "u"}).kind is EntityKind.INVALID
    assert Entity.of({"group": "g", "user": "u"}).kind is EntityKind.CUSTOM
    assert Entity.of({"group": "g", "user": "u"}).display == "{user=u, group=g}"
    assert Entity.of({}).kind is EntityKind.INVALID
    assert Entity.of([("user", "a"), ("user", "b")]) == Entity.user("b")  # last wins, as in Kafka
