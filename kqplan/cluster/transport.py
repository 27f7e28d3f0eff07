"""One connection to a Kafka cluster, over kafka-python: the only module that touches its
semi-private networking surface.

kafka-python (3.0.x) has no client-quota API and no public "send this request" call, so this
adapter drives its connection layer directly: ``NetworkSelector`` (the event loop, run on the
caller's thread), ``KafkaConnectionManager.get_connection`` (TCP, TLS, ApiVersions version
negotiation, SASL) and ``KafkaConnection.send_request``. Everything else in kqplan sees
:class:`KafkaTransport` and the :class:`TransportError` family, so a kafka-python upgrade
touches this file only. The request and response classes (``kafka.protocol.*``) are
generated from Kafka's JSON schemas and are public.

Why not ``KafkaAdminClient``: it bootstraps eagerly (a Metadata round trip, then it closes
that connection and opens another to the broker it learned about), retries a wrong password
until its bootstrap timeout, and only logs the real reason. Here the connection to the
bootstrap address itself is used for everything: one TCP connection, ApiVersions (+ SASL),
then the requests kqplan sends. An authentication failure ends the attempt at once and is
reported as such.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import ssl
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import kafka.errors as kerrors
from kafka.net.manager import KafkaConnectionManager
from kafka.net.sasl.oauth import AbstractTokenProvider
from kafka.net.selector import NetworkSelector
from kafka.protocol.api_header import ResponseClassRegistry
from kafka.protocol.metadata import MetadataRequest

from kqplan import __version__
from kqplan.cluster.connection import ConnectionConfig, OAuthSettings
from kqplan.cluster.kerberos import KerberosSettings, install
from kqplan.core.errors import KqplanError

log = logging.getLogger("kqplan.kafka")
_GRACE_S = 2.0  # beyond kafka-python's own per-request timer, in case that timer never fires


class TransportError(KqplanError):
    """A request could not be completed. ``maybe_processed``: it reached the broker, so the
    broker may have acted on it; ``retriable``: trying again may help."""

    maybe_processed = False
    retriable = False


class ConnectionFailed(TransportError):
    """No connection could be set up (refused, unreachable, timed out, TLS handshake)."""

    retriable = True


class AuthenticationFailed(TransportError):
    """The broker rejected the credentials (or the SASL mechanism)."""


class TlsVerificationFailed(TransportError):
    """The broker's certificate is not trusted, or not for the host name dialled; or the broker
    refused the client's certificate (or its absence, where the listener requires one)."""


class UnsupportedApi(TransportError):
    """The broker does not advertise the API (or no version both sides speak)."""

    def __init__(self, message: str, *, api_key: int, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.api_key = api_key


class ResponseLost(TransportError):
    """The request was sent but no answer came (timeout, dropped connection)."""

    maybe_processed = True
    retriable = True
    timed_out = False
    """No answer within request.timeout.ms: the broker may still be working on it."""


# -- kafka-python's logging: never a secret, never noise on the user's terminal ----------------

_redactors: list[ConnectionConfig] = []


class _Forward(logging.Handler):
    """Re-emit kafka-python's records at DEBUG on ``kqplan.kafka``, secrets scrubbed.

    kafka-python logs at ERROR what kqplan reports as an exception anyway ("Connection
    failed: ..."), and at DEBUG whole request frames, SASL credentials included. So its
    loggers are held at INFO (those DEBUG records are never built) and do not propagate;
    what remains is forwarded for ``--debug`` style logging.
    """

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record must not break a request
            message = str(record.msg)
        for config in _redactors:
            message = config.redact(message)
        log.debug("%s: %s", record.name, message)


def _tame_kafka_logging() -> None:
    logger = logging.getLogger("kafka")
    if not any(isinstance(h, _Forward) for h in logger.handlers):
        logger.addHandler(_Forward())
    logger.propagate = False
    if logger.level == logging.NOTSET or logger.level < logging.INFO:
        logger.setLevel(logging.INFO)


# -- OAUTHBEARER ---------------------------------------------------------------------------------

class _TokenProvider(AbstractTokenProvider):  # type: ignore[misc]  # kafka-python is untyped
    """Tokens for SASL/OAUTHBEARER: OIDC client credentials, a token file, or unsigned."""

    def __init__(self, settings: OAuthSettings, timeout_s: float) -> None:
        super().__init__()
        self.settings = settings
        self.timeout_s = timeout_s
        self._token: str | None = None
        self._expires = 0.0

    def token(self) -> str:
        s = self.settings
        now = time.time()
        if self._token is not None and now < self._expires - 30:
            return self._token
        if s.token_endpoint is None:  # unsigned, for brokers with the unsecured validator
            def b64(data: dict[str, Any]) -> str:
                raw = json.dumps(data, separators=(",", ":")).encode()
                return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

            claims = {"sub": s.unsecured_principal, "iat": int(now), "exp": int(now) + 3600}
            self._token, self._expires = f"{b64({'alg': 'none'})}.{b64(claims)}.", now + 3600
        elif s.token_endpoint.startswith("file://"):
            path = urllib.parse.urlparse(s.token_endpoint).path
            try:
                with open(path, encoding="utf-8") as fh:
                    self._token, self._expires = fh.read().strip(), now + 60
            except OSError as exc:
                raise KqplanError(f"cannot read the OAuth token file {path}: {exc.strerror}") from None
        else:
            self._token, self._expires = self._fetch(now)
        return self._token

    def _fetch(self, now: float) -> tuple[str, float]:
        import urllib.error  # with urllib.request, 0.01 s of every connection's start-up otherwise
        import urllib.request

        s = self.settings
        assert s.token_endpoint is not None
        assert s.client_secret is not None
        form = {"grant_type": "client_credentials"} | ({"scope": s.scope} if s.scope else {})
        basic = base64.b64encode(f"{s.client_id}:{s.client_secret.reveal()}".encode()).decode()
        request = urllib.request.Request(
            s.token_endpoint, data=urllib.parse.urlencode(form).encode(), method="POST",
            headers={"Authorization": f"Basic {basic}", "Accept": "application/json",
                     "Content-Type": "application/x-www-form-urlencoded"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                body = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise AuthenticationFailed(f"the OAuth token endpoint {s.token_endpoint} answered "
                                       f"HTTP {exc.code}", hint="check the client id and secret"
                                       ) from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc.__class__.__name__)
            raise ConnectionFailed(f"cannot get an OAuth token from {s.token_endpoint}: {reason}"
                                   ) from None
        token = body.get("access_token") if isinstance(body, dict) else None
        if not isinstance(token, str):
            raise AuthenticationFailed(f"the OAuth token endpoint {s.token_endpoint} returned no "
                                       "access_token")
        return token, now + float(body.get("expires_in", 300))


# -- responses kept as bytes ---------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class RawResponse:
    """A response body as received (after its header), with the version it was sent at."""

    version: int
    body: bytes


class _BytesResponseType:
    """Stands in for a generated response class in kafka-python's frame parser, which calls
    ``parse_header(buffer)`` then ``decode(buffer)``: the header is parsed as usual, the body
    is kept as bytes for kqplan's own decoder (kqplan/cluster/decode.py)."""

    def __init__(self, response_class: Any, version: int) -> None:
        self.response_class = response_class[version]
        self.version = version

    def parse_header(self, buffer: Any) -> Any:
        return self.response_class.parse_header(buffer)

    def decode(self, buffer: Any) -> RawResponse:
        return RawResponse(self.version, bytes(buffer.read()))


class _BytesHeader:
    """A request header whose response type is :class:`_BytesResponseType`; everything else
    (encoding, correlation id) is the wrapped header's."""

    __slots__ = ("_header", "_response_type")
    _header: Any
    _response_type: _BytesResponseType

    def __init__(self, header: Any, response_type: _BytesResponseType) -> None:
        object.__setattr__(self, "_header", header)
        object.__setattr__(self, "_response_type", response_type)

    def get_response_class(self) -> _BytesResponseType:
        return self._response_type

    def __getattr__(self, name: str) -> Any:
        return getattr(self._header, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._header, name, value)


_bytes_variants: dict[Any, Any] = {}


def _bytes_variant(request_class: Any) -> Any:
    """A subclass of a generated request class whose response stays undecoded.

    ``init=False`` tells kafka-python's metaclass not to look for a JSON schema of that
    name; the parent's schema, API key and version negotiation apply unchanged.
    """
    variant = _bytes_variants.get(request_class)
    if variant is None:
        response_class = ResponseClassRegistry._response_class_registry[request_class.API_KEY]

        def with_header(self: Any, correlation_id: int = 0, client_id: str = "kafka-python") -> None:
            request_class.with_header(self, correlation_id=correlation_id, client_id=client_id)
            self._header = _BytesHeader(self._header,
                                        _BytesResponseType(response_class, self.API_VERSION))

        variant = type(request_class)(f"{request_class.__name__}AsBytes", (request_class,),
                                      {"__slots__": (), "with_header": with_header}, init=False)
        _bytes_variants[request_class] = variant
    return variant


# -- the transport -----------------------------------------------------------------------------

class KafkaTransport:
    """A lazily opened connection to one broker reached through the bootstrap list.

    ``send(request)`` returns the decoded response, the version having been negotiated
    (the highest both sides support; kqplan never pins one). Not thread-safe: kafka-python's
    event loop runs on the calling thread, inside each call.
    """

    def __init__(self, config: ConnectionConfig) -> None:
        self.config = config
        if config.sasl_mechanism == "GSSAPI":
            _require_gssapi(config)
        kwargs = config.kafka_kwargs()
        if config.oauth is not None:
            kwargs["sasl_oauth_token_provider"] = _TokenProvider(
                config.oauth, config.request_timeout_ms / 1000)
        kwargs.update(client_software_name="kqplan", client_software_version=__version__,
                      # The event loop runs only inside our calls: no background re-auth races,
                      # and decoding a 10 MB answer is expected to "block" it.
                      slow_task_threshold_secs=0, max_in_flight_requests_per_connection=1)
        _tame_kafka_logging()
        _redactors.append(config)
        self._net = NetworkSelector(**kwargs)
        self._manager = KafkaConnectionManager(self._net, **kwargs)
        self._conn: Any = None
        self._fresh = False  # no request answered yet on this connection
        self._closed = False
        self.connections = 0
        """TCP connections opened (each costs ApiVersions, plus SaslHandshake/Authenticate)."""
        self.sent: Counter[str] = Counter()
        """Requests sent through :meth:`send`, by API name."""

    @property
    def address(self) -> str:
        return self.config.bootstrap

    def __repr__(self) -> str:
        return f"KafkaTransport({self.config.describe()})"

    def __enter__(self) -> KafkaTransport:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- public calls ----------------------------------------------------------------------------

    def connect(self) -> None:
        """Open the connection now (it is opened on first use otherwise)."""
        self._run(self._connection)

    def api_versions(self) -> dict[int, tuple[int, int]]:
        """What the connected broker advertised: api key → (min, max) version."""
        conn = self._run(self._connection)
        return dict(conn.broker_version_data.api_versions)

    def send(self, request: Any, *, timeout_ms: int | None = None) -> Any:
        """Send one request and return its response; raise a :class:`TransportError`."""
        if self._closed:
            raise KqplanError("internal error: the connection to the cluster is closed")
        timeout = timeout_ms if timeout_ms is not None else self.config.request_timeout_ms
        # A connection the broker closed while idle is noticed here, before sending, so the
        # request goes out on a fresh one instead of being "lost" on a dead socket.
        self._net.poll(timeout_ms=0)
        return self._run(self._send, request, timeout)

    def send_raw(self, request_class: Any, *, timeout_ms: int | None = None,
                 **fields: Any) -> RawResponse:
        """Send ``request_class(**fields)``; return the response body undecoded.

        For answers too big for kafka-python's generated decoder to be quick (a describe
        of every quota entity); the version is still negotiated and returned with the body.
        """
        return self.send(_bytes_variant(request_class)(**fields), timeout_ms=timeout_ms)  # type: ignore[no-any-return]

    def send_ahead(self, request_class: Any, **fields: Any) -> Ahead:
        """:meth:`send_raw`'s request, written now; its answer is read by :meth:`answer`. Until
        then nothing reads the socket: the broker works on the answer, and what it has sent
        waits in the kernel's buffers (no thread of this process spends time on it)."""
        if self._closed:
            raise KqplanError("internal error: the connection to the cluster is closed")
        self._net.poll(timeout_ms=0)
        ahead: Ahead = self._run(self._send_ahead, _bytes_variant(request_class)(**fields),
                                 self.config.request_timeout_ms)
        return ahead

    def answer(self, ahead: Ahead) -> RawResponse:
        """The answer to a request :meth:`send_ahead` wrote (raises as :meth:`send` does)."""
        if self._closed:
            raise KqplanError("internal error: the connection to the cluster is closed")
        response: RawResponse = self._run(self._answer, ahead)
        return response

    def broker_kind(self) -> tuple[str | None, str | None]:
        """(version range, metadata mode) from the ApiVersions answer the connection already had:
        no extra round trip. The version is a lower bound (``>=3.9``): the newest release whose
        API set the broker advertises; a release kafka-python does not know yet reads as its newest."""
        conn = self._run(self._connection)
        data = getattr(conn, "broker_version_data", None)
        if data is None:
            return None, None
        found = getattr(data, "broker_version", None)
        version = ">=" + ".".join(map(str, found[:2])) if isinstance(found, tuple) and found else None
        mode = "zookeeper" if _LEADER_AND_ISR in data.api_versions else "kraft"
        return version, mode

    def cluster_id(self) -> str | None:
        """The cluster id from Metadata (v2+), or None when the broker does not report one."""
        # topics=[] asks for no topic metadata; Metadata v0 would read it as "all topics" and
        # has no cluster id anyway, hence min_version=1.
        request = MetadataRequest(topics=[], allow_auto_topic_creation=False, min_version=1)
        try:
            response = self.send(request)
        except UnsupportedApi:
            return None
        cluster_id = getattr(response, "cluster_id", None)
        return cluster_id if isinstance(cluster_id, str) else None

    def close(self) -> None:
        """Close the connection and the event loop; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        try:
            self._manager.close()
            self._net.close()
        finally:
            if self.config in _redactors:
                _redactors.remove(self.config)

    # -- inside the event loop ---------------------------------------------------------------

    def _run(self, coro: Any, *args: Any) -> Any:
        try:
            return self._net.run(coro, *args)
        except kerrors.KafkaError as exc:  # kafka-python's own errors, outside any request
            raise _explain(exc, self.config, sent=False) from None

    async def _connection(self) -> Any:
        conn = self._conn
        if conn is not None and conn.connected:
            return conn
        self._conn = None
        failures: list[TransportError] = []
        for broker in self._manager.cluster.bootstrap_brokers():
            where = f"{broker.host}:{broker.port}"
            self._manager.reset_backoff(broker.node_id)  # our own policy decides on retries
            conn = self._manager.get_connection(
                broker.node_id, timeout_ms=self.config.connect_timeout_ms,
                refresh_metadata_on_err=False)  # True would start kafka-python's bootstrap loop
            self.connections += 1
            try:
                await self._manager.wait_for(conn.init_future,
                                             self.config.connect_timeout_ms + _GRACE_S * 1000)
            except Exception as exc:
                conn.close()
                error = _explain(exc, self.config, sent=False, where=where, waiting_for=_waiting_for(conn))
                if not isinstance(error, ConnectionFailed):
                    raise error from None  # wrong password, untrusted certificate: stop here
                failures.append(error)
                continue
            self._conn, self._fresh = conn, True
            _bounded_reads(conn)
            return conn
        if len(failures) == 1:
            raise failures[0]
        raise ConnectionFailed(
            f"cannot connect to any bootstrap server of {self.config.bootstrap}: "
            + "; ".join(f.message for f in failures), hint=failures[0].hint)

    async def _send(self, request: Any, timeout_ms: int) -> Any:
        return await self._answer(await self._send_ahead(request, timeout_ms))

    async def _send_ahead(self, request: Any, timeout_ms: int) -> Ahead:
        conn = await self._connection()
        # kafka-python refuses a request at once ("Node paused") while a connection is paused —
        # a previous answer still being processed (max_in_flight) or a broker's throttle: wait
        # for it within the request's time instead of reporting a lost connection.
        deadline = time.monotonic() + timeout_ms / 1000
        while conn.paused and conn.connected and time.monotonic() < deadline:
            await self._net.sleep(0.002)
        future = conn.send_request(request, request_timeout_ms=timeout_ms)
        if future.is_done and future.failed():  # refused before writing: not sent
            raise _explain(future.exception, self.config, sent=False, request=request)
        self.sent[request.name.removesuffix("Request")] += 1
        first, self._fresh = self._fresh, False
        # The loop writes a request when the socket is writable: turn it until the bytes are out
        # (kafka-python's transport clears _writing then), or the caller stops polling first.
        while getattr(conn.transport, "_writing", False) and conn.connected and time.monotonic() < deadline:
            await self._net.sleep(0.0005)
        return Ahead(conn, request, future, timeout_ms, first)

    async def _answer(self, ahead: Ahead) -> Any:
        try:
            return await self._manager.wait_for(ahead.future, ahead.timeout_ms + _GRACE_S * 1000)
        except Exception as exc:
            ahead.conn.close()
            raise _explain(exc, self.config, sent=True, request=ahead.request, first=ahead.first) from None


_READ_LIMIT = 1 << 20


def _bounded_reads(conn: Any) -> None:
    """kafka-python drains a readable socket 4 KiB at a time into a list, then joins it: an
    answer already waiting in full (a describe sent ahead: 10 MB at 100k entities) would be held
    three times over at once (+10 MiB at a plan's peak, measured). A plain TCP connection reads
    64 KiB at a time instead, at most 1 MiB a turn (the loop comes back at once for the rest).
    Anything else (TLS, another kafka-python) keeps kafka-python's own reads."""
    transport = getattr(conn, "transport", None)
    sock = getattr(transport, "_sock", None)
    plain = type(transport).__name__ == "KafkaTCPTransport" and hasattr(transport, "_sock_recv")
    if not plain or transport is None or sock is None:
        return

    def sock_recv() -> tuple[bytes, Exception | None]:
        chunks: list[bytes] = []
        size = 0
        while size < _READ_LIMIT:
            try:
                data = sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                return b"".join(chunks), kerrors.KafkaConnectionError(exc)
            if not data:
                return b"".join(chunks), kerrors.KafkaConnectionError("socket disconnected")
            chunks.append(data)
            size += len(data)
        return b"".join(chunks), None

    transport._sock_recv = sock_recv


@dataclass(frozen=True, slots=True)
class Ahead:
    """A request written and not yet answered (:meth:`KafkaTransport.send_ahead`)."""

    conn: Any
    request: Any
    future: Any
    timeout_ms: int
    first: bool


_API_VERSIONS, _SASL_HANDSHAKE, _SASL_AUTHENTICATE = 18, 17, 36
_LEADER_AND_ISR = 4  # advertised by ZooKeeper-mode brokers only (listeners: zkBroker)


def _waiting_for(conn: Any) -> int | None:
    """The API key of the last request on ``conn`` still waiting for its answer, if any.

    Why: Kafka answers a failed SASL authentication and closes the connection at once
    (after ``connection.failed.authentication.delay.ms``), and kafka-python drops an answer
    that arrives in the same read as the end of the connection. Then all that is left is
    "socket disconnected" while a SaslAuthenticate was outstanding: that is an
    authentication failure. Reads kafka-python's frame parser, which keeps the header of
    every request sent until its answer is read.
    """
    pending = getattr(getattr(conn, "parser", None), "in_flight_requests", None)
    if not pending:
        return None
    return getattr(pending[-1], "request_api_key", None)


_CLIENT_CERT_ALERT = re.compile(r"ALERT_(?:BAD_CERTIFICATE|CERTIFICATE_REQUIRED|UNKNOWN_CA|"
                                r"CERTIFICATE_UNKNOWN)")
"""TLS alerts a broker sends about the client's certificate (its own is checked by OpenSSL here)."""

_MISMATCH_HINT = ("if the broker hangs up at the first request, check security.protocol (it is {}): "
                  "a TLS listener needs SSL or SASL_SSL, a SASL listener SASL_PLAINTEXT or SASL_SSL")


def _require_gssapi(config: ConnectionConfig) -> None:
    """Kerberos credentials acquired now (a missing ticket or keytab is not a connection failure)."""
    install(config.kerberos or KerberosSettings())


def _message(exc: BaseException) -> str:
    """kafka-python's text without its ``[Error 58] SaslAuthenticationFailedError:`` prefixes."""
    text = str(exc.args[0]) if exc.args else ""
    prefixes = (f"{type(exc).__name__}: ", "SaslAuthenticationFailedError: ", "Authentication failed: ",
                "Authentication failed during authentication due to ")
    while text.startswith(prefixes):
        text = next(text.removeprefix(p) for p in prefixes if text.startswith(p))
    return text or type(exc).__name__


def _explain(exc: BaseException, config: ConnectionConfig, *, sent: bool, where: str | None = None,
             request: Any = None, first: bool = False,
             waiting_for: int | None = None) -> TransportError:
    """Turn a kafka-python failure into one of ours, in kqplan's words and without secrets."""
    where = where or config.bootstrap
    text = config.redact(_message(exc))
    source = f" in {config.source}" if config.source and not config.source.startswith("(") else ""
    if isinstance(exc, TransportError):
        return exc
    if isinstance(exc, KqplanError):
        return TransportError(exc.message, hint=exc.hint)
    if isinstance(exc, kerrors.KafkaConnectionError) and waiting_for == _SASL_AUTHENTICATE:
        exc = kerrors.SaslAuthenticationFailedError(
            "the broker closed the connection during authentication")
        text = _message(exc)
    if isinstance(exc, kerrors.SaslAuthenticationFailedError):
        return AuthenticationFailed(
            f"authentication failed at {where} as {config.sasl_username or '(no user)'} "
            f"({config.sasl_mechanism}): {text}",
            hint=f"check the Kerberos principal and sasl.kerberos.service.name{source}"
            if config.sasl_mechanism == "GSSAPI" else
            f"check the user name and password{source} (sasl.jaas.config, or "
            "sasl.username/sasl.password)")
    if isinstance(exc, kerrors.UnsupportedSaslMechanismError):
        return AuthenticationFailed(f"the listener at {where} does not accept SASL "
                                    f"{config.sasl_mechanism}: {text}",
                                    hint="set sasl.mechanism to one the broker enables")
    if isinstance(exc, kerrors.IllegalSaslStateError):
        return AuthenticationFailed(f"the listener at {where} does not use SASL",
                                    hint="check security.protocol: PLAINTEXT or SSL for this listener")
    if isinstance(exc, kerrors.IncompatibleBrokerVersion):
        name = type(request).__name__.removesuffix("Request") if request is not None else "an API"
        return UnsupportedApi(f"the broker at {where} does not support {name}: {text}",
                              api_key=getattr(request, "API_KEY", -1))
    context = exc.__context__
    if isinstance(context, ssl.SSLCertVerificationError):
        reason = context.verify_message or context.reason or "certificate verify failed"
        return TlsVerificationFailed(
            f"TLS: the certificate of {where} is not trusted: {reason}",
            hint="set ssl.truststore.location (PEM, PKCS12 or JKS) or ssl.ca.location to the CA that "
                 "signed the broker's certificate; a host-name mismatch needs the name in the certificate")
    if isinstance(context, ssl.SSLError):
        return ConnectionFailed(f"TLS handshake with {where} failed: {context.reason or text}",
                                hint="check security.protocol: is this listener TLS (SSL, SASL_SSL)?")
    if isinstance(exc, kerrors.InvalidReceiveError):
        size = re.search(r"(-?\d+)\s*$", text)
        if size is not None and int(size.group(1)) > config.receive_message_max_bytes:
            return ResponseLost(f"the answer from {where} is larger than receive.message.max.bytes "
                                f"({config.receive_message_max_bytes}): {text}",
                                hint="raise receive.message.max.bytes in --command-config")
        return ResponseLost(f"{where} sent a malformed frame ({text}): not a Kafka answer",
                            hint="check that --bootstrap-server is a Kafka broker listener")
    if sent:
        timed_out = isinstance(exc, (kerrors.KafkaTimeoutError, kerrors.RequestTimedOutError))
        lost = ResponseLost(f"no answer from {where} "
                            f"({'timed out' if timed_out else 'connection lost'}: {text})",
                            # a SASL listener drops a client that skips authentication
                            hint=_MISMATCH_HINT.format(config.security_protocol)
                            if first and not timed_out else None)
        lost.timed_out = timed_out
        return lost
    alert = _CLIENT_CERT_ALERT.search(text)
    if alert is not None and config.security_protocol.uses_tls:
        # The broker's TLS alert about the client's certificate: retrying cannot help.
        if config.tls is not None and (config.tls.cert_file or config.tls.cert_pem):
            return TlsVerificationFailed(
                f"TLS: {where} refused the client certificate ({alert.group(0)})",
                hint="the broker does not trust the certificate's issuer: add its CA to the broker's "
                     "ssl.truststore, or use a certificate signed by a CA the broker trusts")
        return TlsVerificationFailed(
            f"TLS: {where} requires a client certificate ({alert.group(0)})",
            hint="set ssl.keystore.location (a PKCS12, JKS or PEM key store) and ssl.keystore.password")
    if waiting_for in (_API_VERSIONS, _SASL_HANDSHAKE) and isinstance(exc, kerrors.KafkaConnectionError):
        # Reached, then hung up on at the first request: the listener speaks something else.
        return ConnectionFailed(f"{where} closed the connection at the first request ({text})",
                                hint=_MISMATCH_HINT.format(config.security_protocol))
    return ConnectionFailed(f"cannot connect to {where}: {text}",
                            hint="check --bootstrap-server and that the broker is up")
