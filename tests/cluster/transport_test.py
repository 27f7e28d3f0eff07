"""The kafka-python adapter, over real TCP against tests/cluster/fakebroker.py: the parts of
kafka-python kqplan depends on (connect, negotiate, SASL, TLS, send, raw bodies, failures)."""

from __future__ import annotations

import logging
import ssl
import time

import pytest
from kafka.protocol.admin import DescribeClientQuotasRequest, DescribeClientQuotasResponse

from kqplan.cluster.connection import config_from_properties
from kqplan.cluster.failures import (
    AuthenticationFailed,
    ConnectionFailed,
    ResponseLost,
    TlsVerificationFailed,
    UnsupportedApi,
)
from kqplan.cluster.framing import RawResponse
from kqplan.cluster.transport import KafkaTransport
from tests.cluster.fakebroker import PRE_2_6_APIS, FakeBroker

PASSWORD = "Pw-41f0a2-never-print"


def transport(bootstrap: str, props: str = "") -> KafkaTransport:
    return KafkaTransport(config_from_properties(props, bootstrap=bootstrap, source="client.properties",
                                                 env={}))


def sasl(password: str = PASSWORD) -> str:
    return ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="alice" password="{password}";\n')


def describe_all() -> DescribeClientQuotasRequest:
    return DescribeClientQuotasRequest(components=[], strict=False)


@pytest.fixture
def broker():
    with FakeBroker(state={(("user", "alice"),): {"producer_byte_rate": 1024.0}}).running() as b:
        yield b


def test_send_negotiates_the_highest_common_version(broker):
    with transport(broker.bootstrap) as t:
        response = t.send(describe_all())
        assert isinstance(response, DescribeClientQuotasResponse)
        assert response.API_VERSION == 1
        assert t.api_versions()[48] == (0, 1)
    assert broker.log[-1] == (48, 1)


def test_an_older_broker_gets_v0():
    with FakeBroker(apis={18: (0, 3), 3: (0, 12), 48: (0, 0), 49: (0, 0)}).running() as b, \
            transport(b.bootstrap) as t:
        assert t.send(describe_all()).API_VERSION == 0
        assert b.log[-1] == (48, 0)


def test_send_raw_keeps_the_body_as_bytes(broker):
    with transport(broker.bootstrap) as t:
        raw = t.send_raw(DescribeClientQuotasRequest, components=[], strict=False)
        decoded = t.send(describe_all())
    assert isinstance(raw, RawResponse)
    assert raw.version == 1
    assert DescribeClientQuotasResponse.decode(raw.body, version=1) == decoded


def test_one_connection_and_its_requests(broker):
    with transport(broker.bootstrap) as t:
        assert t.cluster_id() == "fake-cluster-id"
        t.send(describe_all())
        assert t.connections == 1
        assert dict(t.sent) == {"Metadata": 1, "DescribeClientQuotas": 1}
    # kafka-python tries ApiVersions v4 first; a broker without it answers UNSUPPORTED_VERSION.
    assert broker.log == [(18, 4), (18, 3), (3, 12), (48, 1)]


def test_a_paused_connection_is_waited_for_not_reported_lost(broker):
    """kafka-python fails a request at once on a paused connection ("Node paused: {'max_in_flight'}",
    seen once against Kafka 2.8 under load); the transport waits for the pause to end."""
    with transport(broker.bootstrap) as t:
        t.send(describe_all())
        conn = t._conn
        conn.pause("max_in_flight")
        t._net.call_later(0.2, lambda: conn.unpause("max_in_flight"))
        before = time.monotonic()
        assert isinstance(t.send(describe_all()), DescribeClientQuotasResponse)
        assert time.monotonic() - before >= 0.15
        assert t.connections == 1


def test_sasl_plain():
    with FakeBroker(users={"alice": PASSWORD}).running() as b, transport(b.bootstrap, sasl()) as t:
        t.send(describe_all())
        assert b.log[:4] == [(18, 4), (18, 3), (17, 1), (36, 2)]


def test_wrong_password_is_reported_at_once(caplog):
    caplog.set_level(logging.DEBUG)
    with FakeBroker(users={"alice": PASSWORD}).running() as b, \
            transport(b.bootstrap,
                      sasl("wrong-" + PASSWORD) + "socket.connection.setup.timeout.ms=20000\n") as t:
        started = time.monotonic()
        with pytest.raises(AuthenticationFailed) as err:
            t.send(describe_all())
        elapsed = time.monotonic() - started
        assert t.connections == 1  # no retry with the same credentials
    assert elapsed < 1.0, "must not wait for a bootstrap timeout"
    # Kafka answers and hangs up at once; kafka-python may lose the answer with the connection.
    assert err.value.message in (
        f"authentication failed at {b.bootstrap} as alice (PLAIN): Invalid username or password",
        f"authentication failed at {b.bootstrap} as alice (PLAIN): the broker closed the "
        "connection during authentication")
    assert err.value.hint == ("check the user name and password in client.properties "
                              "(sasl.jaas.config, or sasl.username/sasl.password)")
    assert PASSWORD not in str(err.value)
    assert PASSWORD not in caplog.text


def test_no_secret_in_logs_even_at_debug(caplog):
    caplog.set_level(logging.DEBUG)  # what a --debug run would configure
    with FakeBroker(users={"alice": PASSWORD}).running() as b:
        with transport(b.bootstrap, sasl()) as t:
            t.send(describe_all())
        with transport(b.bootstrap, sasl(PASSWORD[::-1])) as t, pytest.raises(AuthenticationFailed):
            t.send(describe_all())
    assert "Authenticated as alice" in caplog.text  # kafka-python's records are forwarded...
    assert PASSWORD not in caplog.text  # ...and the password is in none of them
    assert PASSWORD[::-1] not in caplog.text
    # kafka-python logs whole frames (SASL credentials included) at DEBUG: never built.
    assert not [r for r in caplog.records if r.name.startswith("kafka.") and r.levelno < logging.INFO]


def test_unsupported_api_is_not_sent():
    with FakeBroker(apis=dict(PRE_2_6_APIS)).running() as b, transport(b.bootstrap) as t:
        with pytest.raises(UnsupportedApi) as err:
            t.send(describe_all())
        assert err.value.api_key == 48
        assert not err.value.maybe_processed
        assert (48, 0) not in b.log
        assert (48, 1) not in b.log


def test_connection_refused_then_the_next_bootstrap_server(broker):
    with transport("127.0.0.1:1") as t, pytest.raises(ConnectionFailed) as err:
        t.send(describe_all())
    assert err.value.message.startswith("cannot connect to 127.0.0.1:1: ")
    assert err.value.retriable
    assert not err.value.maybe_processed
    with transport(f"127.0.0.1:1,{broker.bootstrap}") as t:
        assert t.send(describe_all()).error_code == 0


@pytest.mark.parametrize("when", ["before", "after"])
def test_dropped_connection_after_sending_may_have_been_processed(when):
    with FakeBroker(drop={48: when}).running() as b, transport(b.bootstrap) as t:
        with pytest.raises(ResponseLost) as err:
            t.send(describe_all())
        assert err.value.maybe_processed
        assert "connection lost" in err.value.message
        b.drop.clear()  # the transport stays usable
        assert t.send(describe_all()).error_code == 0
        assert t.connections == 2


def test_timeout_is_a_lost_response():
    with FakeBroker(delays={48: 5}).running() as b, transport(b.bootstrap, "request.timeout.ms=300\n") as t:
        started = time.monotonic()
        with pytest.raises(ResponseLost) as err:
            t.send(describe_all())
        assert time.monotonic() - started < 2
        assert err.value.maybe_processed
        assert "timed out" in err.value.message


def test_a_connection_closed_while_idle_is_replaced_before_sending():
    with FakeBroker(close_after={3}).running() as b, transport(b.bootstrap) as t:
        t.cluster_id()
        time.sleep(0.2)  # the broker hangs up meanwhile
        assert t.send(describe_all()).error_code == 0
        assert t.connections == 2


def test_answers_bigger_than_the_limit():
    state = {(("user", f"user-{i}"),): {"producer_byte_rate": 1.0} for i in range(200)}
    with (FakeBroker(state=state).running() as b,
          transport(b.bootstrap, "receive.message.max.bytes=1000\n") as t,
          pytest.raises(ResponseLost) as err):
        t.send(describe_all())
    assert "larger than receive.message.max.bytes (1000)" in err.value.message


def test_plaintext_client_on_a_sasl_listener_gets_a_hint():
    with (FakeBroker(users={"alice": PASSWORD}).running() as b, transport(b.bootstrap) as t,
          pytest.raises(ResponseLost) as err):
        t.send(describe_all())
    assert err.value.hint is not None
    assert "security.protocol" in err.value.hint


def tls_server(pki) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki.server_cert, pki.server_key)
    return ctx


def test_tls_with_a_pem_ca(pki):
    with FakeBroker(ssl_context=tls_server(pki)).running() as b, \
            transport(b.bootstrap, f"security.protocol=SSL\nssl.truststore.type=PEM\n"
                                   f"ssl.truststore.location={pki.ca}\n") as t:
        assert t.send(describe_all()).error_code == 0


def test_tls_with_the_wrong_ca_fails_verification(pki):
    with FakeBroker(ssl_context=tls_server(pki)).running() as b, \
            transport(b.bootstrap, f"security.protocol=SSL\nssl.ca.location={pki.other_ca}\n") as t:
        started = time.monotonic()
        with pytest.raises(TlsVerificationFailed) as err:
            t.send(describe_all())
        assert time.monotonic() - started < 1.0
        assert t.connections == 1
    assert err.value.message.startswith(f"TLS: the certificate of {b.bootstrap} is not trusted: ")
    assert "ssl.truststore.location" in (err.value.hint or "")


def test_tls_client_on_a_plaintext_listener(broker, pki):
    with transport(broker.bootstrap, f"security.protocol=SSL\nssl.ca.location={pki.ca}\n") as t, \
            pytest.raises(ConnectionFailed) as err:
        t.send(describe_all())
    assert "TLS handshake" in err.value.message or "cannot connect" in err.value.message


def test_close_twice_and_repr(broker):
    t = transport(broker.bootstrap, sasl())
    assert PASSWORD not in repr(t)
    t.close()
    t.close()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_scram(mechanism):
    jaas = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="alice" password="{PASSWORD}";')
    props = f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={mechanism}\nsasl.jaas.config={jaas}\n"
    with FakeBroker(users={"alice": PASSWORD}, mechanisms=(mechanism,)).running() as b:
        with transport(b.bootstrap, props) as t:
            assert t.send(describe_all()).error_code == 0
        with (transport(b.bootstrap, props.replace(PASSWORD, "nope")) as t,
              pytest.raises(AuthenticationFailed) as err):
            t.send(describe_all())
    assert err.value.message in (
        f"authentication failed at {b.bootstrap} as alice ({mechanism}): "
        f"invalid credentials with SASL mechanism {mechanism}",
        f"authentication failed at {b.bootstrap} as alice ({mechanism}): the broker closed the "
        "connection during authentication")


def test_sasl_oauthbearer_unsecured_and_token_file(tmp_path):
    import base64
    import json

    with FakeBroker(users={}, mechanisms=("OAUTHBEARER",)).running() as b:
        with transport(b.bootstrap, "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
                                    "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer."
                                    'OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="admin";\n'
                       ) as t:
            assert t.send(describe_all()).error_code == 0
        header, payload, signature = b.seen_tokens[-1].split(".")
        assert json.loads(base64.urlsafe_b64decode(header + "==")) == {"alg": "none"}
        assert json.loads(base64.urlsafe_b64decode(payload + "=="))["sub"] == "admin"
        assert signature == ""
        token = tmp_path / "token.jwt"
        token.write_text("eyJ.file.token\n")
        b.oauth_tokens = {"eyJ.file.token"}
        with transport(b.bootstrap, "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
                                    f"sasl.oauthbearer.token.endpoint.url=file://{token}\n") as t:
            assert t.send(describe_all()).error_code == 0


def test_sasl_oauthbearer_client_credentials():
    import http.server
    import threading
    import urllib.parse

    requests = []

    class Idp(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"])).decode()
            requests.append((self.headers["Authorization"], urllib.parse.parse_qs(body)))
            ok = self.headers["Authorization"] == "Basic a3FwbGFuOnMzY3IzdA=="  # kqplan:s3cr3t
            self.send_response(200 if ok else 401)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            if ok:
                self.wfile.write(b'{"access_token": "tok-123", "expires_in": 3600}')

        def log_message(self, *args):
            pass

    idp = http.server.HTTPServer(("127.0.0.1", 0), Idp)
    threading.Thread(target=idp.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{idp.server_address[1]}/token"
    props = ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
             f"sasl.oauthbearer.token.endpoint.url={url}\nsasl.oauthbearer.client.id=kqplan\n"
             "sasl.oauthbearer.client.secret=s3cr3t\nsasl.oauthbearer.scope=kafka\n")
    try:
        with FakeBroker(users={}, mechanisms=("OAUTHBEARER",), oauth_tokens={"tok-123"}).running() as b:
            with transport(b.bootstrap, props) as t:
                assert t.send(describe_all()).error_code == 0
            assert requests[-1][1] == {"grant_type": ["client_credentials"], "scope": ["kafka"]}
            with (transport(b.bootstrap, props.replace("s3cr3t", "wrong")) as t,
                  pytest.raises(AuthenticationFailed) as err):
                t.send(describe_all())
            assert err.value.message == f"the OAuth token endpoint {url} answered HTTP 401"
            assert "wrong" not in str(err.value)
    finally:
        idp.shutdown()
