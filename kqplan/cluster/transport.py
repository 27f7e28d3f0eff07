"""One connection to a Kafka cluster, over kafka-python: with its helpers named below, the only
code that touches kafka-python's semi-private networking surface.

kafka-python (3.0.x) has no client-quota API and no public "send this request" call, so this
adapter drives its connection layer directly: ``NetworkSelector`` (the event loop, run on the
caller's thread), ``KafkaConnectionManager.get_connection`` (TCP, TLS, ApiVersions version
negotiation, SASL) and ``KafkaConnection.send_request``. Everything else in kqplan sees
:class:`KafkaTransport` and the :class:`TransportError` family, so a kafka-python upgrade
touches this file and its helpers only: ``framing`` (responses kept as bytes, socket reads),
``failures`` (the :class:`TransportError` family, kafka-python's failures in kqplan's words)
and ``oauth`` (OAUTHBEARER tokens). The request and response classes (``kafka.protocol.*``) are
generated from Kafka's JSON schemas and are public.

Why not ``KafkaAdminClient``: it bootstraps eagerly (a Metadata round trip, then it closes
that connection and opens another to the broker it learned about), retries a wrong password
until its bootstrap timeout, and only logs the real reason. Here the connection to the
bootstrap address itself is used for everything: one TCP connection, ApiVersions (+ SASL),
then the requests kqplan sends. An authentication failure ends the attempt at once and is
reported as such.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import kafka.errors as kerrors
from kafka.net.manager import KafkaConnectionManager
from kafka.net.selector import NetworkSelector
from kafka.protocol.metadata import MetadataRequest

from kqplan import __version__, deadline
from kqplan.cluster.connection import ConnectionConfig
from kqplan.cluster.failures import ConnectionFailed, NoAnswer, TransportError, UnsupportedApi, explain
from kqplan.cluster.framing import RawResponse, bounded_reads, bytes_variant
from kqplan.cluster.kerberos import KerberosSettings, install
from kqplan.cluster.oauth import TokenProvider
from kqplan.core.errors import KqplanError
from kqplan.deadline import seconds_text

log = logging.getLogger("kqplan.kafka")
_GRACE_S = 2.0  # beyond kafka-python's own per-request timer, in case that timer never fires


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
            kwargs["sasl_oauth_token_provider"] = TokenProvider(
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
        wanted = timeout_ms if timeout_ms is not None else self.config.request_timeout_ms
        timeout, _ = deadline.bound_ms(wanted)
        if timeout <= 0:
            raise self._out_of_time(f"sending {request.name.removesuffix('Request')}")
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
        return self.send(bytes_variant(request_class)(**fields), timeout_ms=timeout_ms)  # type: ignore[no-any-return]

    def send_ahead(self, request_class: Any, **fields: Any) -> Ahead:
        """:meth:`send_raw`'s request, written now; its answer is read by :meth:`answer`. Until
        then nothing reads the socket: the broker works on the answer, and what it has sent
        waits in the kernel's buffers (no thread of this process spends time on it)."""
        if self._closed:
            raise KqplanError("internal error: the connection to the cluster is closed")
        self._net.poll(timeout_ms=0)
        timeout, _ = deadline.bound_ms(self.config.request_timeout_ms)
        if timeout <= 0:
            raise self._out_of_time(f"sending {request_class.__name__.removesuffix('Request')}")
        ahead: Ahead = self._run(self._send_ahead, bytes_variant(request_class)(**fields), timeout)
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
            raise explain(exc, self.config, sent=False) from None

    async def _connection(self) -> Any:
        conn = self._conn
        if conn is not None and conn.connected:
            return conn
        self._conn = None
        failures: list[TransportError] = []
        for broker in self._manager.cluster.bootstrap_brokers():
            where = f"{broker.host}:{broker.port}"
            self._manager.reset_backoff(broker.node_id)  # our own policy decides on retries
            # TCP (and TLS) within socket.connection.setup.timeout.ms, then ApiVersions (and SASL)
            # within request.timeout.ms, as Java clients do; both within --timeout
            connect_ms, connect_cut = deadline.bound_ms(self.config.connect_timeout_ms)
            answer_ms, answer_cut = deadline.bound_ms(self.config.request_timeout_ms)
            if connect_ms <= 0:
                raise self._out_of_time(f"connecting to {where}")
            conn = self._manager.get_connection(
                broker.node_id, timeout_ms=connect_ms + answer_ms + int(_GRACE_S * 1000),
                refresh_metadata_on_err=False)  # True would start kafka-python's bootstrap loop
            self.connections += 1
            try:
                if not await self._wait_connected(conn, connect_ms):
                    conn.close()
                    failures.append(ConnectionFailed(
                        f"cannot connect to {where}: no connection within {seconds_text(connect_ms / 1000)} "
                        f"({self._bound_name(connect_cut, 'socket.connection.setup.timeout.ms')})",
                        hint="check --bootstrap-server, that the broker is up and that no firewall "
                             "drops the connection"))
                    continue
                answer_ms, answer_cut = deadline.bound_ms(self.config.request_timeout_ms)
                if not await self._wait_initialized(conn, answer_ms):
                    conn.close()
                    bound = self._bound_name(answer_cut, "request.timeout.ms")
                    raise NoAnswer(
                        f"connected to {where}, but the broker did not answer within "
                        f"{seconds_text(answer_ms / 1000)} ({bound})",
                        hint="check that it is a Kafka listener and that the broker is healthy; a slow "
                             "broker needs a larger request.timeout.ms in --command-config, or --timeout")
            except NoAnswer:
                raise
            except Exception as exc:
                conn.close()
                error = explain(exc, self.config, sent=False, where=where, waiting_for=_waiting_for(conn))
                if not isinstance(error, ConnectionFailed):
                    raise error from None  # wrong password, untrusted certificate: stop here
                failures.append(error)
                continue
            self._conn, self._fresh = conn, True
            bounded_reads(conn)
            return conn
        if len(failures) == 1:
            raise failures[0]
        raise ConnectionFailed(
            f"cannot connect to any bootstrap server of {self.config.bootstrap}: "
            + "; ".join(f.message for f in failures), hint=failures[0].hint)

    async def _wait_connected(self, conn: Any, timeout_ms: int) -> bool:
        """Until the TCP (and TLS) connection is made, or setting it up failed (True: its
        init_future says how); False when ``timeout_ms`` passed first."""
        give_up = time.monotonic() + timeout_ms / 1000
        while getattr(conn, "transport", None) is None and not conn.init_future.is_done:
            if time.monotonic() >= give_up:
                return False
            await self._net.sleep(0.002)
        return True

    async def _wait_initialized(self, conn: Any, timeout_ms: int) -> bool:
        """Until ApiVersions (and SASL) are done — raising what failed — or False when the broker
        did not answer within ``timeout_ms``."""
        give_up = time.monotonic() + timeout_ms / 1000
        while not conn.init_future.is_done:
            if time.monotonic() >= give_up:
                return False
            await self._net.sleep(0.002)
        if conn.init_future.failed():
            raise conn.init_future.exception
        return True

    @staticmethod
    def _bound_name(cut: bool, setting: str) -> str:
        current = deadline.current()
        return current.text if cut and current is not None else setting

    def _out_of_time(self, doing: str) -> NoAnswer:
        current = deadline.current()
        budget = current.text if current is not None else "the time limit"
        return NoAnswer(f"{budget} reached before {doing}",
                        hint="give the command more time (--timeout), or check the cluster's health")

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
            raise explain(future.exception, self.config, sent=False, request=request)
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
            raise explain(exc, self.config, sent=True, request=ahead.request, first=ahead.first) from None


@dataclass(frozen=True, slots=True)
class Ahead:
    """A request written and not yet answered (:meth:`KafkaTransport.send_ahead`)."""

    conn: Any
    request: Any
    future: Any
    timeout_ms: int
    first: bool


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


def _require_gssapi(config: ConnectionConfig) -> None:
    """Kerberos credentials acquired now (a missing ticket or keytab is not a connection failure)."""
    install(config.kerberos or KerberosSettings())
