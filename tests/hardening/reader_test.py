"""Every input file goes through one bounded reader (issue 29): a snapshot, a seed, a command
config and the files it names, a principals file, a saved plan, the sandbox's users file, a
manifest. Given ``/dev/zero`` (it used to be read until MemoryError), a FIFO (it used to block
forever), a directory, or a file over its limit, the real CLI exits 1 at once with a message that
names the file and what is wrong with it (the kind of file, or the limit), never a traceback.

The CLI runs in a subprocess with a timeout and an address-space limit, so that a hang or a
read of ``/dev/zero`` fails the test instead of hanging the suite or filling the machine."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from kqplan.snapshot.file import write_snapshot
from tests.helpers import entity, shown

MIB = 1024 * 1024
TIMEOUT_S = 20.0
QUICK_S = 5.0
ADDRESS_SPACE = 3 * 1024 * MIB  # a read of /dev/zero ends in MemoryError here, not in the OOM killer
MANIFEST = ("apiVersion: kqplan/v1\nkind: ClientQuotas\nentities:\n"
            "  - user: alice\n    quotas: {producer_byte_rate: 1024}\n")
TOML = '[limits]\nmax-input-mib = 1\nmax-file-mib = 1\n[clusters.c]\nsnapshot = "{path}"\nmanifests = ["m"]\n'


@dataclass(frozen=True)
class Kind:
    """One input file kind: the command line that reads ``path`` (run in the project directory),
    its limit (``[limits]``' 1 MiB, the default 512 MiB where no kqplan.toml is read, or the
    fixed bound of its format), and ``what`` the refusal calls it."""

    args: Callable[[Path], list[str]]
    limit_mib: int
    what: str


def _cc(body: str) -> Callable[[Path], list[str]]:
    """A command config whose ``body`` names ``{path}``: the command config itself is fine."""
    def args(path: Path) -> list[str]:
        Path("cc.properties").write_text(body.format(path=path))
        return ["describe", "--bootstrap-server", "127.0.0.1:9", "--command-config", "cc.properties"]
    return args


KINDS: dict[str, Kind] = {
    "--state snapshot": Kind(lambda p: ["plan", "m", "--state", str(p)], 1, "snapshot"),
    "kqplan.toml snapshot =": Kind(lambda p: ["plan", "--cluster", "c"], 1, "snapshot"),
    "plan --sandbox SEED": Kind(lambda p: ["plan", "m", f"--sandbox={p}"], 1, "snapshot"),
    "sandbox --seed": Kind(lambda p: ["sandbox", "--port", "0", "--seed", str(p)], 512, "snapshot"),
    "sandbox --state": Kind(lambda p: ["sandbox", "--port", "0", "--state", str(p)], 512,
                            "snapshot"),
    "--command-config": Kind(lambda p: ["describe", "--bootstrap-server", "127.0.0.1:9",
                                        "--command-config", str(p)], 1, "command config"),
    "ssl.ca.location": Kind(_cc("security.protocol=SSL\nssl.ca.location={path}\n"), 16,
                            "PEM file"),
    "ssl.truststore.location": Kind(_cc("security.protocol=SSL\nssl.truststore.location={path}\n"
                                        "ssl.truststore.password=x\n"), 16, "trust store"),
    "ssl.keystore.location": Kind(_cc("security.protocol=SSL\nssl.keystore.location={path}\n"
                                      "ssl.keystore.password=x\n"), 16, "key store"),
    "ssl.certificate.location": Kind(_cc("security.protocol=SSL\nssl.certificate.location={path}\n"
                                         "ssl.key.location={path}\n"), 16, "PEM file"),
    "ssl.crl.location": Kind(_cc("security.protocol=SSL\nssl.crl.location={path}\n"), 16,
                             "CRL file"),
    "sasl.kerberos.keytab": Kind(_cc("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n"
                                     "sasl.kerberos.keytab={path}\n"), 16, "keytab"),
    "--principals": Kind(lambda p: ["plan", "m", "--state", "snap.json", "--principals", str(p)], 1,
                         "principals file"),
    "apply --plan": Kind(lambda p: ["apply", "--plan", str(p), "--state", "snap.json", "--auto-approve"],
                         1, "saved plan"),
    "--sasl-users": Kind(lambda p: ["sandbox", "--port", "0", "--sasl-users", str(p)], 512,
                         "--sasl-users"),
    "manifest": Kind(lambda p: ["validate", str(p)], 1, "file"),
}

HOSTILE = ["dev-zero", "fifo", "directory", "over-limit"]
EXPECTED = {"dev-zero": "a device", "fifo": "a FIFO", "directory": "directory"}


def _bounded() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def run(args: list[str], cwd: Path) -> tuple[int, str, float]:
    """``kqplan ARGS`` in a subprocess: (exit code, stdout + stderr, seconds)."""
    exe = Path(sys.executable).with_name("kqplan")
    start = time.monotonic()
    try:
        proc = subprocess.run([str(exe), *args], cwd=cwd, capture_output=True, text=True,
                              timeout=TIMEOUT_S, preexec_fn=_bounded, check=False,
                              env={**os.environ, "KQPLAN_BOOTSTRAP_SERVER": "", "KQPLAN_COMMAND_CONFIG": ""})
    except subprocess.TimeoutExpired:
        pytest.fail(f"kqplan {' '.join(args)} still ran after {TIMEOUT_S:g} s (it blocks on the input)")
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - start


def hostile_file(project: Path, hostile: str, over: int) -> Path:
    if hostile == "dev-zero":
        return Path("/dev/zero")
    path = project / "hostile"
    if hostile == "fifo":
        os.mkfifo(path)
    elif hostile == "directory":
        path.mkdir()
    else:
        with path.open("wb") as fh:  # sparse: the size is what the reader is told, and refuses
            fh.truncate(over)
    return path


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project directory: manifests in m/, an empty snapshot, a saved plan of it."""
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "a.yaml").write_text(MANIFEST)
    write_snapshot(tmp_path / "snap.json", {entity(user="bob"): {"producer_byte_rate": 1.0}}, "id-1")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("hostile", HOSTILE)
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_hostile_input_is_refused_at_once_naming_the_file(project: Path, kind: str, hostile: str) -> None:
    spec = KINDS[kind]
    path = hostile_file(project, hostile, spec.limit_mib * MIB + 1)
    (project / "kqplan.toml").write_text(TOML.format(path=path))
    args = spec.args(path)
    code, output, seconds = run(args, project)
    assert code == 1, output
    assert "Traceback" not in output, output
    assert "MemoryError" not in output, output
    assert seconds < QUICK_S, f"{seconds:.1f} s"
    named = str(path) if hostile == "dev-zero" else path.name
    assert named in output, output
    if hostile == "over-limit":
        assert f"over the {spec.limit_mib} MiB limit" in output, output
    else:
        assert EXPECTED[hostile] in output, output
    if "Invalid value for" not in output:  # the option parser refuses directories itself
        assert spec.what in output, output


def test_the_size_refusal_says_which_limit_moves_it(project: Path) -> None:
    """A file over ``[limits] max-input-mib`` says to raise it; a command config over its own
    bound (a properties file is a few KB) does not send the user to a setting that cannot help."""
    path = hostile_file(project, "over-limit", 2 * MIB)
    (project / "kqplan.toml").write_text(TOML.format(path=path))
    _, output, _ = run(["plan", "--cluster", "c"], project)
    # shown relative to the current directory, the project (issue 32: outputs that travel)
    assert f"cannot read snapshot {path.relative_to(project)}: it is 2.0 MiB, over the 1 MiB limit" in output
    assert "raise [limits] max-input-mib in kqplan.toml" in output
    _, output, _ = run(["describe", "--bootstrap-server", "127.0.0.1:9", "--command-config", "hostile"],
                       project)
    assert "cannot read command config hostile: it is 2.0 MiB, over the 1 MiB limit" in output
    assert "max-input-mib" not in output
    assert "give the client.properties file" in output


def test_a_manifest_keeps_its_located_diagnostics(project: Path) -> None:
    """A manifest's refusals stay KQP004 (over max-file-mib) and KQP008 (not readable), located."""
    fifo = project / "m" / "pipe.yaml"
    os.mkfifo(fifo)
    code, output, _ = run(["validate", "/dev/zero", str(fifo)], project)
    assert code == 1
    # shown from the root (the current directory here, no kqplan.toml nor git): what lies outside
    # it absolute, what lies under it relative (issue 43)
    output = "\n" + output
    assert "\n/dev/zero: error[KQP008] cannot read file: it is a device, not a regular file" in output
    assert f"\n{shown(fifo, project)}: error[KQP008] cannot read file: it is a FIFO, not a regular file" \
        in output
    fifo.unlink()
    big = hostile_file(project, "over-limit", 2 * MIB)
    (project / "kqplan.toml").write_text(TOML.format(path="snap.json"))
    code, output, _ = run(["validate", str(big)], project)
    assert code == 1
    assert f"\n{shown(big, project)}: error[KQP004] file is 2.0 MiB, over the 1 MiB limit" in "\n" + output
    assert "max-file-mib" in output


def test_an_oauth_token_file_is_read_bounded(tmp_path: Path) -> None:
    """The OAuth token file is read when a connection authenticates: a FIFO there hung it."""
    fifo = tmp_path / "token"
    os.mkfifo(fifo)
    code = ("from kqplan.cluster.oauth import TokenProvider\n"
            "from kqplan.cluster.security import OAuthSettings\n"
            "from kqplan.core.errors import KqplanError\n"
            f"provider = TokenProvider(OAuthSettings(token_endpoint='file://{fifo}'), 1.0)\n"
            "try:\n    provider.token()\nexcept KqplanError as exc:\n    print(exc)\n")
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=TIMEOUT_S, preexec_fn=_bounded, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail("reading a FIFO as the OAuth token file blocked")
    assert f"cannot read the OAuth token file {fifo}: it is a FIFO, not a regular file" in proc.stdout, \
        proc.stdout + proc.stderr
