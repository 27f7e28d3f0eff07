"""A real Apache Kafka broker for the tests: jars from Maven Central (tests/kafka/pom.xml), one node.

Listeners: PLAINTEXT, SASL_PLAINTEXT (PLAIN) and SSL (PEM), plus the controller's own in KRaft mode.
Two metadata modes: ``kraft`` (a combined broker+controller node, Kafka 3.3+) and ``zookeeper``
(Kafka 2.7–3.9: a ZooKeeper server from the same jars, then the broker pointing at it). Which
releases the tests run against is the matrix, env ``KQPLAN_KAFKA_MATRIX`` (:func:`kafka_matrix`);
see the reference §5.
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

POM = Path(__file__).with_name("pom.xml")
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # mvn -B still emits colour resets
KRAFT, ZOOKEEPER = "kraft", "zookeeper"
MODES = (KRAFT, ZOOKEEPER)
# The last release line with ZooKeeper mode (4.0 removed it); the default matrix runs it beside the pom's pin.
DEFAULT_ZOOKEEPER_VERSION = "3.9.1"
FIRST_KRAFT = (3, 3)      # KRaft production-ready (KIP-833); earlier 3.x lacked the pieces used here
LAST_ZOOKEEPER = (3, 9)   # 4.0 removed ZooKeeper mode
FIRST_PEM_STORES = (2, 7)  # ssl.keystore.type=PEM (KIP-651): the SSL listener needs it
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
# No AdminServer: ZooKeeper would otherwise bind Jetty (on the classpath via kafka-tools) to port 8080,
# which another worker on this machine may hold.
ZOOKEEPER_JVM_OPTS = ("-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                      "-Dzookeeper.admin.enableServer=false")
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
# Kafka 2.x/3.x and their ZooKeeper log through log4j 1.x (reload4j, the pom's log4j1 profile).
LOG4J1 = """\
log4j.rootLogger={level}, out
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.Target={target}
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c)%n
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
    mode = _MODE_ALIASES.get(env.get("KQPLAN_KAFKA_MODE") or KRAFT, env.get("KQPLAN_KAFKA_MODE", ""))
    if mode not in MODES:
        raise ValueError(f"KQPLAN_KAFKA_MODE={mode!r}: this harness runs only {', '.join(MODES)}")
    return mode


_MODE_ALIASES = {KRAFT: KRAFT, ZOOKEEPER: ZOOKEEPER, "zk": ZOOKEEPER}


def version_tuple(version: str) -> tuple[int, int]:
    """``"3.9.1"`` -> ``(3, 9)``: the release line, which is what decides features."""
    found = re.match(r"(\d+)\.(\d+)", version)
    if found is None:
        raise ValueError(f"{version!r} is not a Kafka release number")
    return int(found[1]), int(found[2])


@dataclass(frozen=True, order=True)
class KafkaSpec:
    """One entry of the matrix: a Kafka release and the metadata mode its node runs in."""

    version: str
    mode: str = KRAFT

    @classmethod
    def parse(cls, text: str) -> KafkaSpec:
        """``4.3.1-kraft``, ``3.9.1-zookeeper`` (or ``-zk``); a bare ``4.3.1`` is KRaft."""
        version, _, mode = text.strip().partition("-")
        spec = cls(version, _MODE_ALIASES.get(mode or KRAFT, mode))
        spec.check()
        return spec

    @property
    def id(self) -> str:
        """``4.3.1-kraft``: the part of a test id that names this broker."""
        return f"{self.version}-{self.mode}"

    @property
    def zookeeper(self) -> bool:
        return self.mode == ZOOKEEPER

    @property
    def release(self) -> tuple[int, int]:
        return version_tuple(self.version)

    def check(self) -> None:
        """Raise ValueError for a pair this harness cannot run, saying which would do."""
        if self.mode not in MODES:
            raise ValueError(f"{self.version}-{self.mode}: the mode is one of {', '.join(MODES)} (or zk)")
        release = self.release
        if self.zookeeper and release > LAST_ZOOKEEPER:
            raise ValueError(f"{self.id}: Kafka 4.0 removed ZooKeeper mode; use {self.version}-kraft "
                             f"or a 3.x release in ZooKeeper mode")
        if self.zookeeper and release < FIRST_PEM_STORES:
            raise ValueError(f"{self.id}: the SSL listener needs PEM key stores (Kafka 2.7+)")
        if not self.zookeeper and release < FIRST_KRAFT:
            raise ValueError(f"{self.id}: KRaft needs Kafka 3.3+; use {self.version}-zookeeper")


def default_matrix() -> tuple[KafkaSpec, ...]:
    """The pom's pin in KRaft mode, and the last ZooKeeper-mode release line (what ``.ci/run`` runs)."""
    return KafkaSpec(pinned_kafka_version(), KRAFT), KafkaSpec(DEFAULT_ZOOKEEPER_VERSION, ZOOKEEPER)


def full_matrix() -> tuple[KafkaSpec, ...]:
    """``KQPLAN_KAFKA_MATRIX=all``: the default two, KRaft on the last 3.x line, an older 3.x line
    in ZooKeeper mode, and 2.8 (ip entities and controller_mutation_rate came with 2.7, PEM key
    stores for the SSL listener too; 2.8 is that line's last release)."""
    return (*default_matrix(), KafkaSpec(DEFAULT_ZOOKEEPER_VERSION, KRAFT), KafkaSpec("3.6.2", ZOOKEEPER),
            KafkaSpec("2.8.2", ZOOKEEPER))


def kafka_matrix(env: Mapping[str, str] = os.environ) -> tuple[KafkaSpec, ...]:
    """The brokers the tests run against, in order.

    ``$KQPLAN_KAFKA_MATRIX`` (comma-separated ``VERSION-MODE`` entries, or ``all`` for
    :func:`full_matrix`) when set; else one broker when ``$KQPLAN_KAFKA_VERSION`` or
    ``$KQPLAN_KAFKA_MODE`` is set (the pre-matrix way to pick one); else :func:`default_matrix`.
    """
    listed = env.get("KQPLAN_KAFKA_MATRIX", "").strip()
    if listed == "all":
        return full_matrix()
    if listed:
        try:
            specs = [KafkaSpec.parse(entry) for entry in listed.split(",") if entry.strip()]
        except ValueError as err:
            raise ValueError(f"KQPLAN_KAFKA_MATRIX={listed!r}: {err}") from err
        return tuple(dict.fromkeys(specs))  # a repeated entry would only run the same tests twice
    if env.get("KQPLAN_KAFKA_VERSION") or env.get("KQPLAN_KAFKA_MODE"):
        spec = KafkaSpec(kafka_version(env), kafka_mode(env))
        spec.check()
        return (spec,)
    return default_matrix()


def maven_profile(version: str) -> str:
    """The pom profile with this release's logging backend: log4j 1.x before Kafka 4.0."""
    return "log4j2" if version_tuple(version) >= (4, 0) else "log4j1"


def cache_root(env: Mapping[str, str] = os.environ) -> Path:
    """``$KQPLAN_CACHE``, else ``~/.cache/kqplan``."""
    configured = env.get("KQPLAN_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "kqplan"


def _pom_stamp(version: str, pom: Path) -> str:
    # The jar set depends on the pom (and the profile it picks) too: a changed pom must not reuse an
    # old download.
    return hashlib.sha256(pom.read_bytes() + f"{version} {maven_profile(version)}".encode()).hexdigest()


def download_kafka_libs(version: str, dest: Path, *, pom: Path = POM,
                        maven_args: Sequence[str] = ()) -> None:
    """Copy Kafka ``version``'s runtime jars into ``dest`` with Maven; raise with its output on failure."""
    # -U: Maven caches a "not found" for a day; a release published since must be seen at once.
    command = ["mvn", "-q", "-B", "-U", "-Dstyle.color=never", "-f", str(pom), f"-Dkafka.version={version}",
               "-P", maven_profile(version),
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
                 log_config: Path | None = None, classpath: Sequence[Path] = ()) -> list[str]:
    """``java <opts> -cp 'libs/*' <main> <args>`` (java expands the wildcard itself; no shell).

    ``log_config`` is a file from :func:`write_log_config` for the same ``libs``; ``classpath``:
    more entries after the jars (a directory of classes a test compiled, e.g. a quota callback).
    """
    logging = []
    if log_config is not None:
        logging = ([f"-Dlog4j.configuration={log_config.as_uri()}"] if uses_log4j1(libs)
                   else [f"-Dlog4j2.configurationFile={log_config}"])
    path = ":".join([str(libs / "*"), *map(str, classpath)])
    return ["java", *jvm_opts, *logging, "-cp", path, main_class, *args]


def uses_log4j1(libs: Path) -> bool:
    """Whether the jars in ``libs`` log through log4j 1.x (reload4j: Kafka before 4.0) or log4j2."""
    return any(libs.glob("reload4j-*.jar"))


def write_log_config(path: Path, *, target: str = "SYSTEM_OUT", level: str = "INFO",
                     libs: Path | None = None) -> Path:
    """A logging config sending everything at ``level`` or above to stdout/stderr.

    In log4j2's format, or log4j 1.x's when ``libs`` holds reload4j (Kafka before 4.0).
    """
    if libs is not None and uses_log4j1(libs):
        java_target = {"SYSTEM_OUT": "System.out", "SYSTEM_ERR": "System.err"}[target]
        path.write_text(LOG4J1.format(target=java_target, level=level))
    else:
        path.write_text(LOG4J2.format(target=target, level=level))
    return path


def die_with_parent(signal_name: str = "TERM") -> list[str]:
    """A command prefix making the kernel signal the child if its parent dies (pytest killed outright).

    util-linux ``setpriv`` execs the command, so the PID stays the JVM's; unlike ``preexec_fn`` it is
    safe in a process with threads. Without setpriv there is only atexit and the fixture teardown.
    """
    return ["setpriv", "--pdeathsig", signal_name] if shutil.which("setpriv") else []


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


def zookeeper_answers(host: str, port: int, timeout: float = 2.0) -> bool:
    """Whether ZooKeeper on ``host:port`` answers the ``srvr`` four-letter command (the one it allows
    by default), i.e. is serving rather than merely bound."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as conn:
            conn.sendall(b"srvr")
            answer = b""
            while chunk := conn.recv(4096):
                answer += chunk
    except OSError:
        return False
    return b"Zookeeper version" in answer


@dataclass
class KafkaBroker:
    """One Kafka node on free loopback ports, run from ``libs``.

    KRaft mode: one combined broker+controller node. ZooKeeper mode: a ZooKeeper server from the same
    jars (``ZooKeeperServerMain``), then the broker with ``zookeeper.connect`` pointing at it.
    """

    libs: Path
    workdir: Path
    version: str
    mode: str = KRAFT
    users: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_USERS))
    host: str = "127.0.0.1"
    jvm_opts: Sequence[str] = BROKER_JVM_OPTS
    start_timeout: float = 120.0
    # KRaft: chosen here and formatted into the storage. ZooKeeper: the broker draws its own; this is
    # replaced by it (from meta.properties) once the broker is up.
    cluster_id: str = field(default_factory=new_cluster_id)
    ports: dict[str, int] = field(default_factory=dict)
    tls: TlsFiles | None = None
    process: subprocess.Popen[bytes] | None = None
    zookeeper: subprocess.Popen[bytes] | None = None
    timings: dict[str, float] = field(default_factory=dict)
    extra_properties: Mapping[str, str] = field(default_factory=dict)
    """server.properties entries over the harness's own (e.g. ``client.quota.callback.class``)."""
    classpath: Sequence[Path] = ()
    """More classpath entries for the broker JVM, after Kafka's jars."""

    @property
    def spec(self) -> KafkaSpec:
        return KafkaSpec(self.version, self.mode)

    @property
    def log_file(self) -> Path:
        return self.workdir / "broker.log"

    @property
    def zookeeper_log_file(self) -> Path:
        return self.workdir / "zookeeper.log"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def address(self, listener: str) -> str:
        """``host:port`` of a listener: PLAINTEXT, SASL_PLAINTEXT, SSL, and CONTROLLER or ZOOKEEPER."""
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
        """Start the node (format or ZooKeeper first), wait for ApiVersions, and create the ACLs."""
        self.spec.check()
        self.workdir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        self.tls = make_tls(self.workdir / "tls", self.host)
        for attempt in range(1, attempts + 1):
            try:
                self._start_once(started)
                return self
            except PortTaken:
                # The free ports are picked before the JVMs bind them: another process may win one.
                if attempt == attempts:
                    raise
                for data in ("data", "zookeeper-data"):
                    shutil.rmtree(self.workdir / data, ignore_errors=True)
                for log in (self.log_file, self.zookeeper_log_file):
                    if log.exists():
                        log.rename(log.with_suffix(f".attempt-{attempt}.log"))
        raise AssertionError("unreachable")

    def _start_once(self, started: float) -> None:
        extra = "ZOOKEEPER" if self.spec.zookeeper else "CONTROLLER"
        # PROXIED: a PLAINTEXT listener advertised at the PROXY port, where a test's fault proxy
        # listens and forwards to it (tests/fault_proxy.py)
        self.ports = dict(zip(("PLAINTEXT", "SASL_PLAINTEXT", "SSL", extra, "PROXIED", "PROXY"),
                              free_ports(6, self.host), strict=True))
        config = write_properties(self.workdir / "server.properties", self.server_properties())
        try:
            if self.spec.zookeeper:
                self._launch_zookeeper()
                self.timings["zookeeper"] = time.monotonic() - started
            else:
                self._format(config)
                self.timings["format"] = time.monotonic() - started
            self._launch(config)
            self._wait_until_ready()
            if self.spec.zookeeper:
                self.cluster_id = self._zookeeper_cluster_id()
            self.timings["ready"] = time.monotonic() - started
            self._create_acls()
            self.timings["acls"] = time.monotonic() - started
        except BaseException:
            self.stop()
            raise

    def server_properties(self) -> dict[str, str]:
        """server.properties for this node."""
        p, h = self.ports, self.host
        listeners = {name: f"{name}://{h}:{port}" for name, port in p.items()
                     if name not in ("ZOOKEEPER", "PROXY")}
        advertised = {**listeners, "PROXIED": f"PROXIED://{h}:{p['PROXY']}"}
        jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'username="admin" password="{self.users["admin"]}" '
                + " ".join(f'user_{name}="{password}"' for name, password in self.users.items()) + ";")
        assert self.tls is not None
        if self.spec.zookeeper:
            metadata = {
                "broker.id": "1",
                "zookeeper.connect": self.address("ZOOKEEPER"),
                "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            }
        else:
            metadata = {
                "process.roles": "broker,controller",
                "node.id": "1",
                "controller.quorum.voters": f"1@{h}:{p['CONTROLLER']}",
                "controller.listener.names": "CONTROLLER",
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            }
        props = {
            **metadata,
            "listeners": ",".join(listeners.values()),
            "advertised.listeners": ",".join(v for k, v in advertised.items() if k != "CONTROLLER"),
            "listener.security.protocol.map": ("PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                               "SSL:SSL,CONTROLLER:PLAINTEXT,PROXIED:PLAINTEXT"),
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.workdir / "data"),
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
            "listener.name.ssl.ssl.keystore.type": "PEM",
            "listener.name.ssl.ssl.keystore.certificate.chain": self.tls.chain_pem,
            "listener.name.ssl.ssl.keystore.key": self.tls.key_pem,
            "listener.name.ssl.ssl.client.auth": "none",
            # ANONYMOUS: the PLAINTEXT, SSL (no client auth) and controller listeners.
            "super.users": "User:admin;User:ANONYMOUS",
            "auto.create.topics.enable": "false",
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # Two cores: fewer threads, less contention with the test process.
            "num.network.threads": "2",
            "num.io.threads": "2",
            "background.threads": "2",
            "num.recovery.threads.per.data.dir": "1",
        }
        if self.spec.release >= (4, 0):  # older releases would log them as unknown
            props |= {"share.coordinator.state.topic.replication.factor": "1",
                      "share.coordinator.state.topic.min.isr": "1"}
        return props | dict(self.extra_properties)

    def _format(self, config: Path) -> None:
        command = java_command(self.libs, "kafka.tools.StorageTool", "format", "-t", self.cluster_id,
                               "-c", str(config),
                               log_config=write_log_config(self.workdir / "tools-log.properties",
                                                           target="SYSTEM_ERR", level="WARN",
                                                           libs=self.libs),
                               classpath=self.classpath)  # it checks the classes the config names
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
        if done.returncode != 0:
            raise BrokerStartError(f"StorageTool format failed (exit {done.returncode}):\n"
                                   f"{done.stdout}{done.stderr}")

    def _spawn(self, command: list[str], log_file: Path) -> subprocess.Popen[bytes]:
        # ZooKeeper mode: both JVMs get the signal at once, ZooKeeper is gone in a moment, and a
        # SIGTERMed broker would then retry it for minutes in its shutdown hook (seen: an orphan
        # broker outliving pytest). A killed pytest leaves only temp data, so KILL them.
        on_parent_death = "KILL" if self.spec.zookeeper else "TERM"
        with log_file.open("ab") as log:
            return subprocess.Popen([*die_with_parent(on_parent_death), *command], stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.workdir)

    def _launch_zookeeper(self) -> None:
        """Start ZooKeeper (``ZooKeeperServerMain PORT DATADIR``) and wait until it serves."""
        data = self.workdir / "zookeeper-data"
        data.mkdir(parents=True, exist_ok=True)
        log_config = write_log_config(self.workdir / "zookeeper-log.properties", libs=self.libs, level="WARN")
        command = java_command(self.libs, "org.apache.zookeeper.server.ZooKeeperServerMain",
                               str(self.ports["ZOOKEEPER"]), str(data), jvm_opts=ZOOKEEPER_JVM_OPTS,
                               log_config=log_config)
        atexit.register(self.stop)
        self.zookeeper = self._spawn(command, self.zookeeper_log_file)
        self._wait_for("ZooKeeper", self.zookeeper, self.zookeeper_log_file,
                       lambda: zookeeper_answers(self.host, self.ports["ZOOKEEPER"], timeout=1.0))

    def _launch(self, config: Path) -> None:
        command = java_command(self.libs, "kafka.Kafka", str(config), jvm_opts=self.jvm_opts,
                               log_config=write_log_config(self.workdir / "broker-log.properties",
                                                           libs=self.libs), classpath=self.classpath)
        atexit.register(self.stop)
        self.process = self._spawn(command, self.log_file)

    def _wait_until_ready(self) -> None:
        assert self.process is not None
        self._wait_for(f"Kafka {self.version}", self.process, self.log_file,
                       lambda: api_versions_answer(self.host, self.ports["PLAINTEXT"], timeout=1.0))

    def _wait_for(self, what: str, process: subprocess.Popen[bytes], log_file: Path,
                  ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + self.start_timeout
        while not ready():
            if process.poll() is not None:
                failure = PortTaken if "Address already in use" in log_file.read_text(
                    errors="replace") else BrokerStartError
                raise failure(f"{what} exited with {process.returncode} while starting; "
                              f"{log_file}:\n{tail(log_file)}")
            if time.monotonic() > deadline:
                raise BrokerStartError(f"{what} did not answer within {self.start_timeout:.0f}s; "
                                       f"{log_file}:\n{tail(log_file)}")
            time.sleep(0.1)

    def _zookeeper_cluster_id(self) -> str:
        """The id the ZooKeeper-mode broker drew, from the meta.properties it writes at start-up."""
        meta = self.workdir / "data" / "meta.properties"
        deadline = time.monotonic() + 30
        while True:
            found = re.search(r"^cluster\.id=(\S+)$", meta.read_text() if meta.is_file() else "",
                              re.MULTILINE)
            if found:
                return found.group(1)
            if time.monotonic() > deadline:
                raise BrokerStartError(f"{meta} never named the cluster id; {self.log_file}:\n"
                                       f"{tail(self.log_file)}")
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
            # KRaft: the controller commits it and the broker's authorizer applies it a moment later.
            # ZooKeeper: the authorizer learns it from a ZooKeeper watch, also a moment later.
            deadline = time.monotonic() + 30
            while not admin.describe_acls(wanted)[0]:
                if time.monotonic() > deadline:
                    raise BrokerStartError("the reader ACL never became visible on the broker")
                time.sleep(0.1)
        finally:
            admin.close()

    def stop(self, grace: float = 30.0) -> int | None:
        """Stop the JVMs by PID (SIGTERM, then SIGKILL after ``grace`` s): the broker, then its
        ZooKeeper (a broker without it would wait out its session timeout). Idempotent."""
        atexit.unregister(self.stop)
        status = stop_process(self.process, grace) if self.process is not None else None
        if self.zookeeper is not None:
            stop_process(self.zookeeper, grace)
        return status

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
    """Run the matrix's first broker in the foreground until Ctrl-C (handy for poking at it by hand)."""
    spec = kafka_matrix()[0]
    workdir = Path(argv[0]) if argv else Path(tempfile.mkdtemp(prefix="kqplan-kafka-"))
    with KafkaBroker(ensure_kafka_libs(spec.version), workdir, spec.version, spec.mode) as broker:
        zookeeper = f"  ZooKeeper {broker.address('ZOOKEEPER')}" if spec.zookeeper else ""
        print(f"Kafka {spec.id} up: PLAINTEXT {broker.bootstrap}  SASL_PLAINTEXT {broker.sasl_bootstrap}  "
              f"SSL {broker.ssl_bootstrap}  CA {broker.tls.ca_file if broker.tls else '-'}  "
              f"log {broker.log_file}{zookeeper}")
        with contextlib.suppress(KeyboardInterrupt):
            while broker.process and broker.process.poll() is None:
                time.sleep(1)


if __name__ == "__main__":
    main()
