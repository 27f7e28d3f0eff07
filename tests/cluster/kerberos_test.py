"""SASL/GSSAPI (Kerberos): the properties a Java client uses, mapped to kqplan's settings, and a
login against a real broker through a KDC started here.

The KDC is MIT Kerberos' ``krb5kdc`` (Debian: krb5-kdc, krb5-admin-server; the ``gssapi`` package
builds against libkrb5-dev). Where those are missing the KDC tests are skipped, saying which;
the mapping tests run everywhere.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kqplan.cluster.connection import ConnectionConfig, config_from_properties
from kqplan.cluster.kerberos import INSTALL_HINT, KerberosError, KerberosSettings, install
from kqplan.core.errors import KqplanError
from tests.helpers import run_cli
from tests.kafka.broker import (
    BROKER_JVM_OPTS,
    KafkaBroker,
    ensure_kafka_libs,
    free_ports,
    pinned_kafka_version,
    stop_process,
)

REALM = "KQPLAN.TEST"
KRB5 = "com.sun.security.auth.module.Krb5LoginModule required"


def load(text: str) -> ConnectionConfig:
    return config_from_properties(text, bootstrap="127.0.0.1:9092", source="client.properties", env={})


def error(text: str) -> KqplanError:
    with pytest.raises(KqplanError) as err:
        load(text)
    return err.value


@pytest.fixture(scope="module")
def keytab_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Something with a keytab's header (version 2): the mapping only checks that it is one."""
    path = tmp_path_factory.mktemp("keytab") / "client.keytab"
    path.write_bytes(b"\x05\x02")
    return path


# -- properties -> settings ---------------------------------------------------------------------


def test_the_java_jaas_keytab_login(keytab_file):
    cfg = load(
        "security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\nsasl.kerberos.service.name=kafka-prod\n"
        f'sasl.jaas.config={KRB5} useKeyTab=true storeKey=true keyTab="{keytab_file}" '
        f'principal="kqplan@{REALM}";\n'
    )
    assert cfg.kerberos == KerberosSettings(
        service_name="kafka-prod", principal=f"kqplan@{REALM}", keytab=str(keytab_file)
    )
    assert cfg.describe() == f"127.0.0.1:9092 (SASL_SSL, GSSAPI as kqplan@{REALM})"
    kwargs = cfg.kafka_kwargs()
    assert kwargs["sasl_mechanism"] == "GSSAPI"
    assert kwargs["sasl_kerberos_service_name"] == "kafka-prod"


def test_the_ticket_cache_login_and_the_defaults():
    # GSSAPI is Kafka's default mechanism; no JAAS at all: the default ticket cache, service "kafka".
    assert load("security.protocol=SASL_PLAINTEXT\n").kerberos == KerberosSettings()
    cfg = load(
        f"security.protocol=SASL_PLAINTEXT\nsasl.jaas.config={KRB5} useTicketCache=true "
        'ticketCache="FILE:/tmp/krb5cc_kqplan" serviceName="kafka2";\n'
    )
    assert cfg.kerberos == KerberosSettings(service_name="kafka2", ticket_cache="FILE:/tmp/krb5cc_kqplan")
    # ticketCache counts only with useTicketCache=true, as in Krb5LoginModule
    cfg = load(f'security.protocol=SASL_PLAINTEXT\nsasl.jaas.config={KRB5} ticketCache="/x";\n')
    assert cfg.kerberos == KerberosSettings()


def test_the_librdkafka_spelling(keytab_file):
    cfg = load(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanisms=GSSAPI\n"
        f"sasl.kerberos.keytab={keytab_file}\nsasl.kerberos.principal=kqplan@{REALM}\n"
    )
    assert cfg.kerberos == KerberosSettings(principal=f"kqplan@{REALM}", keytab=str(keytab_file))


@pytest.mark.parametrize(
    ("props", "message", "hint"),
    [
        (
            f'sasl.jaas.config={KRB5} keyTab="KEYTAB" principal="p";',
            "client.properties:2: sasl.jaas.config: sets keyTab but not useKeyTab=true",
            "add useKeyTab=true to log in from the keytab",
        ),
        (
            f'sasl.jaas.config={KRB5} useKeyTab=true principal="p";',
            'client.properties:2: sasl.jaas.config: useKeyTab=true needs keyTab="/path/to.keytab"',
            None,
        ),
        (
            f'sasl.jaas.config={KRB5} useKeyTab=yes keyTab="KEYTAB";',
            "client.properties:2: sasl.jaas.config: useKeyTab must be true or false",
            None,
        ),
        (
            f'sasl.jaas.config={KRB5} useKeyTab=true keyTab="/nonexistent/kqplan.keytab";',
            "client.properties:2: sasl.jaas.config: cannot read the keytab /nonexistent/kqplan.keytab: "
            "No such file or directory",
            None,
        ),
        (
            "sasl.kerberos.keytab=/etc/hostname",
            "client.properties:2: sasl.kerberos.keytab: /etc/hostname is not a Kerberos keytab",
            "create one with ktutil or kadmin's ktadd (Java's ktab writes the same format)",
        ),
        (
            f'sasl.kerberos.service.name=kafka\nsasl.jaas.config={KRB5} serviceName="other";',
            "client.properties:2: sasl.kerberos.service.name: differs from serviceName in sasl.jaas.config",
            "keep one of them",
        ),
        (
            f"sasl.kerberos.principal=a@B\nsasl.jaas.config={KRB5} useTicketCache=true;",
            "client.properties:2: sasl.kerberos.principal: is set as well as sasl.jaas.config",
            "keep one of them",
        ),
        (
            'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="a" '
            'password="b";',
            "client.properties:2: sasl.jaas.config: uses PlainLoginModule, but sasl.mechanism is GSSAPI "
            "(the default)",
            "use Krb5LoginModule, or set sasl.mechanism to match the login module",
        ),
    ],
)
def test_kerberos_settings_that_cannot_work_are_refused_where_they_are(keytab_file, props, message, hint):
    err = error("security.protocol=SASL_PLAINTEXT\n" + props.replace("KEYTAB", str(keytab_file)) + "\n")
    assert err.message == message
    assert err.hint == hint


def test_without_the_gssapi_package_the_message_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "gssapi", None)  # as if `pip install 'kqplan[kerberos]'` had not run
    with pytest.raises(KerberosError) as err:
        install(KerberosSettings())
    assert err.value.message == "SASL/GSSAPI needs the optional package gssapi"
    assert err.value.hint == INSTALL_HINT


# -- a KDC and a broker that logs clients in with it ----------------------------------------------

KDC_TOOLS = ("krb5kdc", "kdb5_util", "kadmin.local")


def _missing() -> str | None:
    absent = [tool for tool in KDC_TOOLS if shutil.which(tool, path="/usr/sbin:/usr/bin:/sbin:/bin") is None]
    if absent:
        install = "apt-get install krb5-kdc krb5-admin-server"
        return f"MIT Kerberos KDC tools not installed ({', '.join(absent)}: {install})"
    try:
        import gssapi  # noqa: F401
    except (ImportError, OSError):
        return f"the gssapi package is not installed ({INSTALL_HINT})"
    return None


def tool(name: str) -> str:
    found = shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin")
    assert found is not None
    return found


@dataclass
class Kdc:
    """An MIT KDC for realm KQPLAN.TEST on a free loopback port, its files under ``directory``."""

    directory: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = None

    @property
    def krb5_conf(self) -> Path:
        return self.directory / "krb5.conf"

    @property
    def env(self) -> dict[str, str]:
        return {"KRB5_CONFIG": str(self.krb5_conf), "KRB5_KDC_PROFILE": str(self.directory / "kdc.conf")}

    def start(self) -> Kdc:
        d, self.port = self.directory, free_ports(1)[0]
        (d / "kdc.conf").write_text(
            f"[kdcdefaults]\n\tkdc_listen = 127.0.0.1:{self.port}\n\tkdc_tcp_listen = 127.0.0.1:{self.port}\n"
            f"[realms]\n\t{REALM} = {{\n\t\tdatabase_name = {d}/principal\n\t\tkey_stash_file = {d}/stash\n"
            f"\t\tacl_file = {d}/kadm5.acl\n"
            # Java 17 and MIT agree on these without extra settings.
            "\t\tsupported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal\n"
            f"\t}}\n[logging]\n\tkdc = FILE:{d}/kdc.log\n"
        )
        # rdns/canonicalize off: the broker is reached as 127.0.0.1 and its principal says so.
        self.krb5_conf.write_text(
            f"[libdefaults]\n\tdefault_realm = {REALM}\n"
            "\tdns_lookup_kdc = false\n\tdns_lookup_realm = false\n"
            "\trdns = false\n\tdns_canonicalize_hostname = false\n\tudp_preference_limit = 1\n"
            f"[realms]\n\t{REALM} = {{\n\t\tkdc = 127.0.0.1:{self.port}\n\t}}\n"
        )
        self.run(tool("kdb5_util"), "create", "-s", "-r", REALM, "-P", "kdc-master-Pw-1", "-W")
        self.process = subprocess.Popen(
            [tool("krb5kdc"), "-n", "-r", REALM],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while "commencing operation" not in self._log():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"krb5kdc did not start:\n{self._log()}")
            time.sleep(0.05)
        return self

    def _log(self) -> str:
        path = self.directory / "kdc.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def run(self, *command: str) -> None:
        done = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, f"{' '.join(command)}:\n{done.stdout}{done.stderr}"

    def principal(self, name: str) -> Path:
        """Add ``name@REALM`` with a random key and return a keytab holding it."""
        keytab = self.directory / f"{name.replace('/', '_')}.keytab"
        self.run(tool("kadmin.local"), "-r", REALM, "-q", f"addprinc -randkey {name}@{REALM}")
        self.run(tool("kadmin.local"), "-r", REALM, "-q", f"ktadd -k {keytab} {name}@{REALM}")
        return keytab

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process, grace=10)
            self.process = None


@dataclass
class KerberosBroker(KafkaBroker):
    """The harness's broker with GSSAPI enabled, next to PLAIN, on its SASL_PLAINTEXT listener."""

    keytab: str = ""

    def server_properties(self) -> dict[str, str]:
        props = super().server_properties()
        login = f'useKeyTab=true storeKey=true keyTab="{self.keytab}" principal="kafka/{self.host}@{REALM}";'
        props |= {
            "sasl.enabled.mechanisms": "PLAIN,GSSAPI",
            "sasl.kerberos.service.name": "kafka",
            "listener.name.sasl_plaintext.gssapi.sasl.jaas.config": f"{KRB5} {login}",
            # kqplan@KQPLAN.TEST maps to User:kqplan (DEFAULT principal.to.local rule)
            "super.users": props["super.users"] + ";User:kqplan",
        }
        return props


@dataclass(frozen=True)
class Kerberized:
    kdc: Kdc
    broker: KerberosBroker
    client_keytab: Path
    outsider_keytab: Path  # a principal the KDC knows that is no super user and has no ACL


@pytest.fixture(scope="module")
def kerberized(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kerberized]:
    reason = _missing()
    if reason is not None:
        pytest.skip(reason)
    directory = tmp_path_factory.mktemp("kerberos")
    kdc = Kdc(directory).start()
    try:
        service = kdc.principal("kafka/127.0.0.1")
        client, outsider = kdc.principal("kqplan"), kdc.principal("outsider")
        version = pinned_kafka_version()
        broker = KerberosBroker(
            ensure_kafka_libs(version),
            directory / "kafka",
            version,
            keytab=str(service),
            jvm_opts=(*BROKER_JVM_OPTS, f"-Djava.security.krb5.conf={kdc.krb5_conf}"),
        )
        broker.start()
        try:
            yield Kerberized(kdc, broker, client, outsider)
        finally:
            broker.stop()
    finally:
        kdc.stop()


@pytest.fixture
def krb5_env(kerberized: Kerberized, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """This process's Kerberos library finds the test realm; the default ticket cache is empty."""
    monkeypatch.setenv("KRB5_CONFIG", str(kerberized.kdc.krb5_conf))
    cache = tmp_path / "krb5cc"
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{cache}")
    monkeypatch.delenv("KRB5_CLIENT_KTNAME", raising=False)
    return cache


def describe(kerberized: Kerberized, config: Path):
    return run_cli(
        "describe", "--bootstrap-server", kerberized.broker.sasl_bootstrap, "--command-config", config
    )


@pytest.mark.real_kafka
@pytest.mark.slow
def test_a_keytab_login_from_the_jaas_config_reaches_the_real_broker(kerberized, krb5_env, tmp_path):
    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\nsasl.kerberos.service.name=kafka\n"
        f'sasl.jaas.config={KRB5} useKeyTab=true storeKey=true keyTab="{kerberized.client_keytab}" '
        f'principal="kqplan@{REALM}";\n'
    )
    result = describe(kerberized, config)
    assert result.exit_code == 0, result.stderr
    # the user's ticket cache was neither used nor written: the keytab's tickets stay in memory
    assert not krb5_env.exists()
    log = kerberized.broker.log_file.read_text(errors="replace")
    assert (
        f"Successfully authenticated client: authenticationID=kqplan@{REALM}; authorizationID=kqplan@{REALM}."
    ) in log


@pytest.mark.real_kafka
@pytest.mark.slow
def test_a_ticket_cache_login_reaches_the_real_broker(kerberized, krb5_env, tmp_path):
    import gssapi

    # what `kinit -kt client.keytab kqplan@KQPLAN.TEST` would leave in the cache
    name = gssapi.Name(f"kqplan@{REALM}", gssapi.NameType.kerberos_principal)
    creds = gssapi.Credentials(
        name=name,
        usage="initiate",
        store={"client_keytab": str(kerberized.client_keytab), "ccache": f"FILE:{krb5_env}"},
    )
    assert creds.lifetime > 0
    assert krb5_env.exists()
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n")  # the default cache
    result = describe(kerberized, config)
    assert result.exit_code == 0, result.stderr
    config.write_text(
        f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\nsasl.jaas.config={KRB5} "
        f'useTicketCache=true ticketCache="FILE:{krb5_env}" principal="kqplan@{REALM}";\n'
    )
    result = describe(kerberized, config)
    assert result.exit_code == 0, result.stderr


@pytest.mark.real_kafka
@pytest.mark.slow
def test_kerberos_failures_say_what_to_do(kerberized, krb5_env, tmp_path):
    config = tmp_path / "client.properties"
    keytab = kerberized.client_keytab
    # no ticket in the (empty) default cache
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n")
    result = describe(kerberized, config)
    assert result.exit_code == 1
    assert (
        "Error: no Kerberos credentials for the default principal from the default ticket cache: "
        in result.stderr
    )
    assert (
        "help: run kinit first, or log in from a keytab: sasl.jaas.config=com.sun.security.auth.module."
        in result.stderr
    )
    # a principal the keytab has no key for
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n"
        f'sasl.jaas.config={KRB5} useKeyTab=true keyTab="{keytab}" principal="ghost@{REALM}";\n'
    )
    result = describe(kerberized, config)
    assert result.exit_code == 1
    assert f"Error: no Kerberos credentials for ghost@{REALM} from keytab {keytab}: " in result.stderr
    assert f"help: check that the keytab holds keys for ghost@{REALM} (klist -k {keytab})" in result.stderr
    # a service the KDC does not know
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\nsasl.kerberos.service.name=kafka-prod\n"
        f'sasl.jaas.config={KRB5} useKeyTab=true keyTab="{keytab}" principal="kqplan@{REALM}";\n'
    )
    result = describe(kerberized, config)
    assert result.exit_code == 1
    assert (
        "Error: Kerberos: no service ticket for kafka-prod@127.0.0.1 (the broker's principal "
        f"kafka-prod/127.0.0.1@REALM): Server kafka-prod/127.0.0.1@{REALM} not found in Kerberos database"
        in result.stderr
    )
    # logged in, but the principal may not describe quotas: the broker named who it is
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n"
        f'sasl.jaas.config={KRB5} useKeyTab=true keyTab="{kerberized.outsider_keytab}" '
        f'principal="outsider@{REALM}";\n'
    )
    result = describe(kerberized, config)
    assert result.exit_code == 1
    assert (
        "Error: not authorized to describe client quotas (DESCRIBE_CONFIGS on the cluster)" in result.stderr
    )
