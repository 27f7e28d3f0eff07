"""The sandbox broker: asyncio listeners speaking the Kafka wire, in front of the quota engine.

One engine (the cluster's quota state) serves every listener; requests are handled one at a
time under a lock, which is also what makes a committed alter and its snapshot write atomic.
``Sandbox.start`` runs it on a background thread for tests and ``--sandbox``;
``serve_forever`` runs it in the foreground for ``kqplan sandbox``. The values it is configured
with are in ``config``; who a client is and what it may do (SASL, ACLs, SCRAM RPCs), in ``sasl``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import signal
import ssl
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TextIO

from kqplan.core.entity import Entity, visible
from kqplan.core.errors import KqplanError
from kqplan.core.state import QuotaState
from kqplan.files import write_atomically
from kqplan.sandbox import apis, flavors, scram
from kqplan.sandbox.config import (
    Listener,
    Operation,
    RequestRecord,
    SandboxConfig,
)
from kqplan.sandbox.connection import Close, Connection
from kqplan.sandbox.engine import AlterEntry, AlterResult, DescribeResult, QuotaEngine, Staged
from kqplan.sandbox.faults import Drop, Fault, Faults
from kqplan.sandbox.flavors import new_engine
from kqplan.sandbox.sasl import SaslMixin
from kqplan.snapshot.codec import snapshot_to_json

MAX_FRAME = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default
WARM_UP_DELAY = 0.05  # seconds after a committed alter before its describe-all answer is encoded
FAILED_AUTHENTICATION_DELAY = 0.1  # seconds; Kafka's connection.failed.authentication.delay.ms default


class Sandbox(SaslMixin):
    """A running sandbox broker (see ``start`` and ``serve_forever``)."""

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        seed = config.seed
        if seed is None and config.state_file is not None and config.state_file.exists():
            from kqplan.snapshot.file import read_snapshot

            seed, _ = read_snapshot(config.state_file)
        self.engine = new_engine(config.flavor, seed, resolve_host=config.resolve_host)
        self.scram = scram.ScramStore()
        for name, password in config.scram_users.items():
            self.scram.seed(name, password)
        self.cluster_id = config.cluster_id
        self.faults = Faults(lag_ms=config.lag_ms)
        for fault in config.faults:
            self.faults.add(fault)
        self._records: deque[RequestRecord] = deque(maxlen=config.request_history)
        self._records_lock = threading.Lock()  # recorded with and without ``_lock`` held
        self.addresses: list[tuple[str, int]] = []
        self._lock = threading.Lock()
        self._connections = 0
        self._stale: tuple[float, QuotaEngine] | None = None  # (until, engine before the alter)
        self._describe_cache: dict[int, tuple[bytes, int | None]] = {}
        """Describe-all answers by version (body, entry count), until the next committed alter."""
        self._generation = 0  # committed alters so far: a warm-up of an older state is dropped
        self._log_file: TextIO | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._servers: list[asyncio.base_events.Server] = []
        self._thread: threading.Thread | None = None

    # -- addresses and state -------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """HOST:PORT of the first listener."""
        host, port = self.addresses[0]
        return f"{host}:{port}"

    def address(self, index: int) -> str:
        host, port = self.addresses[index]
        return f"{host}:{port}"

    @property
    def state(self) -> QuotaState:
        with self._lock:
            return self.engine.state

    @property
    def requests(self) -> list[RequestRecord]:
        """The requests served, oldest first: the most recent ``config.request_history`` of them."""
        with self._records_lock:
            return list(self._records)

    def requests_of(self, api_key: int) -> list[RequestRecord]:
        return [r for r in self.requests if r.api_key == api_key]

    # -- running -------------------------------------------------------------------------------

    @classmethod
    @contextlib.contextmanager
    def start(cls, config: SandboxConfig) -> Iterator[Sandbox]:
        """Run on a background thread until the block ends."""
        sandbox = cls(config)
        loop = asyncio.new_event_loop()
        sandbox._loop = loop
        thread = threading.Thread(target=loop.run_forever, name="kqplan-sandbox", daemon=True)
        thread.start()
        sandbox._thread = thread
        try:
            asyncio.run_coroutine_threadsafe(sandbox._listen(), loop).result(10)
            yield sandbox
        finally:
            sandbox.stop()

    def stop(self) -> None:
        loop, self._loop = self._loop, None
        if loop is None:
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(5)
        loop.close()
        if self._log_file is not None:
            self._log_file.close()

    @classmethod
    def serve_forever(cls, config: SandboxConfig, announce: Callable[[str], None]) -> None:
        """Run in the foreground until SIGINT/SIGTERM; ``announce`` gets "listening on …"."""

        async def main() -> None:
            sandbox = cls(config)
            sandbox._loop = asyncio.get_running_loop()
            stopped = asyncio.Event()
            for sig in (signal.SIGINT, signal.SIGTERM):
                # before announcing: a caller may signal as soon as it reads the line
                sandbox._loop.add_signal_handler(sig, stopped.set)
            await sandbox._listen()
            for host, port in sandbox.addresses:
                announce(f"listening on {host}:{port}")
            await stopped.wait()
            await sandbox._shutdown()
            if sandbox._log_file is not None:
                sandbox._log_file.close()

        asyncio.run(main())

    async def _listen(self) -> None:
        if self.config.request_log is not None:
            self._log_file = self.config.request_log.open("a", encoding="utf-8")
        for listener in self.config.listeners:
            context = None
            if listener.tls_cert is not None:
                context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
                context.load_cert_chain(listener.tls_cert, listener.tls_key)

            def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      listener: Listener = listener) -> Any:
                return self._serve(reader, writer, listener)

            server = await asyncio.start_server(serve, self.config.host, listener.port, ssl=context)
            self._servers.append(server)
            self.addresses.append((self.config.host, server.sockets[0].getsockname()[1]))

    async def _shutdown(self) -> None:
        for server in self._servers:
            server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- one connection ------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     listener: Listener) -> None:
        self._connections += 1
        conn = Connection(self._connections, listener, self.addresses[self.config.listeners.index(listener)])
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                if not 0 <= size <= self._receive_limit(conn):
                    # nothing of the body is read: a size prefix alone allocates nothing
                    self._refuse_size(conn, size, writer)
                    return
                payload = await reader.readexactly(size)
                if conn.raw_sasl:
                    token, failure = self._sasl_step(conn, payload)
                    if failure is not None:
                        return  # SaslHandshake v0: a failure is a closed connection
                    conn.raw_sasl = conn.user is None  # SCRAM: a second round trip
                    writer.write(struct.pack(">i", len(token)) + token)
                    await writer.drain()
                    continue
                try:
                    answer = await self._answer(conn, payload)
                except _AnswerThenClose as last:
                    writer.write(last.answer)
                    await writer.drain()
                    # connection.failed.authentication.delay.ms (100 by default): Kafka holds a
                    # failed connection open that long; a client reading the SCRAM failure
                    # otherwise can meet the reset before the answer
                    await asyncio.sleep(FAILED_AUTHENTICATION_DELAY)
                    return
                writer.write(answer)
                await writer.drain()
        except (Close, asyncio.IncompleteReadError, ConnectionError, ssl.SSLError, struct.error):
            pass
        except asyncio.CancelledError:
            # Stopping: end the handler normally. A cancelled handler task makes Python 3.11's
            # StreamReaderProtocol callback print a CancelledError traceback on stderr.
            pass
        except OSError as exc:  # not the peer's fault: never called a malformed request
            sys.stderr.write(f"kqplan sandbox: closed connection {conn.id} from "
                             f"{_peer(writer)}: I/O error {_os_error(exc)}\n")
        except Exception as exc:  # a request no decoder could read: what Kafka does is hang up
            sys.stderr.write(f"kqplan sandbox: closed connection {conn.id} from "
                             f"{_peer(writer)}: malformed request ({type(exc).__name__})\n")
        finally:
            writer.close()

    def _receive_limit(self, conn: Connection) -> int:
        """The largest frame this connection may send now: ``sasl.server.max.receive.size``
        until a SASL listener's client has authenticated, then ``socket.request.max.bytes``."""
        if conn.listener.sasl and conn.user is None:
            return self.config.sasl_server_max_receive_size
        return MAX_FRAME

    def _refuse_size(self, conn: Connection, size: int, writer: asyncio.StreamWriter) -> None:
        """A SASL client's frame over the bound before authentication: one line, as Kafka logs
        "Failed authentication … (Failing SASL authentication due to invalid receive size)"."""
        if conn.listener.sasl and conn.user is None:
            limit = self.config.sasl_server_max_receive_size
            sys.stderr.write(f"kqplan sandbox: closed connection {conn.id} from {_peer(writer)} before "
                             f"authentication: a frame of {size} bytes (sasl.server.max.receive.size "
                             f"is {limit})\n")

    async def _answer(self, conn: Connection, payload: bytes) -> bytes:
        header = apis.read_header(payload)
        key, version = header.api_key, header.api_version
        if key == apis.API_VERSIONS:
            self._record(header, conn)
            answered, body = flavors.api_versions(self.config.flavor, version)
            return apis.frame(header.correlation_id, key, answered, body)
        low_high = apis.SUPPORTED.get(key)
        if low_high is None or not low_high[0] <= version <= low_high[1]:
            raise Close  # Kafka cannot parse it and closes the connection
        if conn.listener.sasl and conn.user is None and key not in (apis.SASL_HANDSHAKE,
                                                                    apis.SASL_AUTHENTICATE):
            raise Close  # Kafka closes a SASL connection that skips authentication
        request = apis.decode(header, payload)
        faults = self.faults.take(key, validate_only=bool(getattr(request, "validate_only", False)))
        delay = sum(f.delay_ms for f in faults)
        if delay:
            await asyncio.sleep(delay / 1000)
        drop = next((f.drop for f in faults if f.drop is not None), None)
        if drop is Drop.BEFORE:
            self._record(header, conn)
            raise Close
        body, failed_auth = self._handle(header, request, conn, faults)
        if drop is Drop.AFTER:
            raise Close
        held = sum(f.answer_delay_ms for f in faults)
        if held:
            await asyncio.sleep(held / 1000)
        answer = apis.frame(header.correlation_id, key, version, body)
        if failed_auth:
            # Kafka sends the failure and closes at once
            raise _AnswerThenClose(answer)
        return answer

    def _handle(self, header: apis.Header, request: Any, conn: Connection,
                faults: list[Fault]) -> tuple[bytes, bool]:
        key, version = header.api_key, header.api_version
        host, port = conn.address
        if key == apis.METADATA:
            self._record(header, conn)
            return apis.metadata(version, host, port, self.cluster_id, self.config.brokers), False
        if key == apis.DESCRIBE_CLUSTER:
            self._record(header, conn)
            return apis.describe_cluster(version, host, port, self.cluster_id, self.config.brokers), False
        if key == apis.SASL_HANDSHAKE:
            return self._sasl_handshake(header, request, conn), False
        if key == apis.SASL_AUTHENTICATE:
            return self._sasl_authenticate(header, request, conn)
        if key == apis.DESCRIBE_QUOTAS:
            return self._describe(header, request, conn, faults), False
        if key == apis.DESCRIBE_SCRAM:
            return self._describe_scram(header, request, conn), False
        if key == apis.DESCRIBE_CONFIGS:
            self._record(header, conn)
            return apis.describe_configs(version, request, self.config.brokers,
                                         self.config.described_configs(), self.config.broker_configs,
                                         allowed=self._allowed(conn, Operation.DESCRIBE_CONFIGS)), False
        if key == apis.ALTER_SCRAM:
            return self._alter_scram(header, request, conn), False
        return self._alter(header, request, conn, faults), False

    def _describe(self, header: apis.Header, request: Any, conn: Connection,
                  faults: list[Fault]) -> bytes:
        version = header.api_version
        error = next((f for f in faults if f.error_code is not None), None)
        components, strict = apis.describe_request(request)
        everything = not components and not strict  # what plan asks for, often: cache it
        with self._lock:
            cacheable = False
            if error is not None:
                result = DescribeResult(error.error_code or 0, error.error_message, None)
            elif not self._allowed(conn, Operation.DESCRIBE_CONFIGS):
                result = self.engine.describe_denied()
            elif self._stale is not None and time.monotonic() < self._stale[0]:
                # read-after-write lag: the state before the alter
                result = self._stale[1].describe(components, strict, version=version)
            elif everything and version in self._describe_cache:
                body, count = self._describe_cache[version]
                self._record(header, conn, entries=count, codes=(0,))
                return body
            else:
                result = self.engine.describe(components, strict, version=version)
                cacheable = everything
            body = apis.describe_response(version, result)
            if cacheable:
                self._describe_cache[version] = (body, _count(result))
            self._record(header, conn, entries=_count(result), codes=(result.error_code,))
        return body

    def _alter(self, header: apis.Header, request: Any, conn: Connection, faults: list[Fault]) -> bytes:
        version = header.api_version
        entries, validate_only = apis.alter_request(request)
        whole = next((f for f in faults if f.error_code is not None and not f.entities), None)
        named = {entity: f for f in faults for entity in f.entities}
        with self._lock:
            if whole is not None:
                results = [AlterResult(whole.error_code or 0, whole.error_message, e.entity) for e in entries]
            elif not self._allowed(conn, Operation.ALTER_CONFIGS):
                results = self.engine.alter_denied(entries)
            else:
                results = self._alter_engine(entries, validate_only, version, named)
            self._record(header, conn, entries=len(entries), codes=tuple(r.error_code for r in results),
                         validate_only=validate_only)
        return apis.alter_response(version, results)

    def _warm_up(self, versions: tuple[int, ...]) -> None:
        """After a committed alter (the lock held): the describe-all answers are encoded again in
        a thread, ready when the next plan asks (0.2 s at 100k entities, otherwise paid by the
        first describe after every apply). It waits a moment first, so that an apply's next
        batch does not share the process with an encoding it would make useless; an answer of a
        state another alter replaced meanwhile is dropped; a describe that comes first encodes
        its own, as before."""
        self._describe_cache.clear()
        self._generation += 1
        generation = self._generation
        results = [(v, self.engine.describe([], False, version=v)) for v in versions]

        def encode() -> None:
            time.sleep(WARM_UP_DELAY)
            if self._generation != generation:  # another alter came: its own warm-up follows
                return
            # the rows are immutable (an alter replaces them), so this runs outside the lock
            try:
                done = {v: (apis.describe_response(v, r), _count(r)) for v, r in results}
            except Exception:  # only a head start is lost: the next describe encodes its own
                return
            with self._lock:
                if self._generation == generation:
                    for v, answer in done.items():
                        self._describe_cache.setdefault(v, answer)

        threading.Thread(target=encode, name="kqplan-sandbox-warm-up", daemon=True).start()

    def _alter_engine(self, entries: list[AlterEntry], validate_only: bool, version: int,
                      named: Mapping[Entity, Fault]) -> list[AlterResult]:
        failing: list[AlterResult] = []
        if named:
            kept = []
            for entry in entries:
                fault = named.get(entity) if (entity := _entity(entry)) is not None else None
                if fault is None:
                    kept.append(entry)
                else:
                    failing.append(AlterResult(fault.error_code or 0, fault.error_message, entry.entity))
            entries = kept
        before = self.engine.state if self.faults.lag_ms and not validate_only else None
        staged = self.engine.stage(entries, validate_only, version=version)
        if not staged.changed:
            return staged.results + failing
        problem = self._persist(staged)
        if problem is not None:
            # nothing was committed: the old state stays, and is what describe serves
            sys.stderr.write(f"kqplan sandbox: storage error: {problem}; an alter of {len(entries)} "
                             "entities was refused with a storage error, the state is unchanged\n")
            return self.engine.storage_failure(entries, staged) + failing
        self.engine.commit(staged)
        self._warm_up(tuple(self._describe_cache) or (1,))
        if before is not None:
            stale = new_engine(self.config.flavor, before, resolve_host=self.config.resolve_host)
            self._stale = (time.monotonic() + self.faults.lag_ms / 1000, stale)
        return staged.results + failing

    def _persist(self, staged: Staged) -> str | None:
        """Write the state an alter leaves to ``--state`` before it is committed and answered
        (temp file, fsync, rename, fsync of the directory); what went wrong, or None."""
        path = self.config.state_file
        if path is None:
            return None
        text = self._snapshot(staged.state)
        try:
            write_atomically(path, text)
        except OSError as exc:
            return f"cannot write --state {visible(str(path))}: {_os_error(exc)}" + self._put_back(path, text)
        except KqplanError as exc:  # a directory in the way, or none to write in: names the path
            return f"--state: {exc.message}"
        return None

    def _snapshot(self, state: QuotaState) -> str:
        return snapshot_to_json(state, self.cluster_id, kafka_version=self.config.flavor.release,
                                mode=self.config.flavor.mode)

    def _put_back(self, path: Path, refused: str) -> str:
        """After a failed write: when the new file was renamed into place and only syncing its
        directory failed, the file holds the alter being refused — write the committed state
        back. What could not be undone, in words ('' when nothing is left to say)."""
        try:
            if path.read_bytes() != refused.encode():
                return ""
            write_atomically(path, self._snapshot(self.engine.state))
        except OSError as exc:
            return (f"; writing the previous state back failed too ({_os_error(exc)}): the file may "
                    "hold the refused alter")
        return "; the previous state was written back"

    def _record(self, header: apis.Header, conn: Connection, *, entries: int | None = None,
                codes: tuple[int, ...] = (), validate_only: bool | None = None) -> None:
        record = RequestRecord(header.api_key, apis.API_NAMES.get(header.api_key, str(header.api_key)),
                               header.api_version, header.client_id, conn.id, entries, codes, validate_only)
        with self._records_lock:
            self._records.append(record)
            if self._log_file is not None:
                try:
                    self._log_file.write(json.dumps(record.to_json()) + "\n")
                    self._log_file.flush()
                except OSError as exc:
                    # a diagnostic: losing it must not fail the request (an alter is already
                    # committed here); stop at the first failure rather than tear later lines
                    path = self.config.request_log
                    sys.stderr.write(f"kqplan sandbox: storage error: cannot write --request-log "
                                     f"{visible(str(path))}: {_os_error(exc)}; request logging stopped\n")
                    log_file, self._log_file = self._log_file, None
                    with contextlib.suppress(OSError):
                        log_file.close()


def _count(result: DescribeResult) -> int | None:
    return None if result.entries is None else len(result.entries)


def _os_error(exc: OSError) -> str:
    """``[Errno 28] ENOSPC: No space left on device``: the number, its name and its text."""
    if exc.errno is None:
        return str(exc)
    name = errno.errorcode.get(exc.errno, "?")
    return f"[Errno {exc.errno}] {name}: {exc.strerror or os.strerror(exc.errno)}"


def _peer(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else "?"


class _AnswerThenClose(Exception):
    def __init__(self, answer: bytes) -> None:
        super().__init__()
        self.answer = answer


def _entity(entry: AlterEntry) -> Entity | None:
    try:
        return Entity.of(entry.entity)
    except (ValueError, TypeError):
        return None  # a malformed entity: the engine reports it

# the configuration values moved to ``config``; named here too for callers that import them from here
