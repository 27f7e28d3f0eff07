"""A live Kafka cluster behind the ``Cluster`` protocol: DescribeClientQuotas (API 48) and
AlterClientQuotas (API 49) over :class:`~kqplan.cluster.transport.KafkaTransport`.

Cost, for a fresh process: one TCP connection (ApiVersions, plus SaslHandshake and one
SaslAuthenticate round per SASL step), then one Metadata for :meth:`identity` and one
request per :meth:`describe` or :meth:`alter`. ``describe()`` with the default filter asks
for everything in a single request, however many entities there are.

Retries: describes and validate-only alters change nothing, so they are retried (a bounded
number of times) on transient failures. A real alter is never retried: when its answer is
lost, :class:`AlterOutcomeUnknown` tells the caller, who resolves it by describing; when it
could not be written at all, :class:`AlterNotSent` says that nothing of it reached the broker.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest, DescribeClientQuotasRequest

from kqplan import deadline
from kqplan.cluster.alter_wire import decode_alter_response, encode_alter_request
from kqplan.cluster.brokers import Broker
from kqplan.cluster.connection import ConnectionConfig, load_connection_config
from kqplan.cluster.decode import DescribeResponse, MalformedResponse, decode_describe_response
from kqplan.cluster.failures import TransportError, UnsupportedApi
from kqplan.cluster.framing import RawResponse, written
from kqplan.cluster.transport import Ahead, KafkaTransport
from kqplan.core.cluster import (
    ALL,
    Alteration,
    AlterNotSent,
    AlterOutcomeUnknown,
    ClusterIdentity,
    DescribeFilter,
    EntityResult,
    error_name,
)
from kqplan.core.entity import Entity
from kqplan.core.errors import KqplanError
from kqplan.core.sensors import ClusterSettings
from kqplan.core.state import QuotaState
from kqplan.perf import paused_gc

log = logging.getLogger("kqplan.kafka")
T = TypeVar("T")

CLUSTER_AUTHORIZATION_FAILED = 31
_RETRIABLE_CODES = frozenset({7})  # REQUEST_TIMED_OUT (e.g. a broker forwarding to a busy controller)
_DENIED_HINT = ("grant the principal {operation} on the cluster, e.g. kafka-acls.sh --add "
                "--allow-principal User:NAME --operation {operation} --cluster")


def quota_apis_unsupported(address: str) -> KqplanError:
    return KqplanError("this cluster does not support client quota APIs (Kafka ≥ 2.6 required)",
                       hint=f"the broker at {address} does not offer DescribeClientQuotas/"
                            "AlterClientQuotas; if it is a KRaft controller listener, use a "
                            "broker listener")


class KafkaCluster:
    """The ``Cluster`` protocol over the Kafka wire. Close it (or use ``with``)."""

    def __init__(self, config: ConnectionConfig, *, attempts: int = 3,
                 retry_backoff_s: float = 0.25) -> None:
        self.config = config
        self.transport = KafkaTransport(config)
        self.attempts = attempts
        self.retry_backoff_s = retry_backoff_s
        self._identity: ClusterIdentity | None = None
        self._worker: threading.Thread | None = None
        self._ahead: Ahead | None = None
        self._ahead_error: BaseException | None = None
        self._lock = threading.Lock()
        self._worker_done = False
        self._abandoned = False
        self._brokers: tuple[Broker, ...] = ()
        self._settings: ClusterSettings | None = None

    @classmethod
    def connect(cls, bootstrap: str | None, command_config: Path | None, *,
                env: Mapping[str, str] | None = None) -> KafkaCluster:
        """From ``--bootstrap-server``/``--command-config`` (or their KQPLAN_* variables);
        the connection itself opens on first use."""
        return cls(load_connection_config(bootstrap, command_config, env=env))

    def __repr__(self) -> str:
        return f"KafkaCluster({self.config.describe()})"

    def __enter__(self) -> KafkaCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the Cluster protocol --------------------------------------------------------------------

    def identity(self) -> ClusterIdentity:
        self._join()
        return self._read_identity()

    def _read_identity(self) -> ClusterIdentity:
        if self._identity is None:
            cluster_id, brokers = self._retrying(self._metadata, "read the cluster id")
            version, mode = self.transport.broker_kind()
            self._identity = ClusterIdentity(cluster_id, self.config.bootstrap, version, mode, brokers)
        return self._identity

    def _metadata(self) -> tuple[str | None, int | None]:
        """The cluster id and the live broker count, from one Metadata answer (v1+; the transport's
        ``cluster_id`` request, whose broker list budgets need too). (None, None) when the broker
        does not serve Metadata v1. The brokers are kept for :meth:`broker_settings`."""
        from kafka.protocol.metadata import MetadataRequest

        # topics=[] asks for no topic metadata (v0 would read it as "all topics")
        request = MetadataRequest(topics=[], allow_auto_topic_creation=False, min_version=1)
        try:
            response = self.transport.send(request)
        except UnsupportedApi:
            return None, None
        cluster_id = getattr(response, "cluster_id", None)
        brokers = getattr(response, "brokers", None)
        count = len(brokers) if isinstance(brokers, list | tuple) and brokers else None
        self._brokers = tuple(Broker(int(b.node_id), str(b.host), int(b.port)) for b in brokers or ())
        return (cluster_id if isinstance(cluster_id, str) else None), count

    def broker_settings(self) -> ClusterSettings:
        """Each live broker's quota settings (:mod:`kqplan.cluster.brokers`), read once per
        connection (a command's plan and its ``--verify-enforcement`` share them). Ask after
        :meth:`describe`: a describe sent ahead is answered first on the one connection."""
        from kqplan.cluster.brokers import read_settings

        if self._settings is None:
            self.identity()
            self._take_ahead(use=False)
            self._settings = (read_settings(self._brokers, self.config, self.transport) if self._brokers
                              else ClusterSettings())
        return self._settings

    def describe_ahead(self) -> None:
        """Read the identity and send a describe of everything, in a thread, now: the broker
        (another process) works on its answer while the caller loads its manifests. The next
        call waits for the thread; ``describe(ALL)`` reads the answer (nothing reads it before,
        so receiving 10 MB never competes with the caller for the GIL). If the caller closes
        first, the thread is left to end on its own: a slow broker never delays an error found
        in the manifests."""
        if self._worker is None:
            self._worker = threading.Thread(target=self._send_ahead, name="kqplan-describe", daemon=True)
            self._worker.start()

    def _send_ahead(self) -> None:
        try:
            self._read_identity()
        except BaseException as exc:  # raised in the caller's thread by its next call (_join)
            self._ahead_error = exc
        else:
            # on failure describe() sends it again, and reports what fails as it always does
            with contextlib.suppress(KqplanError):
                self._ahead = self.transport.send_ahead(DescribeClientQuotasRequest, max_version=1,
                                                        strict=False, components=[])
        finally:
            with self._lock:
                self._worker_done = True
                if self._abandoned:
                    self.transport.close()

    def _join(self) -> None:
        """Wait for the thread; raise what stopped it reading the identity (its attempts were
        the attempts: a dead broker is not tried as many times again)."""
        if self._worker is not None:
            self._worker.join()
            self._worker = None
        if self._ahead_error is not None:
            error, self._ahead_error = self._ahead_error, None
            raise error

    def _take_ahead(self, *, use: bool) -> Ahead | None:
        """The describe the thread sent, to ``use``; else its answer is read and dropped (one
        request in flight per connection: it must be answered before the next is sent)."""
        self._join()
        ahead, self._ahead = self._ahead, None
        if ahead is not None and not use:
            with contextlib.suppress(KqplanError):
                self.transport.answer(ahead)
            ahead = None
        return ahead

    def describe(self, flt: DescribeFilter = ALL) -> QuotaState:
        """One DescribeClientQuotas; ``ALL`` (no components, not strict) is everything."""
        C = DescribeClientQuotasRequest.ComponentData
        ahead = self._take_ahead(use=flt == ALL)

        def send() -> DescribeResponse:
            # Negotiated, capped at what kqplan's decoder reads: v0 and v1 are every released
            # version; a v2 (KIP-888's multi-filter describe, not in any release) would need
            # its layout first. ALL is one request whatever the version.
            nonlocal ahead
            if ahead is not None:
                sent, ahead = ahead, None  # a retry asks again
                raw = self.transport.answer(sent)
            else:
                raw = self._send_raw(
                    DescribeClientQuotasRequest, max_version=1, strict=flt.strict,
                    components=[C(entity_type=c.entity_type, match_type=int(c.match_type), match=c.match)
                                for c in flt.components])
            try:
                return decode_describe_response(raw.body, raw.version)
            except MalformedResponse as exc:
                raise KqplanError(f"the broker at {self.config.bootstrap} sent a response kqplan "
                                  f"cannot read: {exc}") from None

        # 100k entities are a few hundred thousand small objects: with the collector paused
        # they are built in a fraction of the time (reference §5a; benchmarks/describe.py).
        with paused_gc():
            response = self._retrying(send, "describe client quotas", check=_describe_error)
        return response.state or {}

    def alter(self, alterations: Sequence[Alteration], *, validate_only: bool) -> list[EntityResult]:
        """One AlterClientQuotas; one result per entity, in the broker's order."""
        self._take_ahead(use=False)
        if not alterations:
            return []
        sent: dict[Entity, Alteration] = {}
        for alteration in alterations:
            if alteration.entity in sent:
                # Kafka would apply the first and report an error for both: never send that.
                raise KqplanError(f"internal error: {alteration.entity.display} twice in one alter")
            sent[alteration.entity] = alteration

        def body(version: int) -> bytes:
            return encode_alter_request(version, alterations, validate_only=validate_only)

        def request() -> Any:  # written by hand (alter_wire): kafka-python's classes are slow at 1,000s
            return written(AlterClientQuotasRequest, body, validate_only=validate_only, entries=[])

        what = "validate client quota changes" if validate_only else "alter client quotas"
        if validate_only:  # changes nothing: as safe to repeat as a describe
            raw = self._retrying(lambda: self._send(request()), what)
        else:
            try:
                raw = self._send(request())
            except TransportError as exc:
                if not exc.maybe_processed:
                    raise AlterNotSent(exc.message, hint=exc.hint) from None
                raise AlterOutcomeUnknown(
                    f"the answer to an alter of {len(alterations)} entities was lost "
                    f"({exc.message}); it may or may not have been applied",
                    timed_out=bool(getattr(exc, "timed_out", False))) from None
        try:
            results = decode_alter_response(raw.body, raw.version)
        except MalformedResponse as exc:
            raise KqplanError(f"the broker's answer to {what} cannot be read ({exc}); "
                              "its outcome is unknown",
                              hint="run `kqplan plan` to see the state") from None
        for result in results:
            if result.entity not in sent:
                raise KqplanError(f"the broker answered for {result.entity.display}, which was not sent",
                                  hint="this is a broker bug; run `kqplan plan` to see the state")
        return results

    def close(self) -> None:
        with self._lock:
            if self._worker is not None and not self._worker_done:
                self._abandoned = True  # the thread closes the transport when it ends
                return
        self.transport.close()

    # -- helpers ---------------------------------------------------------------------------------

    def _send(self, request: Any) -> Any:
        try:
            return self.transport.send(request)
        except UnsupportedApi:
            raise quota_apis_unsupported(self.config.bootstrap) from None

    def _send_raw(self, request_class: Any, **fields: Any) -> RawResponse:
        try:
            return self.transport.send_raw(request_class, **fields)
        except UnsupportedApi:
            raise quota_apis_unsupported(self.config.bootstrap) from None

    def _retrying(self, call: Callable[[], T], what: str,
                  check: Callable[[T], KqplanError | None] | None = None) -> T:
        """``call()`` until it works, at most ``attempts`` times, on transient failures only, and
        not after ``default.api.timeout.ms`` (or ``--timeout``) has passed."""
        started = time.monotonic()
        give_up = started + self.config.api_timeout_ms / 1000

        def no_more(attempt: int, pause: float) -> bool:
            left = deadline.remaining()
            return (attempt == self.attempts or time.monotonic() + pause >= give_up
                    or (left is not None and left <= pause))

        for attempt in range(1, self.attempts + 1):
            pause = self.retry_backoff_s * 2 ** (attempt - 1)
            try:
                result = call()
            except TransportError as exc:
                if not exc.retriable:
                    raise
                if no_more(attempt, pause):
                    # say what was really waited: each attempt has its own request timeout
                    tries = f"{attempt} attempt{'s' if attempt > 1 else ''}"
                    exc.message = (f"{exc.message}; gave up after {tries} "
                                   f"({time.monotonic() - started:.1f} s in all)")
                    exc.args = (exc.message,)
                    raise
                log.debug("%s: attempt %d failed (%s); retrying", what, attempt, exc.message)
            else:
                error = check(result) if check is not None else None
                if error is None:
                    return result
                if no_more(attempt, pause) or getattr(error, "code", None) not in _RETRIABLE_CODES:
                    raise error
                log.debug("%s: attempt %d failed (%s); retrying", what, attempt, error.message)
            time.sleep(pause)
        raise AssertionError("unreachable")


class DescribeFailed(KqplanError):
    """The broker answered a describe with an error code."""

    def __init__(self, code: int, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.code = code


def _describe_error(response: DescribeResponse) -> KqplanError | None:
    code = response.error_code
    if code == 0:
        return None
    text = response.error_message or ""
    if code == CLUSTER_AUTHORIZATION_FAILED:
        return DescribeFailed(code, "not authorized to describe client quotas "
                              "(DESCRIBE_CONFIGS on the cluster)",
                              hint=_DENIED_HINT.format(operation="DescribeConfigs"))
    return DescribeFailed(code, f"describe client quotas failed: {error_name(code)}"
                          + (f": {text}" if text else ""))
