"""Test certificates: a CA, a server certificate for 127.0.0.1/localhost and a client one (PEM)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class Pki:
    ca: Path
    other_ca: Path  # a CA that signed nothing the servers use: verification must fail
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path  # encrypted with KEY_PASSWORD
    client_key_plain: Path


KEY_PASSWORD = "key-pass-Zq81"


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(subject: str, key, issuer: str, issuer_key, *, ca: bool, sans=()):
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(_name(issuer))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(days=1))
               .not_valid_after(now + datetime.timedelta(days=30))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
            encipher_only=False, decipher_only=False), critical=True)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(cert) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key(key, password: str | None = None) -> bytes:
    enc = (serialization.BestAvailableEncryption(password.encode()) if password
           else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc)


def make_pki(directory: Path) -> Pki:
    ca_key, other_key, server_key, client_key = (ec.generate_private_key(ec.SECP256R1())
                                                 for _ in range(4))
    ca = _cert("kqplan test CA", ca_key, "kqplan test CA", ca_key, ca=True)
    other = _cert("some other CA", other_key, "some other CA", other_key, ca=True)
    server = _cert("localhost", server_key, "kqplan test CA", ca_key, ca=False,
                   sans=(x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))))
    client = _cert("kqplan-client", client_key, "kqplan test CA", ca_key, ca=False)
    files = {
        "ca.pem": _pem(ca), "other-ca.pem": _pem(other), "server.pem": _pem(server),
        "server.key": _key(server_key), "client.pem": _pem(client),
        "client.key": _key(client_key, KEY_PASSWORD), "client-plain.key": _key(client_key),
    }
    for name, data in files.items():
        (directory / name).write_bytes(data)
    d = directory
    return Pki(d / "ca.pem", d / "other-ca.pem", d / "server.pem", d / "server.key",
               d / "client.pem", d / "client.key", d / "client-plain.key")
