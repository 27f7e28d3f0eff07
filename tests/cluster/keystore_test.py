"""Java key and trust stores (PKCS12, JKS) made by the JDK's keytool, as a Java shop has them.

Read from a ``--command-config`` file (the mapping and every error message), then used against the
real broker: the shared broker's SSL listener checks the trust stores, and a broker started here,
whose SSL listener requires client certificates, checks the key stores (its ACL authorizer lets
only the certificate's principal describe quotas, so a describe that succeeds proves that the
broker saw and accepted the certificate from the store).
"""

from __future__ import annotations

import importlib.util
import shutil
import ssl
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kqplan.cluster.connection import ConnectionConfig, config_from_properties
from kqplan.core.errors import KqplanError
from tests.helpers import run_cli
from tests.kafka.broker import KafkaBroker, ensure_kafka_libs, pinned_kafka_version

KEYTOOL = shutil.which("keytool")
pytestmark = pytest.mark.skipif(KEYTOOL is None, reason="needs the JDK's keytool (on PATH with Java)")

STORE_PASSWORD = "store-Pw-4c1e-never-print"
KEY_PASSWORD = "key-Pw-77aa-never-print"
TRUST_PASSWORD = "trust-Pw-19bd-never-print"
SECRETS = (STORE_PASSWORD, KEY_PASSWORD, TRUST_PASSWORD)
CLIENT_CN = "kqplan-client"
HAS_JKS = importlib.util.find_spec("jks") is not None
needs_jks = pytest.mark.skipif(not HAS_JKS, reason="reading JKS needs purejks: pip install 'kqplan[jks]'")
FORMATS = ("PKCS12", pytest.param("JKS", marks=needs_jks))
SUFFIX = {"PKCS12": "p12", "JKS": "jks", "JCEKS": "jceks"}


# -- keytool ------------------------------------------------------------------------------------


def keytool(*args: str | Path) -> None:
    assert KEYTOOL is not None
    done = subprocess.run(
        [KEYTOOL, *map(str, args)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"keytool {' '.join(map(str, args))}:\n{done.stdout}{done.stderr}"


def truststore(directory: Path, ca_pem: Path, fmt: str, password: str = TRUST_PASSWORD) -> Path:
    """``keytool -importcert`` of one CA certificate into a new trust store (made once: each keytool
    run is a JVM start)."""
    path = directory / f"truststore-{ca_pem.stem}-{SECRETS.index(password)}.{SUFFIX[fmt]}"
    if path.exists():
        return path
    keytool(
        "-importcert",
        "-noprompt",
        "-alias",
        "kafka-ca",
        "-file",
        ca_pem,
        "-storetype",
        fmt,
        "-keystore",
        path,
        "-storepass",
        password,
    )
    return path


@dataclass(frozen=True)
class ClientCa:
    store: Path  # PKCS12, holds the CA's key
    pem: Path


def client_ca(directory: Path) -> ClientCa:
    """A CA of our own for client certificates (the broker's trust store gets its certificate)."""
    store, pem = directory / "client-ca.p12", directory / "client-ca.pem"
    keytool(
        "-genkeypair",
        "-alias",
        "ca",
        "-keyalg",
        "EC",
        "-groupname",
        "secp256r1",
        "-dname",
        "CN=kqplan client CA",
        "-ext",
        "bc:c",
        "-validity",
        "30",
        "-storetype",
        "PKCS12",
        "-keystore",
        store,
        "-storepass",
        STORE_PASSWORD,
    )
    keytool(
        "-exportcert", "-rfc", "-alias", "ca", "-keystore", store, "-storepass", STORE_PASSWORD, "-file", pem
    )
    return ClientCa(store, pem)


def keystore(
    directory: Path,
    fmt: str,
    *,
    ca: ClientCa | None = None,
    key_password: str | None = None,
    cn: str = CLIENT_CN,
) -> Path:
    """A client key store as keytool makes it: a key pair, signed by ``ca`` (the chain imported as
    the CA's reply, after the CA itself as a trusted entry) or self-signed. ``key_password``
    (JKS only: PKCS12 has one password) gives the key its own ``-keypass``."""
    path = directory / f"{cn}-{key_password is not None}.{SUFFIX[fmt]}"
    path.unlink(missing_ok=True)
    store = ["-keystore", path, "-storepass", STORE_PASSWORD, "-storetype", fmt]
    keypass = ["-keypass", key_password] if key_password else []
    keytool(
        "-genkeypair",
        "-alias",
        "client",
        "-keyalg",
        "RSA",
        "-keysize",
        "2048",
        "-dname",
        f"CN={cn}",
        "-validity",
        "30",
        *store,
        *keypass,
    )
    if ca is not None:
        csr, reply = directory / f"{cn}.csr", directory / f"{cn}.crt"
        keytool("-certreq", "-alias", "client", "-file", csr, *store, *keypass)
        keytool(
            "-gencert",
            "-alias",
            "ca",
            "-keystore",
            ca.store,
            "-storepass",
            STORE_PASSWORD,
            "-infile",
            csr,
            "-outfile",
            reply,
            "-rfc",
            "-validity",
            "30",
        )
        keytool("-importcert", "-noprompt", "-alias", "client-ca", "-file", ca.pem, *store)
        keytool("-importcert", "-alias", "client", "-file", reply, *store, *keypass)
    return path


# -- reading the settings -----------------------------------------------------------------------


def load(text: str) -> ConnectionConfig:
    return config_from_properties(text, bootstrap="127.0.0.1:9093", source="client.properties", env={})


def error(text: str) -> KqplanError:
    with pytest.raises(KqplanError) as err:
        load(text)
    shown = f"{err.value.message}\n{err.value.hint}"
    assert not any(secret in shown for secret in SECRETS)
    return err.value


def der_certs(pem: str) -> list[bytes]:
    blocks = pem.split("-----END CERTIFICATE-----")[:-1]
    return [ssl.PEM_cert_to_DER_cert(block.strip() + "\n-----END CERTIFICATE-----\n") for block in blocks]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("stores")


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_trust_store_becomes_the_ca_text_python_loads(pki, stores, fmt):
    path = truststore(stores, pki.ca, fmt)
    cfg = load(
        f"security.protocol=SSL\nssl.truststore.type={fmt}\nssl.truststore.location={path}\n"
        f"ssl.truststore.password={TRUST_PASSWORD}\n"
    )
    assert cfg.tls is not None
    assert cfg.tls.ca_file is None
    assert der_certs(cfg.tls.ca_pem or "") == der_certs(pki.ca.read_text())
    assert cfg.ignored == ()
    assert cfg.ssl_context() is not None


@pytest.mark.parametrize(
    ("declared", "fmt"),
    [
        ("JKS", "PKCS12"),
        (None, "PKCS12"),
        pytest.param("PKCS12", "JKS", marks=needs_jks),
        pytest.param(None, "JKS", marks=needs_jks),
        pytest.param("jks", "JCEKS", marks=needs_jks),
    ],
)
def test_the_store_is_read_by_its_content_as_the_jdk_does(pki, stores, declared, fmt):
    # Kafka's default type is JKS while keytool writes PKCS12: the JDK reads either under either
    # name (keystore.type.compat), so a properties file that works for kafka-configs.sh works here.
    path = truststore(stores, pki.ca, fmt)
    kind = f"ssl.truststore.type={declared}\n" if declared else ""
    cfg = load(
        f"security.protocol=SSL\n{kind}ssl.truststore.location={path}\n"
        f"ssl.truststore.password={TRUST_PASSWORD}\n"
    )
    assert cfg.tls is not None
    assert der_certs(cfg.tls.ca_pem or "") == der_certs(pki.ca.read_text())


@needs_jks
def test_a_jks_trust_store_needs_no_password(pki, stores):
    # As in the JDK: without a password the store's checksum is not checked (its certificates are
    # not encrypted); a PKCS12 store made by keytool encrypts them, so it needs the password.
    path = truststore(stores, pki.ca, "JKS")
    cfg = load(f"security.protocol=SSL\nssl.truststore.location={path}\n")
    assert cfg.tls is not None
    assert der_certs(cfg.tls.ca_pem or "") == der_certs(pki.ca.read_text())
    p12 = truststore(stores, pki.ca, "PKCS12")
    err = error(f"security.protocol=SSL\nssl.truststore.location={p12}\n")
    assert err.message == (
        f"client.properties: ssl.truststore.password: is not set, and the PKCS12 store {p12} is encrypted"
    )
    assert err.hint == "set ssl.truststore.password to the store's password"


@pytest.fixture(scope="module")
def offline_ca(stores: Path) -> ClientCa:
    return client_ca(stores)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_key_store_becomes_a_certificate_chain_and_a_secret_key(
    stores, offline_ca, fmt, tmp_path, monkeypatch
):
    ca = offline_ca
    path = keystore(stores, fmt, ca=ca)
    cfg = load(
        f"security.protocol=SSL\nssl.keystore.type={fmt}\nssl.keystore.location={path}\n"
        f"ssl.keystore.password={STORE_PASSWORD}\n"
    )
    tls = cfg.tls
    assert tls is not None
    assert tls.cert_file is None
    assert tls.key_password is None  # the key comes out of the store decrypted
    assert tls.key_pem is not None
    assert "BEGIN PRIVATE KEY" in tls.key_pem.reveal()
    chain = der_certs(tls.cert_pem or "")
    assert chain[0] != chain[-1]
    assert der_certs(ca.pem.read_text())[0] in chain[1:]  # the CA's reply chain, leaf first
    assert "PRIVATE KEY" not in repr(cfg)
    # OpenSSL loads the pair from 0600 files in a 0700 directory that is gone afterwards
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    assert cfg.ssl_context() is not None
    assert list(scratch.iterdir()) == []


@needs_jks
def test_a_jks_key_with_its_own_password_needs_ssl_key_password(stores):
    path = keystore(stores, "JKS", key_password=KEY_PASSWORD)
    base = f"security.protocol=SSL\nssl.keystore.location={path}\nssl.keystore.password={STORE_PASSWORD}\n"
    err = error(base)
    assert err.message == (
        f"client.properties:3: ssl.keystore.password: does not decrypt the private key 'client' in {path}"
    )
    assert err.hint == (
        "set ssl.key.password to the key's password (keytool -keypass) if it differs from the store's"
    )
    err = error(base + "ssl.key.password=not-the-key-password\n")
    assert err.message.startswith("client.properties:4: ssl.key.password: does not decrypt")
    cfg = load(base + f"ssl.key.password={KEY_PASSWORD}\n")
    assert cfg.tls is not None
    assert cfg.tls.key_pem is not None
    assert cfg.ssl_context() is not None


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_wrong_store_password_names_the_setting_and_never_the_password(pki, stores, fmt):
    path = truststore(stores, pki.ca, fmt)
    err = error(
        f"security.protocol=SSL\nssl.truststore.location={path}\nssl.truststore.password={STORE_PASSWORD}\n"
    )
    assert (
        err.message
        == {
            "PKCS12": (
                f"client.properties:3: ssl.truststore.password: does not open the PKCS12 store {path} "
                "(wrong password, or a damaged file)"
            ),
            "JKS": (
                f"client.properties:3: ssl.truststore.password: does not open the JKS store {path} (the "
                "store's checksum does not match: wrong password, or a damaged file)"
            ),
        }[fmt]
    )
    assert err.hint == "check ssl.truststore.password: it is the -storepass given to keytool"


def test_a_missing_store_names_the_file_and_the_setting(tmp_path):
    missing = tmp_path / "nope.p12"
    err = error(
        f"security.protocol=SSL\nssl.keystore.location={missing}\nssl.keystore.password={STORE_PASSWORD}\n"
    )
    assert err.message == (
        f"client.properties:2: ssl.keystore.location: cannot read key store {missing}: "
        "No such file or directory"
    )
    assert err.hint is not None
    assert "check the path" in err.hint


def test_wrong_or_unknown_store_types(pki, stores, tmp_path):
    p12 = truststore(stores, pki.ca, "PKCS12")
    err = error(f"security.protocol=SSL\nssl.keystore.type=BKS\nssl.keystore.location={p12}\n")
    assert err.message == "client.properties:2: ssl.keystore.type: BKS is not supported"
    assert err.hint is not None
    assert err.hint.startswith(
        "use PKCS12 (keytool's default), JKS or PEM; convert other stores with keytool -importkeystore"
    )
    err = error(f"security.protocol=SSL\nssl.truststore.type=PKCS12\nssl.truststore.location={pki.ca}\n")
    assert err.message == f"client.properties:2: ssl.truststore.type: is PKCS12, but {pki.ca} is a PEM file"
    assert err.hint == "set ssl.truststore.type=PEM (or remove it)"
    err = error(f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={p12}\n")
    assert err.message == f"client.properties:2: ssl.truststore.type: is PEM, but {p12} is a PKCS12 store"
    assert err.hint == "set ssl.truststore.type=PKCS12 and ssl.truststore.password"
    junk = tmp_path / "junk.jks"
    junk.write_bytes(b"\x00\x01 not a key store")
    err = error(f"security.protocol=SSL\nssl.truststore.location={junk}\n")
    assert err.message == (
        f"client.properties:2: ssl.truststore.location: {junk} is not a PEM file, "
        "a PKCS12 store or a JKS store"
    )


def test_a_trust_store_given_as_the_key_store(pki, stores):
    p12 = truststore(stores, pki.ca, "PKCS12", password=STORE_PASSWORD)
    err = error(
        f"security.protocol=SSL\nssl.keystore.location={p12}\nssl.keystore.password={STORE_PASSWORD}\n"
    )
    assert err.message == (
        f"client.properties:2: ssl.keystore.location: the PKCS12 store {p12} holds no private key"
    )
    assert err.hint == (
        "ssl.keystore.location is the client's own certificate and key; the CA "
        "certificates belong in ssl.truststore.location"
    )


def test_a_pem_store_password_has_no_effect_and_is_reported(pki):
    cfg = load(
        f"security.protocol=SSL\nssl.keystore.type=PEM\nssl.keystore.location={pki.client_cert}\n"
        f"ssl.keystore.password={STORE_PASSWORD}\nssl.truststore.location={pki.ca}\n"
    )
    assert cfg.ignored == ("ssl.keystore.password (client.properties:4)",)


def test_without_the_jks_package_the_refusal_says_how_to_convert(pki, stores, monkeypatch):
    path = truststore(stores, pki.ca, "JKS")
    monkeypatch.setitem(sys.modules, "jks", None)  # as if `pip install 'kqplan[jks]'` had not been run
    err = error(f"security.protocol=SSL\nssl.truststore.location={path}\nssl.truststore.password=x\n")
    assert err.message == (
        f"client.properties:2: ssl.truststore.location: {path} is a JKS store, and "
        "reading JKS needs the optional package purejks"
    )
    assert err.hint == (
        "pip install 'kqplan[jks]', or convert the store to PKCS12: keytool -importkeystore "
        f"-srckeystore {path} -destkeystore store.p12 -deststoretype PKCS12, then set "
        "ssl.truststore.location=store.p12 and ssl.truststore.type=PKCS12"
    )


def test_a_store_given_where_librdkafka_wants_pem_points_at_the_java_setting(pki, stores):
    p12 = truststore(stores, pki.ca, "PKCS12")
    err = error(f"security.protocol=SSL\nssl.ca.location={p12}\n")
    assert err.message == (
        f"client.properties:2: ssl.ca.location: {p12} is not a PEM file; kqplan needs "
        "the CA certificates in PEM format"
    )
    assert err.hint is not None
    assert err.hint.startswith(
        "a PKCS12 or JKS store goes in ssl.truststore.location (with ssl.truststore.password); "
    )


# -- the real broker ----------------------------------------------------------------------------


def write_config(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize("fmt", FORMATS)
def test_keytool_trust_stores_reach_the_real_ssl_listener(real_kafka, pki, tmp_path, fmt):
    if real_kafka.ssl_bootstrap is None or real_kafka.ca_file is None:
        pytest.skip("the external test cluster has no TLS listener")
    trusted = truststore(tmp_path, real_kafka.ca_file, fmt)
    config = write_config(
        tmp_path / "client.properties",
        f"security.protocol=SSL\nssl.truststore.type={fmt}\n"
        f"ssl.truststore.location={trusted}\nssl.truststore.password={TRUST_PASSWORD}\n",
    )
    result = run_cli("describe", "--bootstrap-server", real_kafka.ssl_bootstrap, "--command-config", config)
    assert result.exit_code == 0, result.stderr
    # A store holding another CA: the broker's certificate is not trusted.
    other = truststore(tmp_path, pki.other_ca, fmt)
    write_config(
        config,
        f"security.protocol=SSL\nssl.truststore.location={other}\nssl.truststore.password={TRUST_PASSWORD}\n",
    )
    result = run_cli("describe", "--bootstrap-server", real_kafka.ssl_bootstrap, "--command-config", config)
    assert result.exit_code == 1
    assert f"TLS: the certificate of {real_kafka.ssl_bootstrap} is not trusted" in result.stderr
    assert TRUST_PASSWORD not in result.stdout + result.stderr


@dataclass
class ClientAuthBroker(KafkaBroker):
    """The harness's broker, but its SSL listener requires a client certificate signed by
    ``client_ca_pem``, and only the principal ``CN=kqplan-client`` may describe there."""

    client_ca_pem: str = ""

    def server_properties(self) -> dict[str, str]:
        props = super().server_properties()
        props |= {
            "listener.name.ssl.ssl.client.auth": "required",
            "listener.name.ssl.ssl.truststore.type": "PEM",
            "listener.name.ssl.ssl.truststore.certificates": self.client_ca_pem,
            # ANONYMOUS: the controller and PLAINTEXT listeners (as in the harness). On this SSL
            # listener every connection has a certificate's principal, and only ours is a super user.
            "super.users": f"User:admin;User:ANONYMOUS;User:CN={CLIENT_CN}",
        }
        return props


@dataclass(frozen=True)
class ClientAuth:
    broker: ClientAuthBroker
    ca: ClientCa
    directory: Path


@pytest.fixture(scope="module")
def client_auth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientAuth]:
    directory = tmp_path_factory.mktemp("client-auth")
    ca = client_ca(directory)
    version = pinned_kafka_version()
    broker = ClientAuthBroker(
        ensure_kafka_libs(version), directory / "kafka", version, client_ca_pem=ca.pem.read_text()
    )
    broker.start()
    try:
        yield ClientAuth(broker, ca, directory)
    finally:
        broker.stop()


@pytest.mark.real_kafka
@pytest.mark.slow
@pytest.mark.parametrize(
    ("fmt", "key_password"), [("PKCS12", None), pytest.param("JKS", KEY_PASSWORD, marks=needs_jks)]
)
def test_keytool_key_stores_authenticate_to_a_broker_that_requires_client_certificates(
    client_auth, fmt, key_password
):
    broker = client_auth.broker
    assert broker.tls is not None
    directory = client_auth.directory
    own = keystore(directory, fmt, ca=client_auth.ca, key_password=key_password)
    trusted = truststore(directory, broker.tls.ca_file, fmt)
    text = (
        f"security.protocol=SSL\nssl.keystore.type={fmt}\nssl.keystore.location={own}\n"
        f"ssl.keystore.password={STORE_PASSWORD}\n"
        + (f"ssl.key.password={key_password}\n" if key_password else "")
        + f"ssl.truststore.type={fmt}\nssl.truststore.location={trusted}\n"
        f"ssl.truststore.password={TRUST_PASSWORD}\n"
    )
    config = write_config(directory / f"client-{fmt}.properties", text)
    result = run_cli("describe", "--bootstrap-server", broker.ssl_bootstrap, "--command-config", config)
    assert result.exit_code == 0, result.stderr
    assert not any(secret in result.stdout + result.stderr for secret in SECRETS)


@pytest.mark.real_kafka
@pytest.mark.slow
def test_the_broker_sees_the_principal_of_the_stores_certificate(client_auth):
    # Same CA, another name: the TLS handshake succeeds, the authorizer refuses the describe.
    broker = client_auth.broker
    assert broker.tls is not None
    stranger = keystore(client_auth.directory, "PKCS12", ca=client_auth.ca, cn="stranger")
    trusted = truststore(client_auth.directory, broker.tls.ca_file, "PKCS12")
    config = write_config(
        client_auth.directory / "stranger.properties",
        f"security.protocol=SSL\nssl.keystore.location={stranger}\n"
        f"ssl.keystore.password={STORE_PASSWORD}\nssl.truststore.location={trusted}\n"
        f"ssl.truststore.password={TRUST_PASSWORD}\n",
    )
    result = run_cli("describe", "--bootstrap-server", broker.ssl_bootstrap, "--command-config", config)
    assert result.exit_code == 1
    assert (
        "Error: not authorized to describe client quotas (DESCRIBE_CONFIGS on the cluster)" in result.stderr
    )


@pytest.mark.real_kafka
@pytest.mark.slow
def test_without_a_key_store_that_broker_refuses_the_connection(client_auth):
    broker = client_auth.broker
    assert broker.tls is not None
    trusted = truststore(client_auth.directory, broker.tls.ca_file, "PKCS12")
    config = write_config(
        client_auth.directory / "no-keystore.properties",
        f"security.protocol=SSL\nssl.truststore.location={trusted}\n"
        f"ssl.truststore.password={TRUST_PASSWORD}\n",
    )
    result = run_cli("describe", "--bootstrap-server", broker.ssl_bootstrap, "--command-config", config)
    assert result.exit_code == 1
    assert (
        f"Error: TLS: {broker.ssl_bootstrap} requires a client certificate (ALERT_BAD_CERTIFICATE)"
        in result.stderr
    )
    assert (
        "help: set ssl.keystore.location (a PKCS12, JKS or PEM key store) and ssl.keystore.password"
        in result.stderr
    )
    # A certificate from a CA the broker does not trust (keytool's self-signed default).
    unknown = keystore(client_auth.directory, "PKCS12", cn="self-signed")
    write_config(
        config,
        config.read_text() + f"ssl.keystore.location={unknown}\nssl.keystore.password={STORE_PASSWORD}\n",
    )
    result = run_cli("describe", "--bootstrap-server", broker.ssl_bootstrap, "--command-config", config)
    assert result.exit_code == 1
    assert f"Error: TLS: {broker.ssl_bootstrap} refused the client certificate (ALERT_" in result.stderr
    assert "add its CA to the broker's ssl.truststore" in result.stderr
