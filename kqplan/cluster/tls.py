"""TLS for Kafka connections: PEM certificates, verification on unless turned off.

Python's ``ssl`` reads PEM (files, or CA text in memory). Java's PKCS12/JKS stores are turned
into PEM text when the settings are read (kqplan/cluster/keystores.py): their CA certificates
arrive here as ``ca_pem``, their client certificate and decrypted key as ``cert_pem``/``key_pem``.
"""

from __future__ import annotations

import contextlib
import os
import re
import ssl
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

from kqplan.cluster.clientfiles import MAX_STORE_BYTES, check_client_file, read_client_file
from kqplan.core.errors import KqplanError


class Secret:
    """A string that does not show itself: ``repr``, ``str`` and f-strings print ``***``."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The value; only for handing to the network layer."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    def __str__(self) -> str:
        return "***"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """Certificates are PEM, files or text (Java stores arrive as text, already decrypted)."""

    ca_file: str | None = None
    ca_pem: str | None = None
    cert_file: str | None = None
    cert_pem: str | None = None
    key_file: str | None = None
    key_pem: Secret | None = None
    key_password: Secret | None = None
    crl_file: str | None = None
    check_hostname: bool = True
    verify: bool = True
    tls13_only: bool = False


@contextlib.contextmanager
def _pem_files(cert_pem: str, key_pem: str) -> Iterator[tuple[str, str]]:
    """Python's ssl loads client certificates only from files: write inline PEM to a private
    directory (mode 0700) just long enough to load it."""
    with tempfile.TemporaryDirectory(prefix="kqplan-tls-") as directory:
        paths = []
        for name, text in (("cert.pem", cert_pem), ("key.pem", key_pem)):
            path = os.path.join(directory, name)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            paths.append(path)
        yield paths[0], paths[1]


_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)


def normalize_pem(text: str) -> str:
    """Restore the line breaks of PEM written on one line (Java accepts that in properties
    values; OpenSSL does not). Blocks that already have line breaks are kept as they are."""
    def reflow(match: re.Match[str]) -> str:
        label, body = match.group(1), match.group(2)
        if "\n" in body.strip():
            return match.group(0)
        data = "".join(body.split())
        chunks = [data[i:i + 64] for i in range(0, len(data), 64)]
        return "\n".join([f"-----BEGIN {label}-----", *chunks, f"-----END {label}-----"])

    return _PEM_BLOCK.sub(reflow, text)


def build_ssl_context(tls: TlsSettings) -> ssl.SSLContext:
    """A client context: TLS 1.2+, the given CA (else the system's), hostname checks on."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3 if tls.tls13_only else ssl.TLSVersion.TLSv1_2
    what = "the CA certificates"
    for name, path in (("CA file", tls.ca_file), ("CRL file", tls.crl_file),
                       ("certificate file", tls.cert_file), ("key file", tls.key_file)):
        if path is not None:  # OpenSSL opens these itself: a FIFO would hang it, /dev/zero fill memory
            check_client_file(path, what=name)
    try:
        if not tls.verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        else:
            ctx.check_hostname = tls.check_hostname
            if tls.ca_file is None and tls.ca_pem is None:
                ctx.load_default_certs()
            if tls.ca_file is not None:
                ctx.load_verify_locations(cafile=tls.ca_file)
            if tls.ca_pem is not None:
                ctx.load_verify_locations(cadata=normalize_pem(tls.ca_pem))
            if tls.crl_file is not None:
                what = f"the CRL {tls.crl_file}"
                ctx.load_verify_locations(cafile=tls.crl_file)
                ctx.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
        given = tls.key_password.reveal() if tls.key_password else None

        def password() -> str:
            # a callable, never None: without one OpenSSL prompts on the terminal for an encrypted
            # key, which hangs a CI job. "" makes an encrypted key fail to decrypt instead.
            return given or ""

        what = "the client certificate and key"
        if tls.cert_file is not None:
            ctx.load_cert_chain(tls.cert_file, tls.key_file, password)
        elif tls.cert_pem is not None and tls.key_pem is not None:
            with _pem_files(normalize_pem(tls.cert_pem),
                            normalize_pem(tls.key_pem.reveal())) as (cert, key):
                ctx.load_cert_chain(cert, key, password)
    except (ssl.SSLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc.__class__.__name__
        if what.startswith("the client") and _encrypted_key(tls):
            hint = ("the private key is encrypted: set ssl.key.password" if given is None else
                    "check ssl.key.password: it does not decrypt the private key")
        elif isinstance(exc, OSError) and not isinstance(exc, ssl.SSLError):
            hint = f"check that the file exists and is readable ({exc.strerror})"
        else:
            hint = "certificates and keys must be PEM"
        raise KqplanError(f"cannot load {what}: {reason}", hint=hint) from None
    return ctx


def _encrypted_key(tls: TlsSettings) -> bool:
    """Whether the client key is an encrypted PEM (OpenSSL only says "PEM lib" either way)."""
    text = tls.key_pem.reveal() if tls.key_pem is not None else None
    path = tls.key_file or tls.cert_file
    if text is None and path is not None:
        try:
            text = read_client_file(path, what="key file", limit=MAX_STORE_BYTES,
                                    too_big="").decode("ascii", "replace")
        except KqplanError:
            return False
    return text is not None and ("ENCRYPTED PRIVATE KEY" in text or "Proc-Type: 4,ENCRYPTED" in text)
