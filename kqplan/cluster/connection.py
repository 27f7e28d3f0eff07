"""How to reach a Kafka cluster: ``--bootstrap-server`` plus a ``--command-config`` file.

The file is the Java client properties file ``kafka-configs.sh --command-config`` users
already have (``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config``, ``ssl.*``);
librdkafka's spellings (``sasl.username``, ``sasl.password``, ``ssl.ca.location``, …) are
accepted too, and ``${NAME}`` in a value is read from the environment. Everything is checked
when the file is read, so a typo or an unsupported setting is reported as ``FILE:LINE`` before
any connection is made. The security settings (TLS, SASL) are read by
:mod:`kqplan.cluster.security`.

Secrets (passwords, client secrets, private keys) are held in :class:`Secret`, which never
shows its value; :meth:`ConnectionConfig.redact` scrubs them from any text that might have
picked one up (error messages from the network layer, for instance).
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kqplan.cluster.clientfiles import MAX_PROPERTIES_BYTES, read_client_file
from kqplan.cluster.kerberos import KerberosSettings
from kqplan.cluster.properties import parse_properties
from kqplan.cluster.security import OAuthSettings, SecurityProtocol, Settings, check_keys, sasl, tls_settings
from kqplan.cluster.tls import Secret, TlsSettings, build_ssl_context
from kqplan.core.errors import KqplanError

ENV_BOOTSTRAP = "KQPLAN_BOOTSTRAP_SERVER"
ENV_COMMAND_CONFIG = "KQPLAN_COMMAND_CONFIG"
MAX_CLIENT_ID_BYTES = 32_767  # the request header's int16-length string
DEFAULT_RECEIVE_MAX_BYTES = 256 * 1024 * 1024
"""A describe of 100k entities is ~10 MB; this admits ~2.5M. kafka-python's own default
(1 MB) would reject a 10k-entity cluster. The limit exists because kafka-python allocates a
frame's buffer from the size the broker announces, before reading it."""


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
    api_timeout_ms: int = 60_000
    """``default.api.timeout.ms``: one operation, its retries included."""
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

def config_from_properties(text: str, *, bootstrap: str | None, source: str,
                           env: Mapping[str, str]) -> ConnectionConfig:
    """Build a ConnectionConfig from properties text; ``bootstrap`` wins over the file's."""
    cfg = Settings(parse_properties(text), source, env)
    ignored = check_keys(cfg)
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
    tls, unused = tls_settings(cfg) if protocol.uses_tls else (None, ())
    return ConnectionConfig(
        bootstrap=bootstrap, security_protocol=protocol, tls=tls,
        client_id=client_id or "kqplan", request_timeout_ms=request_timeout,
        connect_timeout_ms=cfg.integer("socket.connection.setup.timeout.ms", 10_000),
        api_timeout_ms=cfg.integer("default.api.timeout.ms", 60_000),
        receive_message_max_bytes=cfg.integer("receive.message.max.bytes",
                                              DEFAULT_RECEIVE_MAX_BYTES),
        source=source, ignored=ignored + unused, **sasl(cfg, protocol))


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
    data = read_client_file(command_config, what="command config", limit=MAX_PROPERTIES_BYTES,
                            too_big="give the client.properties file (a few KB)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")  # java.util.Properties' own encoding
    return config_from_properties(text, bootstrap=bootstrap, source=str(command_config), env=env)


__all__ = ["ENV_BOOTSTRAP", "ENV_COMMAND_CONFIG", "ConnectionConfig", "KerberosSettings", "OAuthSettings",
           "Secret", "SecurityProtocol", "TlsSettings", "check_bootstrap", "config_from_properties",
           "load_connection_config"]
