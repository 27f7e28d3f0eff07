"""The APIs the sandbox serves: which versions, and each request's translation to and from the
engine, with kafka-python's generated classes doing the bytes (clients-and-spark §3).

A Kafka broker advertises SaslHandshake/SaslAuthenticate on every listener and answers an
ApiVersions request newer than it knows with a v0 UNSUPPORTED_VERSION body (ref §1.1); any
other unknown API or version makes it close the connection, which the broker module does.
"""

from __future__ import annotations

import struct
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    AlterUserScramCredentialsRequest,
    DescribeClientQuotasRequest,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeUserScramCredentialsRequest,
)
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from kqplan import wire
from kqplan.sandbox.engine import AlterEntry, AlterResult, DescribeComponent, DescribeResult, WireOp
from kqplan.wire import F64, I8, I16, I32, Malformed

API_VERSIONS, METADATA, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 3, 17, 36
DESCRIBE_QUOTAS, ALTER_QUOTAS, DESCRIBE_CLUSTER = 48, 49, 60
DESCRIBE_CONFIGS = 32  # the BROKER resources only: the settings that decide what quotas do
DESCRIBE_SCRAM, ALTER_SCRAM = 50, 51  # served by kqplan.sandbox.scram
UNSUPPORTED_VERSION = 35
UNSUPPORTED_SASL_MECHANISM = 33
SASL_AUTHENTICATION_FAILED = 58

SUPPORTED: dict[int, tuple[int, int]] = {
    METADATA: (0, 12), SASL_HANDSHAKE: (0, 1), API_VERSIONS: (0, 4), SASL_AUTHENTICATE: (0, 2),
    DESCRIBE_QUOTAS: (0, 1), ALTER_QUOTAS: (0, 1), DESCRIBE_CLUSTER: (0, 1),
    DESCRIBE_SCRAM: (0, 0), ALTER_SCRAM: (0, 0), DESCRIBE_CONFIGS: (1, 4),
}
API_NAMES = {METADATA: "Metadata", SASL_HANDSHAKE: "SaslHandshake", API_VERSIONS: "ApiVersions",
             SASL_AUTHENTICATE: "SaslAuthenticate", DESCRIBE_QUOTAS: "DescribeClientQuotas",
             ALTER_QUOTAS: "AlterClientQuotas", DESCRIBE_CLUSTER: "DescribeCluster",
             DESCRIBE_SCRAM: "DescribeUserScramCredentials", ALTER_SCRAM: "AlterUserScramCredentials",
             DESCRIBE_CONFIGS: "DescribeConfigs"}
REQUESTS: dict[int, Any] = {
    METADATA: MetadataRequest, SASL_HANDSHAKE: SaslHandshakeRequest, API_VERSIONS: ApiVersionsRequest,
    SASL_AUTHENTICATE: SaslAuthenticateRequest, DESCRIBE_QUOTAS: DescribeClientQuotasRequest,
    ALTER_QUOTAS: AlterClientQuotasRequest, DESCRIBE_CLUSTER: DescribeClusterRequest,
    DESCRIBE_SCRAM: DescribeUserScramCredentialsRequest, ALTER_SCRAM: AlterUserScramCredentialsRequest,
    DESCRIBE_CONFIGS: DescribeConfigsRequest,
}
# The first version of each API with flexible (tagged) headers: their response header carries
# an empty tag section. ApiVersions' response header is always v0 (KIP-511).
FIRST_FLEXIBLE = {METADATA: 9, SASL_HANDSHAKE: 99, API_VERSIONS: 99, SASL_AUTHENTICATE: 2,
                  DESCRIBE_QUOTAS: 1, ALTER_QUOTAS: 1, DESCRIBE_CLUSTER: 0, DESCRIBE_SCRAM: 0, ALTER_SCRAM: 0,
                  DESCRIBE_CONFIGS: 4}

PLAIN_FAILURE = "Authentication failed: Invalid username or password"  # PlainServerCallbackHandler


@dataclass(frozen=True, slots=True)
class Header:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def read_header(payload: bytes) -> Header:
    """The request header fields every version shares (v1 layout up to the client id)."""
    api_key, api_version, correlation_id, size = struct.unpack_from(">hhih", payload)
    client_id = None if size < 0 else payload[10:10 + size].decode("utf-8", "replace")
    return Header(api_key, api_version, correlation_id, client_id)


def frame(correlation_id: int, api_key: int, version: int, body: bytes) -> bytes:
    """Size prefix, response header, body."""
    flexible = version >= FIRST_FLEXIBLE.get(api_key, 99)
    header = struct.pack(">i", correlation_id) + (b"\0" if flexible else b"")
    return struct.pack(">i", len(header) + len(body)) + header + body


def decode(header: Header, payload: bytes) -> Any:
    """The request, decoded; an AlterClientQuotas request by :func:`alter_request_of` (big
    ones are common: kafka-python's classes took 8 ms per 1,000 entities)."""
    if header.api_key == ALTER_QUOTAS:
        return alter_request_of(header, payload)
    return REQUESTS[header.api_key][header.api_version].decode(payload, header=True)


# ApiVersions of a KRaft 4.3 broker, as a real 4.3.1 node (broker and controller, PLAINTEXT, no
# client telemetry) answers it. A client reads the release from this set (kafka-python's
# infer_broker_version_from_api_versions: DescribeLogDirs v5 is 4.3, and kqplan's
# kqplan.cluster.transport.KafkaTransport.broker_kind reads it through kafka-python) and the mode
# from the absence of LeaderAndIsr (4). The APIs the sandbox serves are advertised at the versions
# it serves (SUPPORTED, below: Metadata up to 12 where 4.3 says 13, DescribeCluster up to 1 where it
# says 2), so a client never picks a version it would close the connection on; an API it does not
# serve closes the connection, as it does for any request it cannot parse.
KRAFT_43_API_VERSIONS: dict[int, tuple[int, int]] = {
    0: (0, 13), 1: (4, 18), 2: (1, 11), 3: (0, 13), 8: (2, 10), 9: (1, 10), 10: (0, 6), 11: (0, 9),
    12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 6), 16: (0, 5), 17: (0, 1), 18: (0, 4), 19: (2, 7),
    20: (1, 6), 21: (0, 2), 22: (0, 5), 23: (2, 4), 24: (0, 5), 25: (0, 4), 26: (0, 5), 27: (1, 2),
    28: (0, 5), 29: (1, 3), 30: (1, 3), 31: (1, 3), 32: (1, 4), 33: (0, 2), 34: (1, 2), 35: (1, 5),
    36: (0, 2), 37: (0, 3), 38: (1, 3), 39: (1, 2), 40: (1, 2), 41: (1, 3), 42: (0, 2), 43: (0, 2),
    44: (0, 1), 45: (0, 1), 46: (0, 0), 47: (0, 0), 48: (0, 1), 49: (0, 1), 50: (0, 0), 51: (0, 0),
    55: (0, 2), 57: (0, 2), 60: (0, 2), 61: (0, 0), 64: (0, 0), 65: (0, 0), 66: (0, 2), 68: (0, 1),
    69: (0, 1), 74: (0, 1), 75: (0, 0), 76: (1, 1), 77: (1, 1), 78: (1, 2), 79: (1, 2), 80: (0, 1),
    81: (0, 0), 83: (0, 0), 84: (0, 0), 85: (0, 1), 86: (0, 0), 87: (0, 1), 88: (0, 0), 89: (0, 0),
    90: (0, 1), 91: (0, 0), 92: (0, 0),
}
ADVERTISED: dict[int, tuple[int, int]] = {**KRAFT_43_API_VERSIONS, **SUPPORTED}
"""What the sandbox (kraft flavour) answers to ApiVersions: a 4.3 broker's set, served APIs as served."""


def api_versions(version: int) -> bytes:
    """The ApiVersions answer; above v4 the v0 error body clients fall back from (ref §1.1)."""
    keys = [ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(ADVERTISED.items())]
    if version > SUPPORTED[API_VERSIONS][1]:
        return bytes(ApiVersionsResponse(version=0, error_code=UNSUPPORTED_VERSION, api_keys=keys).encode())
    return bytes(ApiVersionsResponse(version=version, error_code=0, api_keys=keys,
                                     throttle_time_ms=0).encode())


def metadata(version: int, host: str, port: int, cluster_id: str, brokers: int = 1) -> bytes:
    """``brokers`` brokers, nodes 1..N, all at the address the client dialled (one process serves
    them all: ``kqplan sandbox --brokers N`` lets budgets be tested without N JVMs); node 1 is
    also the controller."""
    listed = [MetadataResponse.MetadataResponseBroker(node_id=node, host=host, port=port, rack=None)
              for node in range(1, brokers + 1)]
    return bytes(MetadataResponse(version=version, throttle_time_ms=0, brokers=listed,
                                  cluster_id=cluster_id, controller_id=1, topics=[]).encode())


def describe_cluster(version: int, host: str, port: int, cluster_id: str, brokers: int = 1) -> bytes:
    listed = [DescribeClusterResponse.DescribeClusterBroker(broker_id=node, host=host, port=port, rack=None)
              for node in range(1, brokers + 1)]
    fields: dict[str, Any] = {"endpoint_type": 1} if version >= 1 else {}
    return bytes(DescribeClusterResponse(version=version, throttle_time_ms=0, error_code=0,
                                         error_message=None, cluster_id=cluster_id, controller_id=1,
                                         brokers=listed, **fields).encode())


def sasl_handshake(version: int, mechanism: str, mechanisms: Sequence[str]) -> tuple[bytes, bool]:
    ok = mechanism in mechanisms
    body = SaslHandshakeResponse(version=version, error_code=0 if ok else UNSUPPORTED_SASL_MECHANISM,
                                 mechanisms=list(mechanisms))
    return bytes(body.encode()), ok


def sasl_authenticate(version: int, error: str | None, auth_bytes: bytes = b"") -> bytes:
    """``auth_bytes``: the server's next SCRAM message (PLAIN has none)."""
    return bytes(SaslAuthenticateResponse(
        version=version, error_code=SASL_AUTHENTICATION_FAILED if error else 0, error_message=error,
        auth_bytes=auth_bytes, session_lifetime_ms=0).encode())


def plain_credentials(token: bytes) -> tuple[str, str] | None:
    """RFC 4616: ``[authzid] NUL authcid NUL passwd``; None when malformed."""
    parts = token.split(b"\0")
    if len(parts) != 3:
        return None
    try:
        return parts[1].decode("utf-8"), parts[2].decode("utf-8")
    except UnicodeDecodeError:
        return None


BROKER_RESOURCE = 4
INVALID_REQUEST = 42
CLUSTER_AUTHORIZATION_FAILED = 31
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5  # DescribeConfigsResponse ConfigSource


def describe_configs(version: int, request: Any, nodes: int, configs: Mapping[str, str | None],
                     given: Collection[str], *, allowed: bool) -> bytes:
    """DescribeConfigs of BROKER resources, as a KRaft broker answers it (``ConfigHelper``): a
    node's own settings (every node 1..``nodes`` is this process), those the request names that
    ``configs`` knows (all of them when it names none), those in ``given`` as set in the broker's
    file, the others as defaults; another resource type or node is an INVALID_REQUEST result;
    without DESCRIBE_CONFIGS on the cluster, CLUSTER_AUTHORIZATION_FAILED."""
    results: list[tuple[int, str | None, int, str, list[tuple[str, str | None, int]]]] = []
    for resource in request.resources:
        name = resource.resource_name
        wanted = resource.configuration_keys
        error, message, listed = 0, None, []
        if not allowed:
            error, message = CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
        elif resource.resource_type != BROKER_RESOURCE or not name.isdigit() or not 1 <= int(name) <= nodes:
            error, message = INVALID_REQUEST, (f"Unexpected broker id, expected 1..{nodes} or empty string, "
                                               f"but received {name}")
        else:
            listed = [(key, value, STATIC_BROKER_CONFIG if key in given else DEFAULT_CONFIG)
                      for key, value in sorted(configs.items()) if wanted is None or key in wanted]
        results.append((error, message, resource.resource_type, name, listed))
    return _configs_response(version, results)


def _configs_response(version: int, results: Sequence[tuple[int, str | None, int, str,
                                                            Sequence[tuple[str, str | None, int]]]]) -> bytes:
    """The DescribeConfigsResponse body (v1-v4), written by hand: kafka-python's classes took
    12 ms to encode the first one a process sends (their encoder is generated then), a fifth of
    an apply of 1,000 entities against the sandbox. Each config is read-only, not sensitive, of
    type 0 (unknown), without synonyms or documentation; checked byte for byte against those
    classes in tests/sandbox/encode_test.py."""
    flexible = version >= FIRST_FLEXIBLE[DESCRIBE_CONFIGS]
    tag = wire.NO_TAGS if flexible else b""
    string = wire.strings(flexible=flexible)
    out = [I32.pack(0), wire.count(len(results), flexible=flexible)]
    for error, message, resource_type, name, listed in results:
        out += (I16.pack(error), string(message), I8.pack(resource_type), string(name),
                wire.count(len(listed), flexible=flexible))
        for key, value, source in listed:
            # ReadOnly, ConfigSource, IsSensitive, Synonyms (none), then v3+: ConfigType, Documentation
            out += (string(key), string(value), b"\x01", I8.pack(source), b"\x00",
                    wire.count(0, flexible=flexible))
            if version >= 3:
                out += (b"\x00", string(None))
            out.append(tag)
        out.append(tag)
    out.append(tag)
    return b"".join(out)


def describe_request(request: Any) -> tuple[list[DescribeComponent], bool]:
    return ([DescribeComponent(c.entity_type, c.match_type, c.match) for c in request.components],
            bool(request.strict))


def describe_response(version: int, result: DescribeResult) -> bytes:
    """The DescribeClientQuotas response body, written by hand: kafka-python's generated classes
    take 1.5-2.4 s for a 100k-entity answer, this ~0.2 s (benchmarks/phases.py). Checked byte for
    byte against those classes in tests/sandbox/encode_test.py; v0 and v1 carry the same fields,
    v1 in the flexible encoding (compact strings and arrays, empty tag sections)."""
    flexible = version >= 1
    tag = b"\x00" if flexible else b""
    strings: dict[str, bytes] = {}  # types and keys repeat: encode each once
    floats: dict[float, bytes] = {}  # zeros bypass it: 0.0 == -0.0, but their bytes differ
    pack_double = F64.pack

    def string(text: str) -> bytes:
        data = text.encode()
        return (wire.uvarint(len(data) + 1) if flexible else I16.pack(len(data))) + data

    def cached(text: str) -> bytes:
        hit = strings.get(text)
        if hit is None:
            hit = strings[text] = string(text)
        return hit

    def count(n: int) -> bytes:
        return wire.uvarint(n + 1) if flexible else I32.pack(n)

    null_string = b"\x00" if flexible else b"\xff\xff"
    out = [I32.pack(0), I16.pack(result.error_code),
           null_string if result.error_message is None else string(result.error_message)]
    if result.entries is None:
        out.append(b"\x00" if flexible else b"\xff\xff\xff\xff")
    else:
        out.append(count(len(result.entries)))
        append = out.append
        for entity, values in result.entries:
            append(count(len(entity)))
            for entity_type, name in entity:
                append(cached(entity_type))
                append(null_string if name is None else string(name))
                append(tag)
            append(count(len(values)))
            for key, value in values:
                append(cached(key))
                packed = floats.get(value) if value else None
                if packed is None:
                    packed = floats[value] = pack_double(value)
                append(packed)
                append(tag)
            append(tag)
    out.append(tag)
    return b"".join(out)




@dataclass(frozen=True, slots=True)
class AlterRequest:
    """An AlterClientQuotasRequest as the engine takes it."""

    entries: list[AlterEntry]
    validate_only: bool


def alter_request_of(header: Header, payload: bytes) -> AlterRequest:
    """An AlterClientQuotasRequest (v0, v1) read from its bytes (header included; v1 has the
    flexible header, with a tag section after the client id): ``Entries [ Entity [ EntityType
    string, EntityName nullable string ], Ops [ Key string, Value float64, Remove bool ] ],
    ValidateOnly bool``. Checked against kafka-python's decoder in tests/sandbox/alter_wire_test.py."""
    flexible = header.api_version >= FIRST_FLEXIBLE[ALTER_QUOTAS]
    b = payload
    (size,) = I16.unpack_from(b, 8)
    p = 10 + max(size, 0)
    strings: dict[bytes, str] = {}

    def tags(p: int) -> int:
        return wire.skip_tags(b, p) if flexible else p

    def length(p: int, *, array: bool) -> tuple[int, int]:
        if flexible:
            n, p = wire.read_uvarint(b, p)
            n -= 1
        elif array:
            (n,) = I32.unpack_from(b, p)
            p += 4
        else:
            (n,) = I16.unpack_from(b, p)
            p += 2
        if n < -1 or n > len(b) - p:
            raise Malformed(f"a length of {n} at byte {p}")
        return n, p

    def string(p: int) -> tuple[str | None, int]:
        n, p = length(p, array=False)
        if n < 0:
            return None, p
        raw = b[p:p + n]
        text = strings.get(raw)
        if text is None:
            text = strings[raw] = raw.decode()
        return text, p + n

    def plain(p: int) -> tuple[str, int]:
        text, p = string(p)
        if text is None:
            raise Malformed("a null where a string is required")
        return text, p

    p = tags(p)
    entries: list[AlterEntry] = []
    count, p = length(p, array=True)
    for _ in range(max(count, 0)):
        parts, p = length(p, array=True)
        entity = []
        for _ in range(max(parts, 0)):
            entity_type, p = plain(p)
            name, p = string(p)
            entity.append((entity_type, name))
            p = tags(p)
        n_ops, p = length(p, array=True)
        ops = []
        for _ in range(max(n_ops, 0)):
            key, p = plain(p)
            (value,) = F64.unpack_from(b, p)
            ops.append(WireOp(key, value, b[p + 8] != 0))
            p = tags(p + 9)
        entries.append(AlterEntry(tuple(entity), tuple(ops)))
        p = tags(p)
    validate_only = b[p] != 0
    tags(p + 1)  # bytes after it are ignored, as Kafka's parser and kafka-python's do
    return AlterRequest(entries, validate_only)


def alter_request(request: AlterRequest) -> tuple[list[AlterEntry], bool]:
    return request.entries, request.validate_only


def alter_response(version: int, results: Sequence[AlterResult]) -> bytes:
    """The AlterClientQuotasResponse body, written by hand (kafka-python's classes took ~11 ms
    per 1,000 entities): ``ThrottleTimeMs int32, Entries [ ErrorCode int16, ErrorMessage
    nullable string, Entity [ EntityType string, EntityName nullable string ] ]``; checked byte
    for byte against those classes in tests/sandbox/alter_wire_test.py."""
    flexible = version >= FIRST_FLEXIBLE[ALTER_QUOTAS]
    tag = wire.NO_TAGS if flexible else b""
    string = wire.strings(flexible=flexible)

    def count(n: int) -> bytes:
        return wire.count(n, flexible=flexible)

    out = [I32.pack(0), count(len(results))]
    for r in results:
        out += (I16.pack(r.error_code), string(r.error_message), count(len(r.entity)))
        for entity_type, name in r.entity:
            out += (string(entity_type), string(name), tag)
        out.append(tag)
    out.append(tag)
    return b"".join(out)
