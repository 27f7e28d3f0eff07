"""Who a sandbox client is and what it may do: the SASL steps of the ``Sandbox`` (SaslHandshake,
SaslAuthenticate with PLAIN or SCRAM, v0's bare tokens), the ACL check every RPC makes, and the
SCRAM credential RPCs (Describe/AlterUserScramCredentials) that check it."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from kqplan.sandbox import apis, scram
from kqplan.sandbox.config import Operation, SandboxConfig
from kqplan.sandbox.connection import Close, Connection


class SaslMixin:
    """The SASL and SCRAM steps the ``Sandbox`` inherits; it sets these attributes."""

    config: SandboxConfig
    scram: scram.ScramStore
    _lock: threading.Lock

    if TYPE_CHECKING:  # the Sandbox's request log (broker.py)
        def _record(self, header: apis.Header, conn: Connection, *, entries: int | None = None,
                    codes: tuple[int, ...] = (), validate_only: bool | None = None) -> None: ...

    def _sasl_handshake(self, header: apis.Header, request: Any, conn: Connection) -> bytes:
        version = header.api_version
        self._record(header, conn)
        mechanisms = list(self.config.sasl_mechanisms) if conn.listener.sasl else []
        body, ok = apis.sasl_handshake(version, request.mechanism, mechanisms)
        conn.mechanism = request.mechanism if ok else None
        conn.raw_sasl = ok and version == 0
        conn.scram = (scram.ScramServer(request.mechanism, self.scram.credential)
                      if ok and request.mechanism in scram.MECHANISM_TYPES else None)
        return body

    def _sasl_authenticate(self, header: apis.Header, request: Any, conn: Connection) -> tuple[bytes, bool]:
        version = header.api_version
        self._record(header, conn)
        if conn.mechanism is None:
            raise Close
        token, failure = self._sasl_step(conn, bytes(request.auth_bytes))
        return apis.sasl_authenticate(version, failure, token), failure is not None

    def _sasl_step(self, conn: Connection, token: bytes) -> tuple[bytes, str | None]:
        """One client token: (the server's answer, None) or (b"", the failure message)."""
        if conn.scram is None:
            ok = self._authenticate(conn, token)
            return b"", None if ok else apis.PLAIN_FAILURE
        try:
            answer = conn.scram.evaluate(token)
        except scram.ScramFailure as failure:
            return b"", failure.message
        except scram.ScramAbort:
            raise Close from None
        if conn.scram.complete:
            conn.user = conn.scram.username
        return answer, None

    def _describe_scram(self, header: apis.Header, request: Any, conn: Connection) -> bytes:
        users = scram.describe_request(request)
        with self._lock:
            if self._allowed(conn, Operation.DESCRIBE):
                answer = self.scram.describe(users)
            else:
                answer = self.scram.describe_denied(users)
            self._record(header, conn, entries=len(answer.results),
                         codes=(answer.error_code, *(r.error_code for r in answer.results)))
        return scram.describe_response(answer)

    def _alter_scram(self, header: apis.Header, request: Any, conn: Connection) -> bytes:
        deletions, upsertions = scram.alter_request(request)
        with self._lock:
            if self._allowed(conn, Operation.ALTER):
                results = self.scram.alter(deletions, upsertions)
            else:
                results = self.scram.alter_denied(deletions, upsertions, scram.MSG_ALTER_DENIED)
            self._record(header, conn, entries=len(deletions) + len(upsertions),
                         codes=tuple(r.error_code for r in results))
        return scram.alter_response(results)

    def _authenticate(self, conn: Connection, token: bytes) -> bool:
        conn.raw_sasl = False
        credentials = apis.plain_credentials(token)
        if credentials is None:
            return False
        user = self.config.users.get(credentials[0])
        if user is None or user.password != credentials[1]:
            return False
        conn.user = credentials[0]
        return True

    def _allowed(self, conn: Connection, operation: Operation) -> bool:
        if not conn.listener.sasl:
            return True  # ANONYMOUS on a PLAINTEXT/SSL listener: a super user, as in the tests' Kafka
        user = self.config.users.get(conn.user or "")
        return user is not None and user.may(operation)
