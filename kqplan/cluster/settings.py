"""The ``--command-config`` keys kqplan knows: used, ignored, or refused with a reason.

Java client names first, then librdkafka's. A key in none of these sets is a typo until
proven otherwise: kqplan says so (with a suggestion) instead of silently ignoring it.
"""

from __future__ import annotations

SUPPORTED = frozenset({
    # where and who
    "bootstrap.servers", "metadata.broker.list", "client.id", "security.protocol",
    "request.timeout.ms", "socket.timeout.ms", "socket.connection.setup.timeout.ms",
    "default.api.timeout.ms",
    "receive.message.max.bytes",
    # SASL
    "sasl.mechanism", "sasl.mechanisms", "sasl.jaas.config", "sasl.username", "sasl.password",
    "sasl.kerberos.service.name", "sasl.kerberos.keytab", "sasl.kerberos.principal",
    "sasl.login.callback.handler.class", "sasl.oauthbearer.token.endpoint.url",
    "sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret", "sasl.oauthbearer.scope",
    "sasl.oauthbearer.method", "sasl.oauthbearer.config",
    # TLS: PEM files or text, PKCS12 and JKS stores (kqplan/cluster/keystores.py)
    "ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.certificates",
    "ssl.truststore.password", "ssl.keystore.password",
    "ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.certificate.chain",
    "ssl.keystore.key", "ssl.key.password", "ssl.endpoint.identification.algorithm",
    "ssl.protocol", "ssl.enabled.protocols", "ssl.ca.location", "ssl.ca.pem",
    "ssl.certificate.location", "ssl.certificate.pem", "ssl.key.location", "ssl.key.pem",
    "ssl.crl.location", "enable.ssl.certificate.verification",
})

IGNORED = frozenset({
    # client tuning that does not change what kqplan sends or whom it trusts
    "retries", "retry.backoff.ms", "retry.backoff.max.ms",
    "metadata.max.age.ms", "connections.max.idle.ms", "reconnect.backoff.ms",
    "reconnect.backoff.max.ms", "socket.connection.setup.timeout.max.ms", "receive.buffer.bytes",
    "send.buffer.bytes", "client.dns.lookup", "client.rack", "auto.include.jmx.reporter",
    "metric.reporters", "enable.metrics.push", "security.providers",
    "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm", "ssl.secure.random.implementation",
    "ssl.cipher.suites",  # Java names; OpenSSL's defaults apply
    "sasl.kerberos.kinit.cmd", "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.ticket.renew.window.factor", "sasl.kerberos.ticket.renew.jitter",
    "sasl.oauthbearer.extensions", "ssl.ca.certificate.stores", "debug", "log_level",
    "api.version.request", "socket.keepalive.enable", "socket.nagle.disable",
})
IGNORED_PREFIXES = ("config.providers", "metrics.", "sasl.login.refresh.", "sasl.login.retry.",
                    "sasl.login.connect.", "sasl.login.read.", "sasl.oauthbearer.jwks.",
                    "sasl.oauthbearer.expected.", "sasl.oauthbearer.sub.claim.",
                    "sasl.oauthbearer.scope.claim.", "sasl.oauthbearer.clock.")

_KEYSTORE_HINT = ("convert it: keytool -importkeystore -srckeystore KEYSTORE.jks -destkeystore "
                  "ks.p12 -deststoretype PKCS12, then openssl pkcs12 -in ks.p12 -out client.pem "
                  "(set ssl.keystore.type=PEM and ssl.keystore.location=client.pem)")
CONVERT_HINTS = {
    "the CA certificates": "export it: keytool -exportcert -rfc -alias CA -keystore "
                           "TRUSTSTORE.jks -file ca.pem (or openssl pkcs12 -in truststore.p12 "
                           "-nokeys -out ca.pem), then set ssl.truststore.type=PEM and "
                           "ssl.truststore.location=ca.pem",
    "the client certificate and key": _KEYSTORE_HINT,
}

UNSUPPORTED: dict[str, tuple[str, str]] = {
    "bootstrap.controllers": ("kqplan talks to brokers, not controllers",
                              "set bootstrap.servers (or --bootstrap-server) to a broker listener"),
    "ssl.provider": ("is a Java setting; kqplan uses OpenSSL", "remove it"),
    "ssl.engine.factory.class": ("custom SSL engines are not supported", "use PEM files"),
    "sasl.client.callback.handler.class": ("custom SASL callback handlers are not supported",
                                           "use sasl.jaas.config or sasl.username/sasl.password"),
}

MECHANISM_MODULES = {
    "PLAIN": "PlainLoginModule",
    "SCRAM-SHA-256": "ScramLoginModule",
    "SCRAM-SHA-512": "ScramLoginModule",
    "OAUTHBEARER": "OAuthBearerLoginModule",
    "GSSAPI": "Krb5LoginModule",
}

SUPPORTED_HINT = ("kqplan reads security.protocol, sasl.* and ssl.* client settings (Java or "
                  "librdkafka names); see the README's connection section")
