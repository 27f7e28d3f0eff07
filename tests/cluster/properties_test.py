from __future__ import annotations

import re

import pytest

from kqplan.cluster.properties import Setting, interpolate, parse_jaas, parse_properties
from kqplan.core.errors import KqplanError


def test_java_properties_separators_comments_and_lines():
    text = ("# comment\n"
            "! also a comment\n"
            "\n"
            "a=1\n"
            "b : 2\n"
            "c 3\n"
            "  d=  spaced value  \n"
            "e=\n"
            "f\n")
    assert parse_properties(text) == [
        Setting("a", "1", 4), Setting("b", "2", 5), Setting("c", "3", 6),
        Setting("d", "spaced value  ", 7), Setting("e", "", 8), Setting("f", "", 9)]


def test_continuation_lines_keep_the_first_line_number():
    text = ("x=1\n"
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
            "    username=\"alice\" \\\n"
            "    password=\"s3cret\";\n"
            "y=2\n")
    settings = parse_properties(text)
    assert settings[1] == Setting(
        "sasl.jaas.config",
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" '
        'password="s3cret";', 2)
    assert settings[2] == Setting("y", "2", 5)


def test_escapes():
    text = r"key\ with\=odd\:chars=tab\there \u00e9 back\\slash" + "\n"
    assert parse_properties(text) == [Setting("key with=odd:chars", "tab\there é back\\slash", 1)]


def test_even_trailing_backslashes_do_not_continue():
    assert parse_properties("a=x\\\\\nb=y\n") == [Setting("a", "x\\", 1), Setting("b", "y", 2)]


@pytest.mark.parametrize(("value", "expected"), [
    ("${PW}", "hunter2"),
    ("pre-${env:PW}-post", "pre-hunter2-post"),
    ("${env::PW}", "hunter2"),
    ("$${PW}", "${PW}"),
    ("no refs", "no refs"),
    ("${PW}${USER_NAME}", "hunter2alice"),
])
def test_interpolation(value, expected):
    assert interpolate(value, {"PW": "hunter2", "USER_NAME": "alice"}, where="f:1: k") == expected


def test_interpolation_of_an_unset_variable_names_it_and_the_place():
    with pytest.raises(KqplanError) as err:
        interpolate("x${NOPE}y", {}, where="client.properties:3: sasl.password")
    assert str(err.value) == "client.properties:3: sasl.password: environment variable NOPE is not set"


def test_interpolation_refuses_other_config_providers():
    with pytest.raises(KqplanError, match="is not an environment variable reference"):
        interpolate("${file:/etc/secrets.properties:pw}", {}, where="f:1: k")


def test_jaas_plain():
    jaas = parse_jaas('org.apache.kafka.common.security.plain.PlainLoginModule required '
                      'username="alice" password="p\\"w\\\\d";')
    assert jaas.module_name == "PlainLoginModule"
    assert jaas.options == {"username": "alice", "password": 'p"w\\d'}
    assert "p\\\"w" not in repr(jaas)
    assert "password" in repr(jaas)


def test_jaas_bare_values_and_other_flags():
    jaas = parse_jaas("com.sun.security.auth.module.Krb5LoginModule REQUIRED useKeyTab=true "
                      'keyTab="/etc/kafka.keytab" principal="kqplan@EXAMPLE.COM" ;  ')
    assert jaas.options == {"useKeyTab": "true", "keyTab": "/etc/kafka.keytab",
                            "principal": "kqplan@EXAMPLE.COM"}


@pytest.mark.parametrize(("text", "message"), [
    ('PlainLoginModule required username="a" password="topsecret"', "must end with ';'"),
    ('PlainLoginModule username="a" password="topsecret";', "must be followed by `required`"),
    ('PlainLoginModule required username="a" password="topsecret', "quoted value is not closed"),
    ('PlainLoginModule required username="a" password "topsecret";',
     "expected name=\"value\" after option 'username'"),
    ('A required x="1"; B required password="topsecret";', "exactly one login module"),
    ("", "expected `<LoginModule class>"),
])
def test_jaas_errors_never_show_values(text, message):
    with pytest.raises(ValueError, match=re.escape(message)) as err:
        parse_jaas(text)
    assert "topsecret" not in str(err.value)
