"""An encrypted client key without ssl.key.password fails with the setting to add; never a prompt."""

from __future__ import annotations

import datetime

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.helpers import run_kqplan


def encrypted_pair(tmp_path):
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "client")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    (tmp_path / "client.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "client.key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"right-password")))


def test_no_password_fails_at_once_with_the_setting_to_add(tmp_path):
    encrypted_pair(tmp_path)
    props = tmp_path / "client.properties"
    props.write_text(f"security.protocol=SSL\nssl.certificate.location={tmp_path / 'client.pem'}\n"
                     f"ssl.key.location={tmp_path / 'client.key'}\n")
    result = run_kqplan("describe", "--bootstrap-server", "127.0.0.1:9", "--command-config", props,
                        stdin="", timeout=30)
    assert result.exit_code == 1
    assert "cannot load the client certificate and key" in result.stderr
    assert "the private key is encrypted: set ssl.key.password" in result.stderr
    props.write_text(props.read_text() + "ssl.key.password=wrong\n")
    wrong = run_kqplan("describe", "--bootstrap-server", "127.0.0.1:9", "--command-config", props,
                       stdin="", timeout=30)
    assert "check ssl.key.password: it does not decrypt the private key" in wrong.stderr
    assert "wrong" not in wrong.stderr.replace("check ssl.key.password", "")
