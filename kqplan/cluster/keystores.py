"""Java key and trust stores (PKCS12, JKS, JCEKS) turned into the PEM that Python's ``ssl`` loads.

Kafka's Java clients read ``ssl.keystore.location``/``ssl.truststore.location`` as a KeyStore of
``ssl.*.type`` (JKS by default in Kafka's config, but keytool has written PKCS12 by default since
Java 9, and the JDK reads either file under either name: ``keystore.type.compat``). kqplan does the
same: the *content* decides between PKCS12 and JKS/JCEKS, and a declared type only has to be one of
them. PEM stays PEM (handled by :mod:`kqplan.cluster.tls` from the file itself).

PKCS12 is read with ``cryptography``; JKS/JCEKS with the ``jks`` module of the optional
``purejks`` package (``pip install 'kqplan[jks]'``), else the error says how to convert the store
with keytool. The private key comes out unencrypted and is only ever held as a :class:`Secret`;
:func:`kqplan.cluster.tls.build_ssl_context` writes it to a 0600 file in a 0700 directory just
long enough for OpenSSL to load it. Trusted certificates stay in memory (``cadata``).

No message here ever holds a password or key material: a :class:`StoreError` names the setting
to blame, and the caller adds the properties file and line.
"""

from __future__ import annotations

import base64
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from kqplan.cluster.clientfiles import MAX_STORE_BYTES, read_client_file
from kqplan.cluster.tls import Secret
from kqplan.core.errors import KqplanError

_JKS_MAGIC = b"\xfe\xed\xfe\xed"
_JCEKS_MAGIC = b"\xce\xce\xce\xce"


class StoreFormat(StrEnum):
    PEM = "PEM"
    PKCS12 = "PKCS12"
    JKS = "JKS"
    JCEKS = "JCEKS"


JAVA_FORMATS = frozenset({StoreFormat.PKCS12, StoreFormat.JKS, StoreFormat.JCEKS})


class StoreError(Exception):
    """A store kqplan cannot use. ``setting`` is the property to point at (``ssl.keystore.password``
    for a wrong password, ``ssl.keystore.location`` for an unreadable file, …)."""

    def __init__(self, setting: str, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.setting = setting
        self.message = message
        self.hint = hint


@dataclass(frozen=True, slots=True)
class StoreKeys:
    """The property names of one store: ``ssl.keystore.*`` or ``ssl.truststore.*``."""

    prefix: str  # "ssl.keystore" | "ssl.truststore"

    @property
    def location(self) -> str:
        return f"{self.prefix}.location"

    @property
    def type(self) -> str:
        return f"{self.prefix}.type"

    @property
    def password(self) -> str:
        return f"{self.prefix}.password"


KEYSTORE = StoreKeys("ssl.keystore")
TRUSTSTORE = StoreKeys("ssl.truststore")
KEY_PASSWORD = "ssl.key.password"


@dataclass(frozen=True, slots=True)
class ClientIdentity:
    """A client certificate chain (leaf first) and its unencrypted private key, both PEM."""

    chain_pem: str
    key_pem: Secret
    alias: str | None


def declared_format(value: str | None, keys: StoreKeys) -> StoreFormat | None:
    """``ssl.*.type``: None when unset; a StoreError for a type kqplan cannot read."""
    if value is None or not value.strip():
        return None
    try:
        return StoreFormat(value.strip().upper())
    except ValueError:
        raise StoreError(
            keys.type,
            f"{value.strip()} is not supported",
            "use PKCS12 (keytool's default), JKS or PEM; convert other stores with "
            f"keytool -importkeystore -srckeystore STORE -srcstoretype {value.strip()} "
            "-destkeystore store.p12 -deststoretype PKCS12",
        ) from None


def read_store(path: str, keys: StoreKeys) -> bytes:
    """The store file's bytes; a StoreError naming ``*.location`` when it cannot be read."""
    try:
        return read_client_file(path, what="key store" if keys == KEYSTORE else "trust store",
                                limit=MAX_STORE_BYTES,
                                too_big="a key or trust store is a few KB: check the path")
    except KqplanError as exc:
        raise StoreError(keys.location, exc.message, exc.hint or
                         "check the path (it is read relative to the directory kqplan runs in) "
                         "and that the file is readable") from None


def sniff_format(data: bytes) -> StoreFormat | None:
    """What the bytes are: PEM text, a JKS/JCEKS store (magic number) or PKCS12 (a DER SEQUENCE
    whose first element is the version INTEGER 3); None for anything else."""
    if data.startswith(_JKS_MAGIC):
        return StoreFormat.JKS
    if data.startswith(_JCEKS_MAGIC):
        return StoreFormat.JCEKS
    if b"-----BEGIN" in data[:65536]:
        return StoreFormat.PEM
    # 30 8x <len> 02 01 03: SEQUENCE { INTEGER 3 (PFX version), ... }
    if len(data) > 8 and data[0] == 0x30:
        length = data[1]
        offset = 2 + (length & 0x7F if length & 0x80 else 0)
        if data[offset : offset + 3] == b"\x02\x01\x03":
            return StoreFormat.PKCS12
    return None


def resolve_format(data: bytes, declared: StoreFormat | None, path: str, keys: StoreKeys) -> StoreFormat:
    """The format to read ``data`` as, given ``ssl.*.type``. JKS and PKCS12 may stand for each other
    (the JDK reads either under either name); PEM and the Java formats may not."""
    found = sniff_format(data)
    if found is None:
        raise StoreError(
            keys.location,
            f"{path} is not a PEM file, a PKCS12 store or a JKS store",
            f"point {keys.location} at the store file kafka-configs.sh uses",
        )
    if declared is None or declared == found:
        return found
    if declared in JAVA_FORMATS and found in JAVA_FORMATS:
        return found
    if found is StoreFormat.PEM:
        raise StoreError(
            keys.type, f"is {declared}, but {path} is a PEM file", f"set {keys.type}=PEM (or remove it)"
        )
    raise StoreError(
        keys.type, f"is PEM, but {path} is a {found} store", f"set {keys.type}={found} and {keys.password}"
    )


# -- PEM text without OpenSSL's help ------------------------------------------------------------


def _pem(label: str, der: bytes) -> str:
    body = base64.b64encode(der).decode("ascii")
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return "\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----", ""])


def _certs_pem(ders: Sequence[bytes]) -> str:
    return "".join(ssl.DER_cert_to_PEM_cert(der) for der in ders)


# -- PKCS12 -------------------------------------------------------------------------------------


def _load_pkcs12(
    data: bytes, passwords: Sequence[Secret | None], path: str, keys: StoreKeys, password_setting: str
) -> Any:
    """The first password that opens the store (PKCS12 uses one for the MAC and the key bags)."""
    from cryptography.hazmat.primitives.serialization import pkcs12

    for password in passwords:
        try:
            return pkcs12.load_pkcs12(data, password.reveal().encode() if password else None)
        except ValueError:
            continue
        except Exception as exc:  # e.g. UnsupportedAlgorithm for a legacy cipher
            raise StoreError(
                keys.location,
                f"cannot read the PKCS12 store {path}: {exc.__class__.__name__}",
                "re-create it with a current keytool (PKCS12, AES-256)",
            ) from None
    if not any(passwords):
        raise StoreError(
            password_setting,
            f"is not set, and the PKCS12 store {path} is encrypted",
            f"set {password_setting} to the store's password",
        )
    raise StoreError(
        password_setting,
        f"does not open the PKCS12 store {path} (wrong password, or a damaged file)",
        f"check {password_setting}: it is the -storepass given to keytool",
    )


def _pkcs12_identity(
    data: bytes, path: str, store_password: Secret | None, key_password: Secret | None
) -> ClientIdentity:
    from cryptography.hazmat.primitives import serialization

    # keytool writes one password for a PKCS12 store and its keys; other tools may have used the
    # key password for both, which Java accepts as ssl.key.password.
    candidates = [store_password] + (
        [key_password] if key_password and key_password != store_password else []
    )
    loaded = _load_pkcs12(data, candidates, path, KEYSTORE, KEYSTORE.password)
    if loaded.key is None or loaded.cert is None:
        raise StoreError(
            KEYSTORE.location,
            f"the PKCS12 store {path} holds no private key",
            "ssl.keystore.location is the client's own certificate and key; the CA "
            "certificates belong in ssl.truststore.location",
        )
    key_der = loaded.key.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    ders = [loaded.cert.certificate.public_bytes(serialization.Encoding.DER)]
    ders += [c.certificate.public_bytes(serialization.Encoding.DER) for c in loaded.additional_certs]
    alias = loaded.cert.friendly_name
    return ClientIdentity(
        _certs_pem(ders),
        Secret(_pem("PRIVATE KEY", key_der)),
        alias.decode("utf-8", "replace") if alias else None,
    )


def _pkcs12_trusted(data: bytes, path: str, password: Secret | None) -> list[bytes]:
    from cryptography.hazmat.primitives import serialization

    loaded = _load_pkcs12(data, [password], path, TRUSTSTORE, TRUSTSTORE.password)
    certs = ([loaded.cert] if loaded.cert is not None else []) + list(loaded.additional_certs)
    return [c.certificate.public_bytes(serialization.Encoding.DER) for c in certs]


# -- JKS / JCEKS --------------------------------------------------------------------------------


def _jks_module(path: str, keys: StoreKeys) -> Any:
    try:
        import jks  # type: ignore[import-untyped,import-not-found,unused-ignore]  # the jks extra
    except ImportError:
        raise StoreError(
            keys.location,
            f"{path} is a JKS store, and reading JKS needs the optional package purejks",
            "pip install 'kqplan[jks]', or convert the store to PKCS12: keytool "
            f"-importkeystore -srckeystore {path} -destkeystore store.p12 "
            f"-deststoretype PKCS12, then set {keys.location}=store.p12 and "
            f"{keys.type}=PKCS12",
        ) from None
    return jks


def _load_jks(data: bytes, path: str, keys: StoreKeys, password: Secret | None) -> Any:
    jks = _jks_module(path, keys)
    try:
        # Without a password the JDK, and jks, skip the integrity check: a trust store is often
        # configured that way.
        return jks.KeyStore.loads(data, password.reveal() if password else None, try_decrypt_keys=False)
    except jks.util.KeystoreSignatureException:
        raise StoreError(
            keys.password,
            f"does not open the JKS store {path} (the store's checksum "
            "does not match: wrong password, or a damaged file)",
            f"check {keys.password}: it is the -storepass given to keytool",
        ) from None
    except (jks.util.KeystoreException, ValueError, NotImplementedError) as exc:
        raise StoreError(
            keys.location,
            f"cannot read the JKS store {path}: {exc.__class__.__name__}",
            "check the file with keytool -list",
        ) from None


def _jks_identity(
    data: bytes, path: str, store_password: Secret | None, key_password: Secret | None
) -> ClientIdentity:
    store = _load_jks(data, path, KEYSTORE, store_password)
    entries = dict(store.private_keys)
    if not entries:
        raise StoreError(
            KEYSTORE.location,
            f"the JKS store {path} holds no private key",
            "ssl.keystore.location is the client's own certificate and key; the CA "
            "certificates belong in ssl.truststore.location",
        )
    if len(entries) > 1:
        # The JDK's key manager picks one per handshake from what the broker asks for; kqplan
        # hands OpenSSL exactly one.
        raise StoreError(
            KEYSTORE.location,
            f"the JKS store {path} holds {len(entries)} private keys ({', '.join(sorted(entries))})",
            "keep the client's key only: keytool -importkeystore -srckeystore STORE "
            "-srcalias ALIAS -destkeystore client.p12 -deststoretype PKCS12",
        )
    alias, entry = next(iter(entries.items()))
    # Kafka: ssl.key.password, else the store password (keytool's default for -keypass).
    password = key_password or store_password
    if password is None:
        raise StoreError(
            KEY_PASSWORD,
            "is not set, and the JKS key needs a password",
            "set ssl.keystore.password (and ssl.key.password if keytool was given a different -keypass)",
        )
    try:
        entry.decrypt(password.reveal())
    except Exception:  # jks raises DecryptionFailureException, or ValueError on bad padding
        setting = KEY_PASSWORD if key_password else KEYSTORE.password
        raise StoreError(
            setting,
            f"does not decrypt the private key {alias!r} in {path}",
            "set ssl.key.password to the key's password (keytool -keypass) if it differs from the store's",
        ) from None
    ders = [der for kind, der in entry.cert_chain if kind == "X.509"]
    if not ders:
        raise StoreError(KEYSTORE.location, f"the key {alias!r} in {path} has no X.509 certificate")
    return ClientIdentity(_certs_pem(ders), Secret(_pem("PRIVATE KEY", entry.pkey_pkcs8)), alias)


def _jks_trusted(data: bytes, path: str, password: Secret | None) -> list[bytes]:
    store = _load_jks(data, path, TRUSTSTORE, password)
    ders = [entry.cert for entry in store.certs.values() if entry.type == "X.509"]
    # The JDK also trusts the leaf of a key entry in a trust store (TrustStoreUtil).
    ders += [
        entry.cert_chain[0][1]
        for entry in store.private_keys.values()
        if entry.cert_chain and entry.cert_chain[0][0] == "X.509"
    ]
    return ders


# -- entry points -------------------------------------------------------------------------------


def load_identity(
    path: str, data: bytes, fmt: StoreFormat, *, store_password: Secret | None, key_password: Secret | None
) -> ClientIdentity:
    """The client certificate and key from a PKCS12/JKS/JCEKS ``ssl.keystore.location``."""
    if fmt is StoreFormat.PKCS12:
        return _pkcs12_identity(data, path, store_password, key_password)
    return _jks_identity(data, path, store_password, key_password)


def load_trusted(path: str, data: bytes, fmt: StoreFormat, *, password: Secret | None) -> str:
    """The CA certificates of a PKCS12/JKS/JCEKS ``ssl.truststore.location``, as PEM text."""
    ders = (
        _pkcs12_trusted(data, path, password)
        if fmt is StoreFormat.PKCS12
        else _jks_trusted(data, path, password)
    )
    if not ders:
        raise StoreError(
            TRUSTSTORE.location,
            f"the {fmt} store {path} holds no certificates",
            f"import the CA: keytool -importcert -alias ca -file ca.pem -keystore {path}",
        )
    return _certs_pem(ders)
