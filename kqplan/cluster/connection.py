"""How to reach a Kafka cluster: ``--bootstrap-server`` plus a ``--command-config`` file.

The file is the Java client properties file ``kafka-configs.sh --command-config`` users
already have (``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config``, ``ssl.*``);
librdkafka's spellings (``sasl.username``, ``sasl.password``, ``ssl.ca.location``, …) are
accepted too, and ``${NAME}`` in a value is read from the environment. Everything is checked
when the file is read, so a typo or an unsupported setting is reported as ``FILE:LINE`` before
any connection is made.

Secrets (passwords, client secrets, private keys) are held in :class:`Secret`, which never
shows its value; :meth:`ConnectionConfig.redact` scrubs them from any text that might have
picked one up (error messages from the network layer, for instance).
"""

from __future__ import annotations

import difflib
import os
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from kqplan.cluster import settings as known
from kqplan.cluster.kerberos import KerberosSettings
from kqplan.cluster.keystores import (
    JAVA_FORMATS,
    KEY_PASSWORD,
    KEYSTORE,
    TRUSTSTORE,
    ClientIdentity,
    StoreError,
    StoreFormat,
    declared_format,
    load_identity,
    load_trusted,
    read_store,
    resolve_format,
    sniff_format,
)
from kqplan.cluster.properties import JaasConfig, Setting, interpolate, parse_jaas, parse_properties
from kqplan.cluster.tls import Secret, TlsSettings, build_ssl_context, normalize_pem
from kqplan.core.errors import KqplanError

ENV_BOOTSTRAP = "KQPLAN_BOOTSTRAP_SERVER"
ENV_COMMAND_CONFIG = "KQPLAN_COMMAND_CONFIG"
MAX_PROPERTIES_BYTES = 1024 * 1024
MAX_CLIENT_ID_BYTES = 32_767  # the request header's int16-length string
DEFAULT_RECEIVE_MAX_BYTES = 256 * 1024 * 1024
"""A describe of 100k entities is ~10 MB; this admits ~2.5M. kafka-python's own default
(1 MB) would reject a 10k-entity cluster. The limit exists because kafka-python allocates a
frame's buffer from the size the broker announces, before reading it."""


class SecurityProtocol(StrEnum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


@dataclass(frozen=True, slots=True)
class OAuthSettings:
    """SASL/OAUTHBEARER: a token from an OIDC endpoint (client credentials) or a token file,
    or an unsigned token for development brokers (``unsecuredLoginStringClaim_sub``)."""

    token_endpoint: str | None = None  # https://… (client credentials) or file://… (a JWT)
    client_id: str | None = None
    client_secret: Secret | None = None
    scope: str | None = None
    unsecured_principal: str | None = None


@dataclass(frozen=True, slots=True)
class ConnectionConfig:
    """Everything needed to open a connection; ``repr`` is safe to print."""

    bootstrap: str
    security_protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: Secret | None = None
    oauth: OAuthSettings | None = None
    kerberos: KerberosSettings | None = None
    tls: TlsSettings | None = None
    client_id: str = "kqplan"
    request_timeout_ms: int = 30_000
    connect_timeout_ms: int = 10_000
    receive_message_max_bytes: int = DEFAULT_RECEIVE_MAX_BYTES
    source: str | None = None
    """The ``--command-config`` file the settings came from, for messages."""
    ignored: tuple[str, ...] = field(default=())
    """Settings read from the file that have no effect on kqplan (e.g. ``retries``)."""

    def secrets(self) -> tuple[str, ...]:
        """Every secret value, longest first (so that redaction replaces whole secrets)."""
        found = [self.sasl_password, self.oauth and self.oauth.client_secret,
                 self.tls and self.tls.key_pem, self.tls and self.tls.key_password]
        values = {s.reveal() for s in found if isinstance(s, Secret) and s.reveal()}
        return tuple(sorted(values, key=len, reverse=True))

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced by ``***``."""
        for secret in self.secrets():
            text = text.replace(secret, "***")
        return text

    def describe(self) -> str:
        """``host:port (SASL_SSL, PLAIN as alice)``: for messages; never holds a secret."""
        how = str(self.security_protocol)
        if self.security_protocol.uses_sasl:
            how += f", {self.sasl_mechanism}"
            if self.sasl_username is not None:
                how += f" as {self.sasl_username}"
        return f"{self.bootstrap} ({how})"

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context for TLS listeners (None otherwise); certificates verified by default."""
        if not self.security_protocol.uses_tls:
            return None
        return build_ssl_context(self.tls or TlsSettings())

    def kafka_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for kafka-python's connection layer (secrets included: keep private).

        OAUTHBEARER's token provider is added by the transport, which owns kafka-python types.
        """
        kwargs: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap,
            "client_id": self.client_id,
            "security_protocol": str(self.security_protocol),
            "request_timeout_ms": self.request_timeout_ms,
            "socket_connection_setup_timeout_ms": self.connect_timeout_ms,
            "socket_connection_setup_timeout_max_ms": self.connect_timeout_ms,
            "receive_message_max_bytes": self.receive_message_max_bytes,
        }
        context = self.ssl_context()
        if context is not None:
            kwargs["ssl_context"] = context
            kwargs["ssl_check_hostname"] = context.check_hostname
        if self.security_protocol.uses_sasl:
            kwargs["sasl_mechanism"] = self.sasl_mechanism
            if self.sasl_username is not None:
                kwargs["sasl_plain_username"] = self.sasl_username
            if self.sasl_password is not None:
                kwargs["sasl_plain_password"] = self.sasl_password.reveal()
            if self.kerberos is not None:
                kwargs["sasl_kerberos_service_name"] = self.kerberos.service_name
        return kwargs


# -- reading a --command-config file -----------------------------------------------------------

class _Settings:
    """The file's settings by key (a repeated key: the last one wins, as in Java)."""

    def __init__(self, settings: list[Setting], source: str, env: Mapping[str, str]) -> None:
        self.by_key = {s.key: s for s in settings}
        self.source = source
        self.env = env

    def where(self, key: str) -> str:
        setting = self.by_key.get(key)
        line = f":{setting.line}" if setting is not None else ""
        return f"{self.source}{line}: {key}"

    def get(self, key: str) -> str | None:
        setting = self.by_key.get(key)
        if setting is None:
            return None
        return interpolate(setting.value, self.env, where=self.where(key)).strip()

    def first(self, *keys: str) -> tuple[str, str] | tuple[None, None]:
        """The first of several spellings that is set: (key, value)."""
        for key in keys:
            value = self.get(key)
            if value is not None:
                return key, value
        return None, None

    def error(self, key: str, message: str, hint: str | None = None) -> KqplanError:
        return KqplanError(f"{self.where(key)}: {message}", hint=hint)

    def integer(self, key: str, default: int) -> int:
        value = self.get(key)
        if value is None:
            return default
        if not value.isdigit() or int(value) <= 0:
            raise self.error(key, "expected a positive whole number of milliseconds or bytes")
        return int(value)


def _check_keys(cfg: _Settings) -> tuple[str, ...]:
    """Reject unknown and unsupported keys (in file order); return the ignored ones."""
    ignored = []
    for key, setting in sorted(cfg.by_key.items(), key=lambda kv: kv[1].line):
        if key in known.SUPPORTED:
            continue
        if key in known.UNSUPPORTED:
            message, hint = known.UNSUPPORTED[key]
            raise cfg.error(key, message, hint)
        if key in known.IGNORED or key.startswith(known.IGNORED_PREFIXES):
            ignored.append(f"{key} ({cfg.source}:{setting.line})")
            continue
        if not _SETTING_NAME.fullmatch(key):
            # Not a setting name: likely a value wrapped onto its own line (a password, a JAAS
            # fragment) or an escaped '='. Never echo it: it may be a secret.
            raise KqplanError(f"{cfg.source}:{setting.line}: this line is not a `key=value` setting "
                              "(its text is not shown: it may hold a secret)",
                              hint="a value continues on the next line only after a trailing "
                              "backslash; write each setting on one line as key=value")
        close = difflib.get_close_matches(key, sorted(known.SUPPORTED), n=1, cutoff=0.75)
        raise cfg.error(key, "unknown setting",
                        f"did you mean {close[0]}?" if close else known.SUPPORTED_HINT)
    return tuple(ignored)


_SETTING_NAME = re.compile(r"[a-z][a-z0-9-]*(?:\.[a-z0-9-]+)+")
"""What a client setting's name looks like (``sasl.jaas.config``); anything else is not echoed."""


def _read_pem_path(cfg: _Settings, key: str, kind: str) -> str | None:
    """A PEM file setting: it must be readable and PEM (librdkafka's ``ssl.*.location`` names)."""
    path = cfg.get(key)
    if path is None:
        return None
    try:
        with open(path, "rb") as fh:
            head = fh.read(65536)
    except OSError as exc:
        raise cfg.error(key, f"cannot read {path}: {exc.strerror}") from None
    if b"-----BEGIN" not in head:
        hint = known.CONVERT_HINTS[kind]
        if sniff_format(head) in JAVA_FORMATS:
            store = "ssl.truststore" if kind == "the CA certificates" else "ssl.keystore"
            hint = f"a PKCS12 or JKS store goes in {store}.location (with {store}.password); {hint}"
        raise cfg.error(key, f"{path} is not a PEM file; kqplan needs {kind} in PEM format", hint)
    return path


def _secret(cfg: _Settings, key: str) -> Secret | None:
    value = cfg.get(key)
    return None if value is None else Secret(value)


def _truststore(cfg: _Settings) -> tuple[str | None, str | None, tuple[str, ...]]:
    """``ssl.truststore.*`` (or librdkafka's ``ssl.ca.location``): (PEM file, PEM text from a
    PKCS12/JKS store, settings that had no effect)."""
    keys = TRUSTSTORE
    declared = declared_format(cfg.get(keys.type), keys)
    path = cfg.get(keys.location)
    if path is None:
        return _read_pem_path(cfg, "ssl.ca.location", "the CA certificates"), None, ()
    data = read_store(path, keys)
    fmt = resolve_format(data, declared, path, keys)
    if fmt is StoreFormat.PEM:
        # Kafka has no password for PEM trust stores; reported, as every setting without effect.
        unused = (keys.password,) if keys.password in cfg.by_key else ()
        return path, None, unused
    pem = load_trusted(path, data, fmt, password=_secret(cfg, keys.password))
    return None, pem, ()


def _keystore(cfg: _Settings) -> tuple[str | None, ClientIdentity | None, tuple[str, ...]]:
    """``ssl.keystore.*``: (PEM file holding key and chain, identity from a PKCS12/JKS store,
    settings that had no effect)."""
    keys = KEYSTORE
    declared = declared_format(cfg.get(keys.type), keys)
    path = cfg.get(keys.location)
    if path is None:
        return None, None, ()
    data = read_store(path, keys)
    fmt = resolve_format(data, declared, path, keys)
    if fmt is StoreFormat.PEM:
        return path, None, (keys.password,) if keys.password in cfg.by_key else ()
    inline = next((k for k in ("ssl.keystore.key", "ssl.key.pem") if k in cfg.by_key), None)
    if inline is not None:
        raise cfg.error(inline, f"is set as well as {keys.location}", "keep one of them")
    identity = load_identity(path, data, fmt, store_password=_secret(cfg, keys.password),
                             key_password=_secret(cfg, KEY_PASSWORD))
    return None, identity, ()


def _tls_settings(cfg: _Settings) -> tuple[TlsSettings, tuple[str, ...]]:
    """The TLS settings, and the keys read that had no effect (a password for a PEM store)."""
    try:
        ca_file, store_ca_pem, unused_trust = _truststore(cfg)
        keystore, identity, unused_key = _keystore(cfg)
    except StoreError as exc:
        raise cfg.error(exc.setting, exc.message, exc.hint) from None
    cert_file = keystore or _read_pem_path(cfg, "ssl.certificate.location",
                                           "the client certificate and key")
    key_file = None if keystore else _read_pem_path(cfg, "ssl.key.location",
                                                    "the client certificate and key")
    if cert_file is not None and keystore is None and key_file is None:
        raise cfg.error("ssl.certificate.location", "ssl.key.location is missing")
    _, ca_pem = cfg.first("ssl.truststore.certificates", "ssl.ca.pem")
    if store_ca_pem is not None:
        ca_pem = store_ca_pem + (normalize_pem(ca_pem) if ca_pem else "")
    _, cert_pem = cfg.first("ssl.keystore.certificate.chain", "ssl.certificate.pem")
    _, key_pem = cfg.first("ssl.keystore.key", "ssl.key.pem")
    if (cert_pem is None) != (key_pem is None):
        key = "ssl.keystore.certificate.chain" if cert_pem is not None else "ssl.keystore.key"
        raise cfg.error(key, "an inline client certificate needs both the chain and the key")
    _, password = cfg.first("ssl.key.password")
    if identity is not None:
        # the store's key comes out decrypted: ssl.key.password has done its work
        cert_pem, key_pem, password = identity.chain_pem, identity.key_pem.reveal(), None
    algorithm = cfg.get("ssl.endpoint.identification.algorithm")
    if algorithm is not None and algorithm.lower() not in ("", "https", "none"):
        raise cfg.error("ssl.endpoint.identification.algorithm", f"{algorithm!r} is not supported",
                        "use https (the default: check the broker's host name) or leave it empty")
    verify = cfg.get("enable.ssl.certificate.verification")
    if verify is not None and verify.lower() not in ("true", "false"):
        raise cfg.error("enable.ssl.certificate.verification", "expected true or false")
    tls = TlsSettings(
        ca_file=ca_file, ca_pem=ca_pem, cert_file=cert_file, cert_pem=cert_pem, key_file=key_file,
        key_pem=Secret(key_pem) if key_pem else None,
        key_password=Secret(password) if password else None,
        crl_file=cfg.get("ssl.crl.location"),
        check_hostname=algorithm is None or algorithm.lower() == "https",
        verify=verify is None or verify.lower() == "true",
        tls13_only=_tls13_only(cfg),
    )
    unused = tuple(f"{key} ({cfg.source}:{cfg.by_key[key].line})" for key in unused_trust + unused_key)
    return tls, unused


def _tls13_only(cfg: _Settings) -> bool:
    versions: list[str] = []
    for key in ("ssl.protocol", "ssl.enabled.protocols"):
        value = cfg.get(key)
        for item in filter(None, (part.strip() for part in (value or "").split(","))):
            if item not in ("TLS", "TLSv1.2", "TLSv1.3"):
                raise cfg.error(key, f"{item} is not supported", "use TLSv1.2 or TLSv1.3")
            versions.append(item)
    return bool(versions) and all(v == "TLSv1.3" for v in versions)


def _jaas(cfg: _Settings) -> JaasConfig | None:
    text = cfg.get("sasl.jaas.config")
    if text is None:
        return None
    try:
        return parse_jaas(text)
    except ValueError as exc:
        raise cfg.error("sasl.jaas.config", f"cannot parse it: {exc}",
                        'write e.g. org.apache.kafka.common.security.plain.PlainLoginModule '
                        'required username="alice" password="${ALICE_PASSWORD}";') from None


def _sasl(cfg: _Settings, protocol: SecurityProtocol) -> dict[str, Any]:
    """The SASL fields of a ConnectionConfig."""
    mech_key, mechanism = cfg.first("sasl.mechanism", "sasl.mechanisms")
    jaas = _jaas(cfg)
    if not protocol.uses_sasl:
        used = [k for k in cfg.by_key if k.startswith("sasl.")]
        if used:
            raise cfg.error(used[0], f"is set but security.protocol is {protocol}",
                            "set security.protocol=SASL_SSL (or SASL_PLAINTEXT)")
        return {}
    mechanism = (mechanism or "GSSAPI").upper()  # GSSAPI: Java's and librdkafka's default
    if mechanism not in known.MECHANISM_MODULES:
        raise cfg.error(mech_key or "sasl.mechanism", f"{mechanism} is not supported",
                        "use PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or GSSAPI")
    options: Mapping[str, str] = {}
    if jaas is not None:
        expected = known.MECHANISM_MODULES[mechanism]
        if jaas.module_name != expected:
            raise cfg.error("sasl.jaas.config",
                            f"uses {jaas.module_name}, but sasl.mechanism is {mechanism}"
                            f"{'' if mech_key else ' (the default)'}",
                            f"use {expected}, or set sasl.mechanism to match the login module")
        options = jaas.options
    fields: dict[str, Any] = {"sasl_mechanism": mechanism}
    if mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        user_key, username = cfg.first("sasl.username")
        _, password = cfg.first("sasl.password")
        if jaas is not None and (username is not None or password is not None):
            raise cfg.error(user_key or "sasl.password", "is set as well as sasl.jaas.config",
                            "keep one of them")
        if jaas is not None:
            username, password = options.get("username"), options.get("password")
            if options.get("tokenauth", "false").lower() == "true":
                raise cfg.error("sasl.jaas.config", "delegation tokens (tokenauth=true) are not "
                                "supported")
        if not username or password is None:
            raise cfg.error(mech_key or "sasl.mechanism", f"{mechanism} needs a username and "
                            "a password", 'set sasl.jaas.config (username="…" password="…") or '
                            "sasl.username and sasl.password")
        fields.update(sasl_username=username, sasl_password=Secret(password))
    elif mechanism == "OAUTHBEARER":
        fields["oauth"] = _oauth(cfg, options)
    else:
        kerberos = _kerberos(cfg, jaas)
        fields.update(kerberos=kerberos, sasl_username=kerberos.principal)
    return fields


_KEYTAB_VERSIONS = (b"\x05\x01", b"\x05\x02")  # MIT's keytab file format, versions 1 and 2


def _kerberos(cfg: _Settings, jaas: JaasConfig | None) -> KerberosSettings:
    """GSSAPI: JAAS ``Krb5LoginModule`` options (Java's way) or ``sasl.kerberos.*`` (librdkafka's)."""
    options: Mapping[str, str] = jaas.options if jaas is not None else {}
    librdkafka = [k for k in ("sasl.kerberos.keytab", "sasl.kerberos.principal") if k in cfg.by_key]
    if jaas is not None and librdkafka:
        raise cfg.error(librdkafka[0], "is set as well as sasl.jaas.config", "keep one of them")
    service_key, service = cfg.first("sasl.kerberos.service.name")
    jaas_service = options.get("serviceName")
    if service and jaas_service and service != jaas_service:
        # Kafka's Java client refuses this too ("Conflicting serviceName values").
        raise cfg.error(service_key or "sasl.kerberos.service.name",
                        "differs from serviceName in sasl.jaas.config", "keep one of them")
    flags = {}
    for flag in ("useKeyTab", "useTicketCache"):
        value = options.get(flag, "false").lower()
        if value not in ("true", "false"):
            raise cfg.error("sasl.jaas.config", f"{flag} must be true or false")
        flags[flag] = value == "true"
    keytab_key: str | None = "sasl.jaas.config"
    keytab = options.get("keyTab")
    if keytab is not None and not flags["useKeyTab"]:
        # Krb5LoginModule would ignore the keytab and look for a ticket cache: say so instead.
        raise cfg.error("sasl.jaas.config", "sets keyTab but not useKeyTab=true",
                        "add useKeyTab=true to log in from the keytab")
    if flags["useKeyTab"] and keytab is None:
        raise cfg.error("sasl.jaas.config", 'useKeyTab=true needs keyTab="/path/to.keytab"')
    if jaas is None:
        keytab_key, keytab = cfg.first("sasl.kerberos.keytab")
    if keytab is not None:
        try:
            with open(keytab, "rb") as fh:
                head = fh.read(2)
        except OSError as exc:
            raise cfg.error(keytab_key or "sasl.kerberos.keytab",
                            f"cannot read the keytab {keytab}: {exc.strerror}") from None
        if head not in _KEYTAB_VERSIONS:
            raise cfg.error(keytab_key or "sasl.kerberos.keytab", f"{keytab} is not a Kerberos keytab",
                            "create one with ktutil or kadmin's ktadd (Java's ktab writes the same format)")
    ticket_cache = options.get("ticketCache") if flags["useTicketCache"] else None
    return KerberosSettings(service_name=service or jaas_service or "kafka",
                            principal=options.get("principal") or cfg.get("sasl.kerberos.principal"),
                            keytab=keytab, ticket_cache=ticket_cache)


def _oauth(cfg: _Settings, options: Mapping[str, str]) -> OAuthSettings:
    handler = cfg.get("sasl.login.callback.handler.class")
    if handler is not None and not handler.endswith(".OAuthBearerLoginCallbackHandler"):
        raise cfg.error("sasl.login.callback.handler.class", "custom login callback handlers "
                        "are not supported", "use sasl.oauthbearer.token.endpoint.url with a "
                        "client id and secret")
    method = cfg.get("sasl.oauthbearer.method")
    if method is not None and method.lower() not in ("default", "oidc"):
        raise cfg.error("sasl.oauthbearer.method", f"{method!r} is not supported",
                        "use oidc (with a token endpoint) or default")
    endpoint = cfg.get("sasl.oauthbearer.token.endpoint.url")
    _, client_id = cfg.first("sasl.oauthbearer.client.id")
    _, secret = cfg.first("sasl.oauthbearer.client.secret")
    _, scope = cfg.first("sasl.oauthbearer.scope")
    unsecured = options.get("unsecuredLoginStringClaim_sub")
    for item in (cfg.get("sasl.oauthbearer.config") or "").split():
        name, _, value = item.partition("=")
        if name == "principal":
            unsecured = value
    settings = OAuthSettings(
        token_endpoint=endpoint, client_id=client_id or options.get("clientId"),
        client_secret=Secret(s) if (s := secret or options.get("clientSecret")) else None,
        scope=scope or options.get("scope"), unsecured_principal=unsecured)
    if endpoint is None and unsecured is None:
        raise cfg.error("sasl.mechanism", "OAUTHBEARER needs sasl.oauthbearer.token.endpoint.url",
                        "an https:// OIDC endpoint with clientId/clientSecret, or file://TOKEN")
    if endpoint is not None and not endpoint.startswith(("https://", "http://", "file://")):
        raise cfg.error("sasl.oauthbearer.token.endpoint.url", "expected an https:// or file:// URL")
    if (endpoint or "").startswith("http") and (not settings.client_id or not settings.client_secret):
        raise cfg.error("sasl.oauthbearer.token.endpoint.url", "needs a client id and secret",
                        'set clientId="…" clientSecret="…" in sasl.jaas.config, or '
                        "sasl.oauthbearer.client.id and sasl.oauthbearer.client.secret")
    return settings


def config_from_properties(text: str, *, bootstrap: str | None, source: str,
                           env: Mapping[str, str]) -> ConnectionConfig:
    """Build a ConnectionConfig from properties text; ``bootstrap`` wins over the file's."""
    cfg = _Settings(parse_properties(text), source, env)
    ignored = _check_keys(cfg)
    bootstrap_key, from_file = cfg.first("bootstrap.servers", "metadata.broker.list")
    bootstrap = bootstrap or from_file
    if bootstrap is None:
        raise KqplanError("no bootstrap server given",
                          hint=f"pass --bootstrap-server HOST:PORT or set {ENV_BOOTSTRAP}")
    check_bootstrap(bootstrap, where=cfg.where(bootstrap_key) if from_file == bootstrap and
                    bootstrap_key else "--bootstrap-server")
    raw_protocol = (cfg.get("security.protocol") or "PLAINTEXT").upper()
    if raw_protocol not in SecurityProtocol.__members__:
        raise cfg.error("security.protocol", f"{raw_protocol} is not a security protocol",
                        "use PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
    protocol = SecurityProtocol(raw_protocol)
    if not protocol.uses_tls:
        # every TLS setting, not only key material: a truststore type or hostname check set for
        # a PLAINTEXT connection would be silently ignored
        used = [k for k in cfg.by_key if k.startswith("ssl.") or k == "enable.ssl.certificate.verification"]
        if used:
            raise cfg.error(used[0], f"is set but security.protocol is {protocol}",
                            "set security.protocol=SSL (or SASL_SSL)")
    request_timeout = cfg.integer("request.timeout.ms", 0) or cfg.integer("socket.timeout.ms", 30_000)
    client_id = cfg.get("client.id")
    if client_id is not None and len(client_id.encode()) > MAX_CLIENT_ID_BYTES:
        raise cfg.error("client.id", f"is {len(client_id.encode())} bytes; Kafka's request header "
                        f"holds at most {MAX_CLIENT_ID_BYTES}", "use a short client id")
    tls, unused = _tls_settings(cfg) if protocol.uses_tls else (None, ())
    return ConnectionConfig(
        bootstrap=bootstrap, security_protocol=protocol, tls=tls,
        client_id=client_id or "kqplan", request_timeout_ms=request_timeout,
        connect_timeout_ms=cfg.integer("socket.connection.setup.timeout.ms", 10_000),
        receive_message_max_bytes=cfg.integer("receive.message.max.bytes",
                                              DEFAULT_RECEIVE_MAX_BYTES),
        source=source, ignored=ignored + unused, **_sasl(cfg, protocol))


def check_bootstrap(bootstrap: str, *, where: str) -> None:
    """``HOST:PORT[,HOST:PORT…]`` (IPv6 as ``[::1]:9092``); a clear error otherwise."""
    for item in bootstrap.split(","):
        host, _, port = item.strip().rpartition(":")
        host = host.split("://", 1)[-1]
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise KqplanError(f"{where}: {item.strip()!r} is not HOST:PORT",
                              hint="e.g. --bootstrap-server kafka-1.example.com:9092")


def load_connection_config(bootstrap: str | None, command_config: Path | None, *,
                           env: Mapping[str, str] | None = None) -> ConnectionConfig:
    """Read ``--command-config`` (or ``$KQPLAN_COMMAND_CONFIG``) for ``--bootstrap-server``
    (or ``$KQPLAN_BOOTSTRAP_SERVER``, or the file's ``bootstrap.servers``)."""
    env = os.environ if env is None else env
    bootstrap = bootstrap or env.get(ENV_BOOTSTRAP) or None
    if command_config is None and env.get(ENV_COMMAND_CONFIG):
        command_config = Path(env[ENV_COMMAND_CONFIG])
    if command_config is None:
        return config_from_properties("", bootstrap=bootstrap, source="(no --command-config)",
                                      env=env)
    try:
        with command_config.open("rb") as fh:
            # a client properties file is a few KB; /dev/zero or a mistaken path must not fill memory
            data = fh.read(MAX_PROPERTIES_BYTES + 1)
    except OSError as exc:
        raise KqplanError(f"cannot read --command-config {command_config}: {exc.strerror}") from None
    if len(data) > MAX_PROPERTIES_BYTES:
        raise KqplanError(f"--command-config {command_config} is over {MAX_PROPERTIES_BYTES // 1024} KiB: "
                          "not a client properties file", hint="give the client.properties file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")  # java.util.Properties' own encoding
    return config_from_properties(text, bootstrap=bootstrap, source=str(command_config), env=env)


__all__ = ["ENV_BOOTSTRAP", "ENV_COMMAND_CONFIG", "ConnectionConfig", "KerberosSettings", "OAuthSettings",
           "Secret", "SecurityProtocol", "TlsSettings", "check_bootstrap", "config_from_properties",
           "load_connection_config"]
