"""Transport failures and how they are explained to the user: the :class:`TransportError`
family (what kqplan sees of a failed request) and :func:`explain`, which turns kafka-python's
failures into one of them, in kqplan's words and without secrets."""

from __future__ import annotations

import re
import ssl
from typing import Any

import kafka.errors as kerrors

from kqplan.cluster.connection import ConnectionConfig
from kqplan.core.errors import KqplanError


class TransportError(KqplanError):
    """A request could not be completed. ``maybe_processed``: it reached the broker, so the
    broker may have acted on it; ``retriable``: trying again may help."""

    maybe_processed = False
    retriable = False


class ConnectionFailed(TransportError):
    """No connection could be set up (refused, unreachable, timed out, TLS handshake)."""

    retriable = True


class NoAnswer(TransportError):
    """Connected, but the broker did not answer the connection's first requests (ApiVersions,
    SASL) in time — or the command's ``--timeout`` ran out before a request could be sent.
    Nothing was sent that could change anything; trying again within the same command would
    only spend the time again."""


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


_API_VERSIONS, _SASL_HANDSHAKE, _SASL_AUTHENTICATE = 18, 17, 36

_CLIENT_CERT_ALERT = re.compile(r"ALERT_(?:BAD_CERTIFICATE|CERTIFICATE_REQUIRED|UNKNOWN_CA|"
                                r"CERTIFICATE_UNKNOWN)")
"""TLS alerts a broker sends about the client's certificate (its own is checked by OpenSSL here)."""

_MISMATCH_HINT = ("if the broker hangs up at the first request, check security.protocol (it is {}): "
                  "a TLS listener needs SSL or SASL_SSL, a SASL listener SASL_PLAINTEXT or SASL_SSL")


def _message(exc: BaseException) -> str:
    """kafka-python's text without its ``[Error 58] SaslAuthenticationFailedError:`` prefixes."""
    text = str(exc.args[0]) if exc.args else ""
    prefixes = (f"{type(exc).__name__}: ", "SaslAuthenticationFailedError: ", "Authentication failed: ",
                "Authentication failed during authentication due to ")
    while text.startswith(prefixes):
        text = next(text.removeprefix(p) for p in prefixes if text.startswith(p))
    return text or type(exc).__name__


def explain(exc: BaseException, config: ConnectionConfig, *, sent: bool, where: str | None = None,
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
