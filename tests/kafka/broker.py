"""A real Apache Kafka broker for the tests: jars from Maven Central (tests/kafka/pom.xml), one KRaft node.

Listeners: PLAINTEXT, SASL_PLAINTEXT (PLAIN) and SSL (PEM), plus the controller's own. Version and mode
are parameters (env ``KQPLAN_KAFKA_VERSION`` / ``KQPLAN_KAFKA_MODE``); see the reference §5.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import datetime
import hashlib
import ipaddress
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

POM = Path(__file__).with_name("pom.xml")
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # mvn -B still emits colour resets
MODES = ("kraft",)  # "zookeeper" (3.x only) comes with a later issue
DEFAULT_USERS: Mapping[str, str] = {
    "admin": "admin-secret",    # super user
    "reader": "reader-secret",  # DESCRIBE_CONFIGS on the cluster only
    "nobody": "nobody-secret",  # no ACLs at all
}
CLUSTER_RESOURCE = "kafka-cluster"
CA_NAME = "kqplan kafka test CA"
# Serial GC and C1 only: on 2 cores the broker answers in ~2.7 s instead of ~3.9 s (default G1 + C2),
# at about the same RSS (benchmarks/real_broker.py); test traffic never needs C2's code.
BROKER_JVM_OPTS = ("-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
TOOL_JVM_OPTS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")  # StorageTool, ConfigCommand
LOG4J2 = """\
status = error
appender.out.type = Console
appender.out.name = OUT
appender.out.target = {target}
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.out.ref = OUT
"""


class ProvisioningError(RuntimeError):
    """Maven could not fetch the Kafka jars (the message carries mvn's output)."""


class BrokerStartError(RuntimeError):
    """The broker did not come up (the message carries the tail of its log)."""


class PortTaken(BrokerStartError):
    """A listener port picked as free was taken before the JVM could bind it."""


# ---------------------------------------------------------------------------------------------
# Versions, mode, cache


def pinned_kafka_version(pom: Path = POM) -> str:
    """The ``kafka.version`` property of tests/kafka/pom.xml: the one place the default is pinned."""
    found = re.search(r"<kafka\.version>\s*([^<\s]+)\s*</kafka\.version>", pom.read_text())
    if found is None:
        raise ProvisioningError(f"{pom}: no <kafka.version> property")
    return found.group(1)


def kafka_version(env: Mapping[str, str] = os.environ) -> str:
    """``$KQPLAN_KAFKA_VERSION``, else the version pinned in the pom."""
    return env.get("KQPLAN_KAFKA_VERSION") or pinned_kafka_version()


def kafka_mode(env: Mapping[str, str] = os.environ) -> str:
    """``$KQPLAN_KAFKA_MODE`` (default ``kraft``), checked against the modes this harness can run."""
    mode = env.get("KQPLAN_KAFKA_MODE") or "kraft"
    if mode not in MODES:
        raise ValueError(f"KQPLAN_KAFKA_MODE={mode!r}: this harness runs only {', '.join(MODES)}")
    return mode


def cache_root(env: Mapping[str, str] = os.environ) -> Path:
    """``$KQPLAN_CACHE``, else ``~/.cache/kqplan``."""
    configured = env.get("KQPLAN_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "kqplan"


def _pom_stamp(version: str, pom: Path) -> str:
    # The jar set depends on the pom too: a changed pom must not reuse an old download.
    return hashlib.sha256(pom.read_bytes() + version.encode()).hexdigest()


def download_kafka_libs(version: str, dest: Path, *, pom: Path = POM,
                        maven_args: Sequence[str] = ()) -> None:
    """Copy Kafka ``version``'s runtime jars into ``dest`` with Maven; raise with its output on failure."""
    # -U: Maven caches a "not found" for a day; a release published since must be seen at once.
    command = ["mvn", "-q", "-B", "-U", "-Dstyle.color=never", "-f", str(pom), f"-Dkafka.version={version}",
               *maven_args, "dependency:copy-dependencies", "-DincludeScope=runtime",
               f"-DoutputDirectory={dest}"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ProvisioningError(f"could not run {' '.join(command)}: {err}") from err
    if done.returncode != 0 or not any(dest.glob("kafka-clients-*.jar")):
        raise ProvisioningError(
            f"fetching Apache Kafka {version} from Maven Central failed (exit {done.returncode}):\n"
            f"$ {' '.join(command)}\n{ANSI.sub('', done.stdout + done.stderr)}")


def ensure_kafka_libs(version: str, *, cache: Path | None = None, pom: Path = POM,
                      maven_args: Sequence[str] = ()) -> Path:
    """The directory of Kafka ``version``'s jars, downloading them once (atomically) into the cache."""
    home = (cache or cache_root()) / f"kafka-{version}"
    libs, stamp = home / "libs", _pom_stamp(version, pom)
    if (libs / ".pom-sha256").is_file() and (libs / ".pom-sha256").read_text() == stamp:
        return libs
    home.mkdir(parents=True, exist_ok=True)
    # Download into a private temp dir and rename it into place: a half-download is never reused.
    staging = Path(tempfile.mkdtemp(prefix="libs.tmp-", dir=home))
    try:
        download_kafka_libs(version, staging, pom=pom, maven_args=maven_args)
        (staging / ".pom-sha256").write_text(stamp)
        if libs.exists():  # stale (another pom): move it aside first
            stale = Path(tempfile.mkdtemp(prefix="libs.old-", dir=home))
            libs.rename(stale / "libs")
            shutil.rmtree(stale, ignore_errors=True)
        try:
            staging.rename(libs)
        except OSError:
            if not (libs / ".pom-sha256").is_file():  # not a concurrent run that won the race
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return libs


# ---------------------------------------------------------------------------------------------
# Small helpers: ids, ports, TLS, properties, processes


def new_cluster_id() -> str:
    """16 random bytes, URL-safe base64; never starting with '-' (StorageTool reads that as an option)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct ports the kernel says are free right now (all held open until all are picked)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind((host, 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@dataclass(frozen=True)
class TlsFiles:
    ca_file: Path      # what clients trust
    chain_pem: str     # server certificate then CA, for ssl.keystore.certificate.chain
    key_pem: str       # unencrypted PKCS#8, for ssl.keystore.key


def make_tls(directory: Path, host: str = "127.0.0.1") -> TlsFiles:
    """A self-signed CA and a server certificate for ``host`` and localhost, in PEM."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())

    def build(subject: str, public_key, *, ca: bool) -> x509.CertificateBuilder:
        return (x509.CertificateBuilder().subject_name(name(subject)).issuer_name(name(CA_NAME))
                .public_key(public_key).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(days=1))
                .not_valid_after(now + datetime.timedelta(days=30))
                .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))

    ca = build(CA_NAME, ca_key.public_key(), ca=True).sign(ca_key, hashes.SHA256())
    sans = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address(host))]
    server = (build("localhost", key.public_key(), ca=False)
              .add_extension(x509.SubjectAlternativeName(sans), critical=False).sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    ca_pem = ca.public_bytes(pem).decode()
    directory.mkdir(parents=True, exist_ok=True)
    ca_file = directory / "ca.pem"
    ca_file.write_text(ca_pem)
    key_pem = key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    return TlsFiles(ca_file, server.public_bytes(pem).decode() + ca_pem, key_pem)


def _escape(value: str) -> str:
    # java.util.Properties: backslash escapes, and newlines (PEM values) as \n on one line.
    return value.replace("\\", "\\\\").replace("\n", "\\n")


def write_properties(path: Path, props: Mapping[str, str]) -> Path:
    """Write ``props`` as a Java properties file."""
    path.write_text("".join(f"{key}={_escape(value)}\n" for key, value in props.items()))
    return path


def java_command(libs: Path, main_class: str, *args: str, jvm_opts: Sequence[str] = TOOL_JVM_OPTS,
                 log_config: Path | None = None) -> list[str]:
    """``java <opts> -cp 'libs/*' <main> <args>`` (java expands the wildcard itself; no shell)."""
    logging = [f"-Dlog4j2.configurationFile={log_config}"] if log_config else []
    return ["java", *jvm_opts, *logging, "-cp", str(libs / "*"), main_class, *args]


def write_log_config(path: Path, *, target: str = "SYSTEM_OUT", level: str = "INFO") -> Path:
    """A log4j2 properties file sending everything at ``level`` or above to stdout/stderr."""
    path.write_text(LOG4J2.format(target=target, level=level))
    return path


def die_with_parent() -> list[str]:
    """A command prefix making the kernel SIGTERM the child if its parent dies (pytest killed outright).

    util-linux ``setpriv`` execs the command, so the PID stays the JVM's; unlike ``preexec_fn`` it is
    safe in a process with threads. Without setpriv there is only atexit and the fixture teardown.
    """
    return ["setpriv", "--pdeathsig", "TERM"] if shutil.which("setpriv") else []


def stop_process(proc: subprocess.Popen[bytes], grace: float = 30.0) -> int:
    """SIGTERM ``proc`` (by PID), wait up to ``grace`` seconds, then SIGKILL; return its exit status."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
    return proc.wait()


def api_versions_answer(host: str, port: int, timeout: float = 2.0) -> bool:
    """Whether ``host:port`` answers an ApiVersions v0 request with error code 0 (raw socket)."""
    client_id = b"kqplan-probe"
    body = struct.pack(">hhih", 18, 0, 7, len(client_id)) + client_id
    try:
        with socket.create_connection((host, port), timeout=timeout) as conn:
            conn.sendall(struct.pack(">i", len(body)) + body)
            header = _recv_exactly(conn, 4)
            payload = _recv_exactly(conn, struct.unpack(">i", header)[0])
    except OSError:
        return False
    correlation_id, error_code = struct.unpack(">ih", payload[:6])
    return bool(correlation_id == 7 and error_code == 0)


def _recv_exactly(conn: socket.socket, size: int) -> bytes:
    chunks, remaining = [], size
    while remaining:
        chunk = conn.recv(remaining)
        if not chunk:
            raise ConnectionError("connection closed mid-response")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def tail(path: Path | None, lines: int = 60) -> str:
    """The last ``lines`` lines of a text file ('' when there is none)."""
    if path is None or not path.is_file():
        return ""
    with path.open("rb") as f:
        f.seek(max(0, f.seek(0, os.SEEK_END) - 200 * lines))
        return b"\n".join(f.read().splitlines()[-lines:]).decode(errors="replace")


# ---------------------------------------------------------------------------------------------
# The broker


@dataclass
class KafkaBroker:
    """One combined broker+controller KRaft node on free loopback ports, run from ``libs``."""

    libs: Path
    workdir: Path
    version: str
    mode: str = "kraft"
    users: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_USERS))
    host: str = "127.0.0.1"
    jvm_opts: Sequence[str] = BROKER_JVM_OPTS
    start_timeout: float = 120.0
    cluster_id: str = field(default_factory=new_cluster_id)
    ports: dict[str, int] = field(default_factory=dict)
    tls: TlsFiles | None = None
    process: subprocess.Popen[bytes] | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def log_file(self) -> Path:
        return self.workdir / "broker.log"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def address(self, listener: str) -> str:
        """``host:port`` of a listener: PLAINTEXT, SASL_PLAINTEXT, SSL or CONTROLLER."""
        return f"{self.host}:{self.ports[listener]}"

    @property
    def bootstrap(self) -> str:
        return self.address("PLAINTEXT")

    @property
    def sasl_bootstrap(self) -> str:
        return self.address("SASL_PLAINTEXT")

    @property
    def ssl_bootstrap(self) -> str:
        return self.address("SSL")

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, attempts: int = 3) -> KafkaBroker:
        """Format the storage, launch the JVM, wait for ApiVersions, and create the ACLs."""
        if self.mode not in MODES:
            raise ValueError(f"mode {self.mode!r}: this harness runs only {', '.join(MODES)}")
        self.workdir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        self.tls = make_tls(self.workdir / "tls", self.host)
        for attempt in range(1, attempts + 1):
            try:
                self._start_once(started)
                return self
            except PortTaken:
                # The free ports are picked before the JVM binds them: another process may win one.
                if attempt == attempts:
                    raise
                shutil.rmtree(self.workdir / "data", ignore_errors=True)
                self.log_file.rename(self.log_file.with_suffix(f".attempt-{attempt}.log"))
        raise AssertionError("unreachable")

    def _start_once(self, started: float) -> None:
        self.ports = dict(zip(("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "CONTROLLER"),
                              free_ports(4, self.host), strict=True))
        config = write_properties(self.workdir / "server.properties", self.server_properties())
        self._format(config)
        self.timings["format"] = time.monotonic() - started
        self._launch(config)
        try:
            self._wait_until_ready()
            self.timings["ready"] = time.monotonic() - started
            self._create_acls()
            self.timings["acls"] = time.monotonic() - started
        except BaseException:
            self.stop()
            raise

    def server_properties(self) -> dict[str, str]:
        """server.properties for this node."""
        p, h = self.ports, self.host
        listeners = {name: f"{name}://{h}:{port}" for name, port in p.items()}
        jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'username="admin" password="{self.users["admin"]}" '
                + " ".join(f'user_{name}="{password}"' for name, password in self.users.items()) + ";")
        assert self.tls is not None
        return {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{h}:{p['CONTROLLER']}",
            "controller.listener.names": "CONTROLLER",
            "listeners": ",".join(listeners.values()),
            "advertised.listeners": ",".join(v for k, v in listeners.items() if k != "CONTROLLER"),
            "listener.security.protocol.map": ("PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                               "SSL:SSL,CONTROLLER:PLAINTEXT"),
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.workdir / "data"),
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
            "listener.name.ssl.ssl.keystore.type": "PEM",
            "listener.name.ssl.ssl.keystore.certificate.chain": self.tls.chain_pem,
            "listener.name.ssl.ssl.keystore.key": self.tls.key_pem,
            "listener.name.ssl.ssl.client.auth": "none",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            # ANONYMOUS: the PLAINTEXT, SSL (no client auth) and controller listeners.
            "super.users": "User:admin;User:ANONYMOUS",
            "auto.create.topics.enable": "false",
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # Two cores: fewer threads, less contention with the test process.
            "num.network.threads": "2",
            "num.io.threads": "2",
            "background.threads": "2",
            "num.recovery.threads.per.data.dir": "1",
        }

    def _format(self, config: Path) -> None:
        command = java_command(self.libs, "kafka.tools.StorageTool", "format", "-t", self.cluster_id,
                               "-c", str(config),
                               log_config=write_log_config(self.workdir / "tools-log4j2.properties",
                                                           target="SYSTEM_ERR", level="WARN"))
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
        if done.returncode != 0:
            raise BrokerStartError(f"StorageTool format failed (exit {done.returncode}):\n"
                                   f"{done.stdout}{done.stderr}")

    def _launch(self, config: Path) -> None:
        command = java_command(self.libs, "kafka.Kafka", str(config), jvm_opts=self.jvm_opts,
                               log_config=write_log_config(self.workdir / "log4j2.properties"))
        with self.log_file.open("ab") as log:
            self.process = subprocess.Popen([*die_with_parent(), *command], stdout=log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            cwd=self.workdir)
        atexit.register(self.stop)

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while not api_versions_answer(self.host, self.ports["PLAINTEXT"], timeout=1.0):
            assert self.process is not None
            if self.process.poll() is not None:
                failure = PortTaken if "Address already in use" in self.log_file.read_text(
                    errors="replace") else BrokerStartError
                raise failure(f"Kafka {self.version} exited with {self.process.returncode} "
                                       f"while starting; {self.log_file}:\n{tail(self.log_file)}")
            if time.monotonic() > deadline:
                raise BrokerStartError(f"Kafka {self.version} did not answer ApiVersions within "
                                       f"{self.start_timeout:.0f}s; {self.log_file}:\n{tail(self.log_file)}")
            time.sleep(0.1)

    def _create_acls(self) -> None:
        """Grant ``reader`` DESCRIBE_CONFIGS on the cluster, and wait until the broker enforces it."""
        if "reader" not in self.users:
            return
        from kafka import admin as k


        acl = k.ACL("User:reader", "*", k.ACLOperation.DESCRIBE_CONFIGS, k.ACLPermissionType.ALLOW,
                    k.ResourcePattern(k.ResourceType.CLUSTER, CLUSTER_RESOURCE))
        wanted = k.ACLFilter("User:reader", None, k.ACLOperation.ANY, k.ACLPermissionType.ANY,
                             k.ResourcePatternFilter(k.ResourceType.CLUSTER, None,
                                                     k.ACLResourcePatternType.ANY))
        admin = k.KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="kqplan-test-harness")
        try:
            created = admin.create_acls([acl])
            if created.get("failed"):
                raise BrokerStartError(f"creating the reader ACL failed: {created['failed']}")
            # The controller commits it; the broker's authorizer applies it a moment later.
            deadline = time.monotonic() + 30
            while not admin.describe_acls(wanted)[0]:
                if time.monotonic() > deadline:
                    raise BrokerStartError("the reader ACL never became visible on the broker")
                time.sleep(0.1)
        finally:
            admin.close()

    def stop(self, grace: float = 30.0) -> int | None:
        """Stop the JVM by its PID (SIGTERM, then SIGKILL after ``grace`` s); idempotent."""
        atexit.unregister(self.stop)
        if self.process is None:
            return None
        return stop_process(self.process, grace)

    def rss_bytes(self) -> int | None:
        """Resident set size of the broker JVM, from /proc (None when it is not running)."""
        if self.process is None or self.process.poll() is not None:
            return None
        return rss_of(self.process.pid)


def rss_of(pid: int) -> int | None:
    """VmRSS of ``pid`` in bytes, from /proc/<pid>/status."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    found = re.search(r"^VmRSS:\s+(\d+)\s+kB", status, re.MULTILINE)
    return int(found.group(1)) * 1024 if found else None


def main(argv: Sequence[str] = sys.argv[1:]) -> None:
    """Run a broker in the foreground until Ctrl-C (handy for poking at it by hand)."""
    version = kafka_version()
    workdir = Path(argv[0]) if argv else Path(tempfile.mkdtemp(prefix="kqplan-kafka-"))
    with KafkaBroker(ensure_kafka_libs(version), workdir, version, kafka_mode()) as broker:
        print(f"Kafka {version} up: PLAINTEXT {broker.bootstrap}  SASL_PLAINTEXT {broker.sasl_bootstrap}  "
              f"SSL {broker.ssl_bootstrap}  CA {broker.tls.ca_file if broker.tls else '-'}  "
              f"log {broker.log_file}")
        with contextlib.suppress(KeyboardInterrupt):
            while broker.process and broker.process.poll() is None:
                time.sleep(1)


if __name__ == "__main__":
    main()
