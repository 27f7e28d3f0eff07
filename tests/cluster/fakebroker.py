"""A tiny Kafka-wire server for transport edge cases the real brokers cannot show on demand.

It speaks ApiVersions, Metadata, SaslHandshake/SaslAuthenticate (PLAIN) and
DescribeClientQuotas/AlterClientQuotas over real TCP (optionally TLS), using kafka-python's
generated classes on the server side. Knobs: which APIs it advertises (a pre-2.6 broker has
no 48/49), per-API delays and dropped connections, a PLAIN user table. The quota semantics
are deliberately minimal: the sandbox and the real broker own those.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import os
import ssl
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

REQUESTS = {
    18: ApiVersionsRequest, 3: MetadataRequest, 17: SaslHandshakeRequest, 36: SaslAuthenticateRequest,
    48: DescribeClientQuotasRequest, 49: AlterClientQuotasRequest,
}
DEFAULT_APIS = {18: (0, 3), 3: (0, 12), 17: (0, 1), 36: (0, 2), 48: (0, 1), 49: (0, 1)}
PRE_2_6_APIS = {18: (0, 3), 3: (0, 9), 17: (0, 1), 36: (0, 2)}  # e.g. Kafka 2.5: no 48/49


@dataclass
class FakeBroker:
    apis: dict[int, tuple[int, int]] = field(default_factory=lambda: dict(DEFAULT_APIS))
    users: dict[str, str] | None = None  # SASL users and passwords; None = no SASL
    mechanisms: tuple[str, ...] = ("PLAIN",)  # also SCRAM-SHA-256/512, OAUTHBEARER
    oauth_tokens: set[str] | None = None  # OAUTHBEARER tokens accepted (None: any)
    seen_tokens: list[str] = field(default_factory=list)
    ssl_context: ssl.SSLContext | None = None
    cluster_id: str = "fake-cluster-id"
    delays: dict[int, float] = field(default_factory=dict)  # api key -> seconds before answering
    drop: dict[int, str] = field(default_factory=dict)  # api key -> "before" | "after" (applying)
    drop_times: int | None = None  # how many times to drop (None: always)
    close_after: set[int] = field(default_factory=set)  # api keys after whose answer it hangs up
    describe_error: tuple[int, str | None] | None = None  # answer describes with this error
    alter_body: bytes | None = None  # answer alters with these bytes (after applying them)
    state: dict[tuple, dict[str, float]] = field(default_factory=dict)
    log: list[tuple[int, int]] = field(default_factory=list)  # (api key, version) served
    _describe_cache: dict[int, bytes] = field(default_factory=dict)  # big states: encode once
    host: str = "127.0.0.1"
    port: int = 0

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    # -- handlers ---------------------------------------------------------------------------

    def _respond(self, key: int, version: int, req, conn: dict):
        if key == 18:
            if version > 3:  # like Kafka before 3.9: answer v0 with UNSUPPORTED_VERSION
                return ApiVersionsResponse(version=0, error_code=35, api_keys=self._api_list(0))
            return ApiVersionsResponse(version=version, error_code=0, api_keys=self._api_list(version),
                                       throttle_time_ms=0)
        if key == 17:
            ok = self.users is not None and req.mechanism in self.mechanisms
            conn["mechanism"] = req.mechanism
            return SaslHandshakeResponse(version=version, error_code=0 if ok else 33,
                                         mechanisms=list(self.mechanisms) if self.users is not None else [])
        if key == 36:
            ok, challenge = self._authenticate(conn, bytes(req.auth_bytes))
            if ok is None or ok:
                conn["authenticated"] = bool(ok)
                return SaslAuthenticateResponse(version=version, error_code=0, error_message=None,
                                                auth_bytes=challenge, session_lifetime_ms=0)
            conn["auth_failed"] = True
            return SaslAuthenticateResponse(
                version=version, error_code=58, auth_bytes=b"", session_lifetime_ms=0,
                error_message=("Authentication failed: Invalid username or password"  # Kafka's
                               if conn["mechanism"] == "PLAIN" else
                               "Authentication failed during authentication due to invalid "
                               f"credentials with SASL mechanism {conn['mechanism']}"))
        if key == 3:
            broker = MetadataResponse.MetadataResponseBroker(node_id=1, host=self.host, port=self.port,
                                                             rack=None)
            return MetadataResponse(version=version, throttle_time_ms=0, brokers=[broker],
                                    cluster_id=self.cluster_id, controller_id=1, topics=[])
        if key == 48 and self.describe_error is not None:
            code, message = self.describe_error
            return DescribeClientQuotasResponse(version=version, throttle_time_ms=0, error_code=code,
                                                error_message=message, entries=None)
        if key == 48:
            R = DescribeClientQuotasResponse
            entries = [R.EntryData(entity=[R.EntryData.EntityData(entity_type=t, entity_name=n)
                                           for t, n in entity],
                                   values=[R.EntryData.ValueData(key=k, value=v) for k, v in quotas.items()])
                       for entity, quotas in self.state.items()]
            return R(version=version, throttle_time_ms=0, error_code=0, error_message="", entries=entries)
        if key == 49:
            R = AlterClientQuotasResponse
            self._describe_cache.clear()
            out = []
            for entry in req.entries:
                entity = tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity))
                if not req.validate_only:
                    quotas = self.state.setdefault(entity, {})
                    for op in entry.ops:
                        if op.remove:
                            quotas.pop(op.key, None)
                        else:
                            quotas[op.key] = op.value
                    if not quotas:
                        del self.state[entity]
                out.append(R.EntryData(error_code=0, error_message=None, entity=[
                    R.EntryData.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
                    for e in entry.entity]))
            return R(version=version, throttle_time_ms=0, entries=out)
        raise AssertionError(key)

    def _authenticate(self, conn: dict, data: bytes) -> tuple[bool | None, bytes]:
        """(True: done, False: failed, None: continue with the challenge)."""
        users = self.users or {}
        mechanism = conn.get("mechanism")
        if mechanism == "PLAIN":
            _, user, password = data.split(b"\0")
            return users.get(user.decode()) == password.decode(), b""
        if mechanism == "OAUTHBEARER":  # "n,,\x01auth=Bearer <token>\x01\x01"
            token = data.decode().split("auth=Bearer ", 1)[-1].split("\x01", 1)[0]
            self.seen_tokens.append(token)
            return self.oauth_tokens is None or token in self.oauth_tokens, b""
        return self._scram(conn, data, users)

    @staticmethod
    def _scram(conn: dict, data: bytes, users: dict[str, str]) -> tuple[bool | None, bytes]:
        """RFC 5802 server side, enough for kafka-python's client."""
        digest = hashlib.sha256 if conn["mechanism"] == "SCRAM-SHA-256" else hashlib.sha512
        text = data.decode()
        if "client_first" not in conn:
            bare = text.split(",", 2)[2]
            fields = dict(item.split("=", 1) for item in bare.split(","))
            nonce = fields["r"] + "srv" + base64.b64encode(os.urandom(9)).decode()
            salt = os.urandom(16)
            first = f"r={nonce},s={base64.b64encode(salt).decode()},i=4096"
            conn.update(client_first=bare, server_first=first, user=fields["n"], salt=salt)
            return None, first.encode()
        fields = dict(item.split("=", 1) for item in text.split(","))
        without_proof = text.rsplit(",p=", 1)[0]
        auth_message = ",".join([conn["client_first"], conn["server_first"], without_proof]).encode()
        password = users.get(conn["user"])
        if password is None:
            return False, b""
        salted = hashlib.pbkdf2_hmac(digest().name, password.encode(), conn["salt"], 4096)
        client_key = hmac.new(salted, b"Client Key", digest).digest()
        signature = hmac.new(digest(client_key).digest(), auth_message, digest).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        if base64.b64decode(fields["p"]) != proof:
            return False, b""
        server_key = hmac.new(salted, b"Server Key", digest).digest()
        verifier = base64.b64encode(hmac.new(server_key, auth_message, digest).digest()).decode()
        return True, f"v={verifier}".encode()

    def _api_list(self, version: int):
        return [ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, (lo, hi) in sorted(self.apis.items())]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn: dict = {}
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                payload = await reader.readexactly(size)
                key, version, corr = struct.unpack_from(">hhi", payload)
                if key not in self.apis and key != 18:
                    return  # real brokers close the connection too
                req = REQUESTS[key][version].decode(payload, header=True)
                self.log.append((key, version))
                if self.users is not None and key not in (18, 17, 36) and not conn.get("authenticated"):
                    return  # Kafka closes a SASL connection that skips authentication
                await asyncio.sleep(self.delays.get(key, 0))
                drop = self.drop.get(key) if self.drop_times is None or self.drop_times > 0 else None
                if drop and self.drop_times is not None:
                    self.drop_times -= 1
                if drop == "before":
                    return
                if key == 48 and version in self._describe_cache and self.describe_error is None:
                    body = self._describe_cache[version]
                else:
                    body = bytes(self._respond(key, version, req, conn).encode())
                    if key == 48 and self.describe_error is None:
                        self._describe_cache[version] = body
                if key == 49 and self.alter_body is not None:
                    body = self.alter_body
                if drop == "after":
                    return
                # Response header: correlation id (+ an empty tag section for flexible versions,
                # except ApiVersions, whose response header is always v0).
                flexible = {48: 1, 49: 1, 3: 9, 36: 2}.get(key, 99) <= version
                header = struct.pack(">i", corr) + (b"\0" if flexible else b"")
                writer.write(struct.pack(">i", len(header) + len(body)) + header + body)
                if conn.get("auth_failed"):
                    # As Kafka does: the failure answer, then the connection closed at once
                    # (kafka-python then often sees both in one read and loses the answer).
                    return
                await writer.drain()
                if key in self.close_after:
                    # Later, as an idle timeout would: kafka-python drops a response that
                    # arrives in the same read as the connection's end.
                    await asyncio.sleep(0.05)
                    return
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    @contextlib.contextmanager
    def running(self) -> Iterator[FakeBroker]:
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        server_box: list[asyncio.base_events.Server] = []

        async def start() -> None:
            server = await asyncio.start_server(self._serve, self.host, self.port, ssl=self.ssl_context)
            self.port = server.sockets[0].getsockname()[1]
            server_box.append(server)
            ready.set()

        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        asyncio.run_coroutine_threadsafe(start(), loop).result(5)
        ready.wait(5)
        try:
            yield self
        finally:
            async def stop() -> None:
                server_box[0].close()
                tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

            asyncio.run_coroutine_threadsafe(stop(), loop).result(5)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(5)
            loop.close()
