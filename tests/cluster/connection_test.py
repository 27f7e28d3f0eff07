from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from kqplan.cluster.connection import (
    ConnectionConfig,
    config_from_properties,
    load_connection_config,
)
from kqplan.cluster.security import SecurityProtocol
from kqplan.cluster.tls import Secret
from kqplan.core.errors import KqplanError
from tests.cluster.tls import KEY_PASSWORD

PASSWORD = "Pw-9d7e1c-never-print"
PLAIN_JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
              f'username="alice" password="{PASSWORD}";')


def load(text: str, *, bootstrap: str | None = "127.0.0.1:9092", env=None) -> ConnectionConfig:
    return config_from_properties(text, bootstrap=bootstrap, source="client.properties",
                                  env=env or {})


def error(text: str, **kwargs) -> KqplanError:
    with pytest.raises(KqplanError) as err:
        load(text, **kwargs)
    assert PASSWORD not in str(err.value)
    return err.value


def test_no_file_is_plaintext():
    cfg = load("")
    assert cfg.security_protocol is SecurityProtocol.PLAINTEXT
    assert cfg.kafka_kwargs() == {
        "bootstrap_servers": "127.0.0.1:9092", "client_id": "kqplan",
        "security_protocol": "PLAINTEXT", "request_timeout_ms": 30000,
        "socket_connection_setup_timeout_ms": 10000, "socket_connection_setup_timeout_max_ms": 10000,
        "receive_message_max_bytes": 256 * 1024 * 1024}


def test_java_sasl_ssl_plain_with_pem_truststore(pki):
    cfg = load(f"security.protocol=SASL_SSL\n"
               f"sasl.mechanism=PLAIN\n"
               f"sasl.jaas.config={PLAIN_JAAS}\n"
               f"ssl.truststore.type=PEM\n"
               f"ssl.truststore.location={pki.ca}\n"
               f"ssl.truststore.password=ignored-for-pem\n"
               f"request.timeout.ms=5000\n")
    assert cfg.security_protocol is SecurityProtocol.SASL_SSL
    assert (cfg.sasl_mechanism, cfg.sasl_username, cfg.sasl_password) == ("PLAIN", "alice",
                                                                          Secret(PASSWORD))
    assert cfg.tls is not None
    assert cfg.tls.ca_file == str(pki.ca)
    assert cfg.tls.check_hostname
    assert cfg.request_timeout_ms == 5000
    assert cfg.ignored == ("ssl.truststore.password (client.properties:6)",)
    kwargs = cfg.kafka_kwargs()
    assert kwargs["sasl_plain_password"] == PASSWORD
    assert isinstance(kwargs["ssl_context"], ssl.SSLContext)
    assert kwargs["ssl_context"].verify_mode == ssl.CERT_REQUIRED
    assert cfg.describe() == "127.0.0.1:9092 (SASL_SSL, PLAIN as alice)"


def test_librdkafka_spellings(pki):
    cfg = load("security.protocol=sasl_ssl\n"
               "sasl.mechanisms=SCRAM-SHA-512\n"
               "sasl.username=bob\n"
               "sasl.password=${BOB_PW}\n"
               f"ssl.ca.location={pki.ca}\n"
               f"ssl.certificate.location={pki.client_cert}\n"
               f"ssl.key.location={pki.client_key}\n"
               f"ssl.key.password={KEY_PASSWORD}\n"
               "ssl.endpoint.identification.algorithm=none\n"
               "socket.timeout.ms=7000\n", env={"BOB_PW": PASSWORD})
    assert (cfg.sasl_mechanism, cfg.sasl_username) == ("SCRAM-SHA-512", "bob")
    assert cfg.sasl_password == Secret(PASSWORD)
    assert cfg.tls is not None
    assert not cfg.tls.check_hostname
    assert cfg.tls.cert_file == str(pki.client_cert)
    assert cfg.tls.key_file == str(pki.client_key)
    assert cfg.request_timeout_ms == 7000
    ctx = cfg.ssl_context()
    assert ctx is not None
    assert ctx.check_hostname is False


def test_pem_keystore_and_inline_pem(pki):
    cfg = load("security.protocol=SSL\n"
               "ssl.keystore.type=PEM\n"
               f"ssl.keystore.certificate.chain={pki.client_cert.read_text().replace(chr(10), ' ')}\n"
               f"ssl.keystore.key={pki.client_key_plain.read_text().replace(chr(10), ' ')}\n"
               "ssl.truststore.type=PEM\n"
               f"ssl.truststore.certificates={pki.ca.read_text().replace(chr(10), ' ')}\n")
    assert cfg.tls is not None
    assert cfg.tls.key_pem is not None
    # Java writes inline PEM on one line; Python's ssl needs the line breaks back.
    ctx = cfg.ssl_context()
    assert ctx is not None
    assert "PRIVATE KEY" not in repr(cfg)


def test_pem_keystore_file_holding_key_and_chain(pki, tmp_path):
    bundle = tmp_path / "client-bundle.pem"
    bundle.write_text(pki.client_key_plain.read_text() + pki.client_cert.read_text())
    cfg = load(f"security.protocol=SSL\nssl.keystore.type=PEM\nssl.keystore.location={bundle}\n"
               f"ssl.truststore.location={pki.ca}\n")
    assert cfg.tls is not None
    assert cfg.tls.cert_file == str(bundle)
    assert cfg.tls.key_file is None
    assert cfg.ssl_context() is not None


def test_unreadable_file_names_the_line():
    err = error("security.protocol=SSL\n\nssl.ca.location=/nonexistent/ca.pem\n")
    assert err.message == ("client.properties:3: ssl.ca.location: cannot read PEM file /nonexistent/ca.pem: "
                           "No such file or directory")


def test_unknown_key_suggests_the_closest():
    err = error("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jass.config=x\n")
    assert err.message == "client.properties:3: sasl.jass.config: unknown setting"
    assert err.hint == "did you mean sasl.jaas.config?"


def test_unknown_key_value_is_not_shown():
    err = error(f"my.secret.thing={PASSWORD}\n")
    assert "my.secret.thing: unknown setting" in err.message


def test_unsupported_keys_explain():
    err = error("bootstrap.controllers=c:9093\n")
    assert err.message == ("client.properties:1: bootstrap.controllers: kqplan talks to brokers, "
                           "not controllers")


def test_sasl_settings_need_a_sasl_protocol():
    err = error(f"sasl.mechanism=PLAIN\nsasl.jaas.config={PLAIN_JAAS}\n")
    assert err.message == "client.properties:1: sasl.mechanism: is set but security.protocol is PLAINTEXT"
    assert err.hint == "set security.protocol=SASL_SSL (or SASL_PLAINTEXT)"


def test_tls_settings_need_a_tls_protocol(pki):
    err = error(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config={PLAIN_JAAS}\n"
                f"ssl.ca.location={pki.ca}\n")
    assert err.message == ("client.properties:4: ssl.ca.location: is set but security.protocol is "
                           "SASL_PLAINTEXT")


def test_login_module_must_match_the_mechanism():
    err = error(f"security.protocol=SASL_PLAINTEXT\nsasl.jaas.config={PLAIN_JAAS}\n")
    assert err.message == ("client.properties:2: sasl.jaas.config: uses PlainLoginModule, but "
                           "sasl.mechanism is GSSAPI (the default)")
    scram = PLAIN_JAAS.replace("plain.PlainLoginModule", "scram.ScramLoginModule")
    err = error(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config={scram}\n")
    assert "uses ScramLoginModule, but sasl.mechanism is PLAIN" in err.message


def test_scram_login_module():
    scram = PLAIN_JAAS.replace("plain.PlainLoginModule", "scram.ScramLoginModule")
    cfg = load(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
               f"sasl.jaas.config={scram}\n")
    assert (cfg.sasl_mechanism, cfg.sasl_username) == ("SCRAM-SHA-256", "alice")


def test_jaas_and_librdkafka_credentials_together_is_ambiguous():
    err = error(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config={PLAIN_JAAS}\n"
                "sasl.username=bob\n")
    assert err.message == "client.properties:4: sasl.username: is set as well as sasl.jaas.config"


def test_missing_password():
    err = error("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=bob\n")
    assert err.message == "client.properties:2: sasl.mechanism: PLAIN needs a username and a password"


def test_unparsable_jaas_shows_no_value():
    err = error("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                f"sasl.jaas.config=PlainLoginModule required username=\"a\" password=\"{PASSWORD}\"\n")
    assert err.message == ("client.properties:3: sasl.jaas.config: cannot parse it: the login "
                           "module entry must end with ';'")


def test_unsupported_mechanism():
    err = error("security.protocol=SASL_SSL\nsasl.mechanism=AWS_MSK_IAM\n")
    assert err.message == "client.properties:2: sasl.mechanism: AWS_MSK_IAM is not supported"


def test_bad_protocol_and_numbers():
    assert error("security.protocol=TLS\n").message == (
        "client.properties:1: security.protocol: TLS is not a security protocol")
    assert error("request.timeout.ms=soon\n").message == (
        "client.properties:1: request.timeout.ms: expected a positive whole number of milliseconds "
        "or bytes")


def test_old_tls_versions_are_refused():
    err = error("security.protocol=SSL\nssl.enabled.protocols=TLSv1.2,TLSv1.1\n")
    assert err.message == "client.properties:2: ssl.enabled.protocols: TLSv1.1 is not supported"
    cfg = load("security.protocol=SSL\nssl.protocol=TLSv1.3\n")
    assert cfg.tls is not None
    assert cfg.tls.tls13_only


def test_verification_can_be_turned_off_only_explicitly():
    cfg = load("security.protocol=SSL\nenable.ssl.certificate.verification=false\n")
    ctx = cfg.ssl_context()
    assert ctx is not None
    assert ctx.verify_mode == ssl.CERT_NONE
    default = load("security.protocol=SSL\n").ssl_context()
    assert default is not None
    assert default.verify_mode == ssl.CERT_REQUIRED
    assert default.check_hostname


def test_wrong_key_password_is_a_clean_error(pki):
    cfg = load(f"security.protocol=SSL\nssl.certificate.location={pki.client_cert}\n"
               f"ssl.key.location={pki.client_key}\nssl.key.password={PASSWORD}\n")
    with pytest.raises(KqplanError) as err:
        cfg.ssl_context()
    assert err.value.message.startswith("cannot load the client certificate and key")
    assert PASSWORD not in str(err.value)


def test_oauth_settings():
    jaas = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            f'clientId="kqplan" clientSecret="{PASSWORD}" scope="kafka";')
    cfg = load("security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\n"
               "sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer."
               "OAuthBearerLoginCallbackHandler\n"
               "sasl.oauthbearer.token.endpoint.url=https://idp.example.com/token\n"
               f"sasl.jaas.config={jaas}\n")
    assert cfg.oauth is not None
    assert (cfg.oauth.client_id, cfg.oauth.scope) == ("kqplan", "kafka")
    assert cfg.oauth.client_secret == Secret(PASSWORD)
    assert PASSWORD not in repr(cfg)
    unsecured = load("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
                     "sasl.oauthbearer.config=principal=admin\n")
    assert unsecured.oauth is not None
    assert unsecured.oauth.unsecured_principal == "admin"
    err = error("security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\n"
                "sasl.oauthbearer.token.endpoint.url=https://idp.example.com/token\n")
    assert err.message == ("client.properties:3: sasl.oauthbearer.token.endpoint.url: needs a client "
                           "id and secret")


def test_secrets_never_in_repr_str_or_describe(pki):
    cfg = load(f"security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config={PLAIN_JAAS}\n"
               f"ssl.ca.location={pki.ca}\nssl.certificate.location={pki.client_cert}\n"
               f"ssl.key.location={pki.client_key}\nssl.key.password={KEY_PASSWORD}\n")
    for text in (repr(cfg), str(cfg), cfg.describe(), f"{cfg}", repr(cfg.tls)):
        assert PASSWORD not in text
        assert KEY_PASSWORD not in text
    assert cfg.redact(f"oops {PASSWORD} and {KEY_PASSWORD}") == "oops *** and ***"
    assert str(Secret("x")) == "***"
    assert f"{Secret('x')}" == "***"


def test_bootstrap_from_the_file_and_its_errors():
    cfg = load("bootstrap.servers=kafka-1:9092,kafka-2:9092\n", bootstrap=None)
    assert cfg.bootstrap == "kafka-1:9092,kafka-2:9092"
    assert load("bootstrap.servers=a:1\n").bootstrap == "127.0.0.1:9092"  # the option wins
    assert error("", bootstrap=None).message == "no bootstrap server given"
    assert error("bootstrap.servers=kafka-1\n", bootstrap=None).message == (
        "client.properties:1: bootstrap.servers: 'kafka-1' is not HOST:PORT")
    assert error("", bootstrap="a:1,b").message == "--bootstrap-server: 'b' is not HOST:PORT"
    assert load("", bootstrap="[::1]:9092,SASL_SSL://h:9093").bootstrap == "[::1]:9092,SASL_SSL://h:9093"


def test_environment_variables(tmp_path: Path):
    props = tmp_path / "c.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                     "sasl.username=${KAFKA_USER}\nsasl.password=${KAFKA_PASSWORD}\n")
    env = {"KQPLAN_BOOTSTRAP_SERVER": "b:9092", "KQPLAN_COMMAND_CONFIG": str(props),
           "KAFKA_USER": "carol", "KAFKA_PASSWORD": PASSWORD}
    cfg = load_connection_config(None, None, env=env)
    assert (cfg.bootstrap, cfg.sasl_username, cfg.source) == ("b:9092", "carol", str(props))
    explicit = load_connection_config("x:1", None, env={"KQPLAN_BOOTSTRAP_SERVER": "b:9092"})
    assert explicit.bootstrap == "x:1"
    assert explicit.security_protocol is SecurityProtocol.PLAINTEXT
    with pytest.raises(KqplanError) as err:
        load_connection_config("x:1", props, env={"KAFKA_USER": "carol"})
    assert err.value.message == f"{props}:4: sasl.password: environment variable KAFKA_PASSWORD is not set"
    with pytest.raises(KqplanError, match="cannot read command config"):
        load_connection_config("x:1", tmp_path / "missing.properties", env={})
