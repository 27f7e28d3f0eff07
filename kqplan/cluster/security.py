"""The security settings of a client properties file: ``security.protocol``, TLS (trust and
key stores, PEM files and inline PEM, host-name checking, protocol versions) and SASL (PLAIN,
SCRAM, OAUTHBEARER, GSSAPI), read from a ``--command-config`` file's settings and checked as
they are read (:class:`Settings`, :func:`check_keys`, :func:`tls_settings`, :func:`sasl`)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from kqplan.cluster import settings as known
from kqplan.cluster.clientfiles import MAX_STORE_BYTES, check_client_file, read_client_file
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
from kqplan.cluster.properties import JaasConfig, Setting, interpolate, parse_jaas
from kqplan.cluster.tls import Secret, TlsSettings, normalize_pem
from kqplan.core.errors import KqplanError


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


# -- reading a --command-config file -----------------------------------------------------------

class Settings:
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


def check_keys(cfg: Settings) -> tuple[str, ...]:
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


def _read_pem_path(cfg: Settings, key: str, kind: str) -> str | None:
    """A PEM file setting: it must be readable and PEM (librdkafka's ``ssl.*.location`` names)."""
    path = cfg.get(key)
    if path is None:
        return None
    try:
        head = read_client_file(path, what="PEM file", limit=MAX_STORE_BYTES,
                                too_big="a PEM file is a few KB: check the path")
    except KqplanError as exc:
        raise cfg.error(key, exc.message, exc.hint) from None
    if b"-----BEGIN" not in head:
        hint = known.CONVERT_HINTS[kind]
        if sniff_format(head) in JAVA_FORMATS:
            store = "ssl.truststore" if kind == "the CA certificates" else "ssl.keystore"
            hint = f"a PKCS12 or JKS store goes in {store}.location (with {store}.password); {hint}"
        raise cfg.error(key, f"{path} is not a PEM file; kqplan needs {kind} in PEM format", hint)
    return path


def _crl_path(cfg: Settings) -> str | None:
    """``ssl.crl.location``: OpenSSL reads it when the connection is made; checked now (a regular
    file under the bound), so that a FIFO or a device is reported at its line."""
    path = cfg.get("ssl.crl.location")
    if path is not None:
        try:
            check_client_file(path, what="CRL file")
        except KqplanError as exc:
            raise cfg.error("ssl.crl.location", exc.message, exc.hint) from None
    return path


def _secret(cfg: Settings, key: str) -> Secret | None:
    value = cfg.get(key)
    return None if value is None else Secret(value)


def _truststore(cfg: Settings) -> tuple[str | None, str | None, tuple[str, ...]]:
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


def _keystore(cfg: Settings) -> tuple[str | None, ClientIdentity | None, tuple[str, ...]]:
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


def tls_settings(cfg: Settings) -> tuple[TlsSettings, tuple[str, ...]]:
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
        crl_file=_crl_path(cfg),
        check_hostname=algorithm is None or algorithm.lower() == "https",
        verify=verify is None or verify.lower() == "true",
        tls13_only=_tls13_only(cfg),
    )
    unused = tuple(f"{key} ({cfg.source}:{cfg.by_key[key].line})" for key in unused_trust + unused_key)
    return tls, unused


def _tls13_only(cfg: Settings) -> bool:
    versions: list[str] = []
    for key in ("ssl.protocol", "ssl.enabled.protocols"):
        value = cfg.get(key)
        for item in filter(None, (part.strip() for part in (value or "").split(","))):
            if item not in ("TLS", "TLSv1.2", "TLSv1.3"):
                raise cfg.error(key, f"{item} is not supported", "use TLSv1.2 or TLSv1.3")
            versions.append(item)
    return bool(versions) and all(v == "TLSv1.3" for v in versions)


def _jaas(cfg: Settings) -> JaasConfig | None:
    text = cfg.get("sasl.jaas.config")
    if text is None:
        return None
    try:
        return parse_jaas(text)
    except ValueError as exc:
        raise cfg.error("sasl.jaas.config", f"cannot parse it: {exc}",
                        'write e.g. org.apache.kafka.common.security.plain.PlainLoginModule '
                        'required username="alice" password="${ALICE_PASSWORD}";') from None


def sasl(cfg: Settings, protocol: SecurityProtocol) -> dict[str, Any]:
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


def _kerberos(cfg: Settings, jaas: JaasConfig | None) -> KerberosSettings:
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
            head = read_client_file(keytab, what="the keytab", limit=MAX_STORE_BYTES,
                                    too_big="a keytab is a few KB: check the path")[:2]
        except KqplanError as exc:
            raise cfg.error(keytab_key or "sasl.kerberos.keytab", exc.message, exc.hint) from None
        if head not in _KEYTAB_VERSIONS:
            raise cfg.error(keytab_key or "sasl.kerberos.keytab", f"{keytab} is not a Kerberos keytab",
                            "create one with ktutil or kadmin's ktadd (Java's ktab writes the same format)")
    ticket_cache = options.get("ticketCache") if flags["useTicketCache"] else None
    return KerberosSettings(service_name=service or jaas_service or "kafka",
                            principal=options.get("principal") or cfg.get("sasl.kerberos.principal"),
                            keytab=keytab, ticket_cache=ticket_cache)


def _oauth(cfg: Settings, options: Mapping[str, str]) -> OAuthSettings:
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
