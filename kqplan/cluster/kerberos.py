"""SASL/GSSAPI (Kerberos) through the ``gssapi`` package: ``pip install 'kqplan[kerberos]'``.

Java clients log in with JAAS's ``Krb5LoginModule``: a keytab and a principal
(``useKeyTab=true keyTab="…" principal="…"``), or the user's ticket cache (``kinit``). kqplan
reads the same options (kqplan/cluster/security.py) into :class:`KerberosSettings` and acquires
the credentials itself, before connecting, so that a missing keytab or ticket is reported as
such rather than as a failed connection:

- a keytab's tickets go to a credential cache private to this process (``MEMORY:``): the
  user's own ticket cache is neither read nor overwritten, and no environment variable is set;
- without a keytab, the ticket cache named by ``ticketCache`` or the default one is used.

kafka-python's GSSAPI mechanism only ever uses the default credentials, so :func:`install`
registers a subclass that hands it the acquired ones (keyed by principal: one process may hold
several configurations). The target is ``SERVICE@HOST`` with HOST the broker address dialled,
as Java and librdkafka do.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from typing import Any

from kqplan.core.errors import KqplanError

INSTALL_HINT = (
    "pip install 'kqplan[kerberos]' (the gssapi package builds against MIT Kerberos: "
    "on Debian or Ubuntu apt-get install libkrb5-dev first)"
)


class KerberosError(KqplanError):
    """Kerberos credentials could not be acquired or used (no ticket, bad keytab, unknown service)."""


@dataclass(frozen=True, slots=True)
class KerberosSettings:
    """Who logs in, and how. ``keytab`` set: log in from it as ``principal`` (or the keytab's first
    principal); else use the ticket cache ``ticket_cache`` (or the default), as ``kinit`` left it."""

    service_name: str = "kafka"
    principal: str | None = None
    keytab: str | None = None
    ticket_cache: str | None = None

    def describe(self) -> str:
        """How the credentials are found, for messages."""
        if self.keytab is not None:
            return f"keytab {self.keytab}"
        return f"ticket cache {self.ticket_cache}" if self.ticket_cache else "the default ticket cache"


_credentials: dict[str | None, Any] = {}
"""Acquired credentials by principal (None: the ticket cache's default principal)."""
_private_caches = itertools.count(1)


def _gssapi() -> Any:
    try:
        import gssapi  # type: ignore[import-not-found,unused-ignore]  # the kerberos extra
    except (ImportError, OSError):  # OSError: the package is there, libgssapi_krb5 is not
        raise KerberosError("SASL/GSSAPI needs the optional package gssapi", hint=INSTALL_HINT) from None
    return gssapi


def _reason(exc: Exception) -> str:
    """The Kerberos reason of a GSSError: its minor status ("Server ... not found in Kerberos
    database", "Cannot contact any KDC ..."), which says more than the generic major one."""
    text = " ".join(str(exc).split())
    _, minor, reason = text.rpartition("Minor (")
    return reason.split("): ", 1)[-1] if minor else text


def acquire(settings: KerberosSettings) -> Any:
    """The initiator credentials for ``settings`` (a ``gssapi.Credentials``); a KerberosError saying
    what to do when there are none."""
    gssapi = _gssapi()
    name = gssapi.Name(settings.principal, gssapi.NameType.kerberos_principal) if settings.principal else None
    store: dict[bytes | str, bytes | str] | None
    if settings.keytab is not None:
        store = {
            "client_keytab": settings.keytab,
            "ccache": f"MEMORY:kqplan-{os.getpid()}-{next(_private_caches)}",
        }
    elif settings.ticket_cache is not None:
        store = {"ccache": settings.ticket_cache}
    else:
        store = None
    try:
        credentials = gssapi.Credentials(name=name, usage="initiate", store=store)
        # Asking for the lifetime makes MIT Kerberos log in from the keytab now, so a principal the
        # KDC does not know, or a KDC out of reach, is reported here, before any connection.
        credentials.lifetime  # noqa: B018
    except gssapi.exceptions.GSSError as exc:
        who = settings.principal or "the default principal"
        if settings.keytab is not None:
            hint = (
                f"check that the keytab holds keys for {who} (klist -k {settings.keytab}) and "
                "that the KDC in krb5.conf (or $KRB5_CONFIG) is reachable"
            )
        else:
            hint = (
                "run kinit first, or log in from a keytab: sasl.jaas.config=com.sun.security.auth."
                'module.Krb5LoginModule required useKeyTab=true keyTab="/path/to.keytab" '
                'principal="name@REALM";'
            )
        raise KerberosError(
            f"no Kerberos credentials for {who} from {settings.describe()}: {_reason(exc)}", hint=hint
        ) from None
    return credentials


def install(settings: KerberosSettings) -> None:
    """Acquire the credentials and make kafka-python's GSSAPI mechanism use them."""
    _credentials[settings.principal] = acquire(settings)
    from kafka.net.sasl import register_sasl_mechanism

    register_sasl_mechanism("GSSAPI", _mechanism_class(), overwrite=True)


def _mechanism_class() -> type:
    from kafka.net.sasl.gssapi import SaslMechanismGSSAPI

    gssapi = _gssapi()

    class CredentialedGSSAPI(SaslMechanismGSSAPI):  # type: ignore[misc]  # kafka-python is untyped
        """kafka-python's mechanism, with the credentials kqplan acquired instead of the default ones,
        and Kerberos failures in kqplan's words."""

        def __init__(self, **config: Any) -> None:
            credentials = _credentials.get(config.get("sasl_plain_username"))
            if credentials is None:  # not a configuration kqplan acquired: kafka-python's behaviour
                super().__init__(**config)
                return
            # The parent's __init__, with creds= (it has no way to take them).
            self._is_done = False
            self._is_authenticated = False
            service = config["sasl_kerberos_service_name"]
            host = config.get("sasl_kerberos_domain_name") or config.get("host") or ""
            self.target = f"{service}@{host}"
            try:
                self.gssapi_name = gssapi.Name(
                    self.target, name_type=gssapi.NameType.hostbased_service
                ).canonicalize(gssapi.MechType.kerberos)
                self._client_ctx = gssapi.SecurityContext(
                    name=self.gssapi_name, usage="initiate", creds=credentials
                )
                self._next_token = self._client_ctx.step(None)
            except gssapi.exceptions.GSSError as exc:
                raise KerberosError(
                    f"Kerberos: no service ticket for {self.target} (the broker's principal "
                    f"{service}/{host}@REALM): {_reason(exc)}",
                    hint="set sasl.kerberos.service.name to the first part of the broker's principal, "
                    "and reach the broker by the host name in that principal",
                ) from None
            # The authorization identity sent in the last step (RFC 4752): the client's principal,
            # as Java clients send it (kafka-python sends the service's name there).
            self.auth_id = str(credentials.name)

        def receive(self, auth_bytes: bytes) -> None:
            try:
                super().receive(auth_bytes)
            except gssapi.exceptions.GSSError as exc:
                raise KerberosError(
                    f"Kerberos: the broker's answer does not verify: {_reason(exc)}",
                    hint=f"check that the broker's keytab is current (kvno) for {self.target}",
                ) from None

    return CredentialedGSSAPI
