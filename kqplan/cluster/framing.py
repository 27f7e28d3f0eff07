"""Kafka frames as kqplan reads them: responses kept as bytes (:class:`RawResponse`, for
kqplan's own decoder) in kafka-python's frame parser, and bounded socket reads of a plain TCP
connection (:func:`bounded_reads`)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import kafka.errors as kerrors
from kafka.protocol.api_header import ResponseClassRegistry

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


def bytes_variant(request_class: Any) -> Any:
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


_written_variants: dict[Any, Any] = {}


def written(request_class: Any, body: Callable[[int], bytes], **fields: Any) -> Any:
    """A request of ``request_class`` (``fields``: what logs and errors show of it) whose body
    is ``body(version)``, written by kqplan once the version is negotiated, and whose response
    stays undecoded (:func:`bytes_variant`): kafka-python's classes encode big requests slowly."""
    variant = _written_variants.get(request_class)
    if variant is None:
        parent = bytes_variant(request_class)

        def encode(self: Any, version: int | None = None, header: bool = False,
                   framed: bool = False) -> bytes:
            if version is not None:
                self.API_VERSION = version
            if self.API_VERSION is None:
                raise ValueError("Version required to encode data")
            flexible = self.flexible_version_q(self.API_VERSION)
            head = bytes(self.encode_header(flexible=flexible)) if header else b""
            data: bytes = head + self._kqplan_body(self.API_VERSION)
            return struct.pack(">i", len(data)) + data if framed else data

        variant = type(request_class)(f"{request_class.__name__}Written", (parent,),
                                      {"__slots__": ("_kqplan_body",), "encode": encode}, init=False)
        _written_variants[request_class] = variant
    request = variant(**fields)
    request._kqplan_body = body
    return request


# -- reads of a plain TCP connection ----------------------------------------------------------

_READ_LIMIT = 1 << 20


def bounded_reads(conn: Any) -> None:
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
