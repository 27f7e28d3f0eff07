"""Nothing in a manifest directory is silently dropped: with prune, a skipped file is a deletion."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.helpers import run_cli, shown, write_manifest

PRUNE = ("ownership: {prune: true, scope: [{user: '*'}]}\nentities:\n  - user: a\n"
         "    quotas: {producer_byte_rate: 1}\n")


def snapshot(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"format_version": 1, "cluster_id": "c", "entities": [
        {"entity": {"user": u}, "quotas": {"producer_byte_rate": 1.0}} for u in ("a", "b")]}))
    return path


def test_a_nul_byte_does_not_cut_the_manifest_short(tmp_path):
    m = tmp_path / "m"
    write_manifest(m / "q.yaml", PRUNE + "\x00\n  - user: b\n    quotas: {producer_byte_rate: 1}\n")
    result = run_cli("plan", m, "--state", snapshot(tmp_path))
    assert result.exit_code == 1
    assert f"{m / 'q.yaml'}:7:1: error[KQP009] character U+0000 is not allowed in YAML" in result.stderr
    assert "- {user=b}" not in result.stdout  # nothing planned, nothing deleted


@pytest.mark.parametrize("case", ["dangling", "loop"])
def test_a_broken_symlink_is_an_error_not_a_skip(tmp_path, case):
    m = tmp_path / "m"
    write_manifest(m / "a.yaml", PRUNE)
    if case == "dangling":
        (m / "b.yaml").symlink_to(tmp_path / "gone.yaml")
    else:
        (m / "b.yaml").symlink_to(m / "c.yaml")
        (m / "c.yaml").symlink_to(m / "b.yaml")
    result = run_cli("validate", m)
    assert result.exit_code == 1
    assert f"{m / 'b.yaml'}: error[KQP008] symlink to nothing (dangling, or a loop)" in result.stdout


# root reads every directory: the check runs kqplan without that power. First as root without
# the capabilities that override permissions (root still reads its own 0700 home, where the
# checkout and its .venv may live); else as user 65534 with a world-readable copy of kqplan.
WITHOUT_DAC = ["setpriv", "--bounding-set=-dac_override,-dac_read_search",
               "--inh-caps=-dac_override,-dac_read_search"]
UNPRIVILEGED = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def readable_copy_of_kqplan(base: Path) -> Path:
    """The kqplan under test, copied under ``base`` (world-readable): the checkout itself may live
    where user 65534 cannot go (cloned into root's 0700 home); the copy is what it imports."""
    import kqplan

    src = base / "src"
    shutil.copytree(Path(kqplan.__file__).parent, src / "kqplan",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for root, _, files in os.walk(src):
        os.chmod(root, 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)
    return src


def unprivileged(base: Path) -> tuple[list[str], dict[str, str]]:
    """How to run kqplan so that a mode-0 directory is unreadable: (command prefix, environment);
    a skip, with the reason, when this machine offers no way."""
    import kqplan

    # the kqplan under test, wherever the subprocess starts (cwd is elsewhere, site-packages may
    # hold another install)
    env = {**os.environ, "HOME": str(base), "PYTHONPATH": str(Path(kqplan.__file__).parent.parent)}
    if os.geteuid() != 0:
        return [], env
    problems = []
    for prefix in (WITHOUT_DAC, UNPRIVILEGED):
        tried = {**env, "PYTHONPATH": str(readable_copy_of_kqplan(base))} if prefix is UNPRIVILEGED else env
        try:
            probe = subprocess.run([*prefix, sys.executable, "-c", "import kqplan.cli.main"],
                                   capture_output=True, text=True, check=False, cwd=base, env=tried)
        except OSError as exc:
            problems.append(f"{prefix[0]}: {exc.strerror}")
            continue
        if probe.returncode == 0:
            return prefix, tried
        problems.append(f"{' '.join(prefix)}: {(probe.stderr.strip().splitlines() or ['?'])[-1]}")
    pytest.skip("running as root, and kqplan cannot run without root's power to read every "
                f"directory here (the interpreter or its site-packages are out of reach): {problems}")


def test_an_unreadable_directory_is_an_error():
    base = Path(tempfile.mkdtemp(prefix="kqplan-perm-"))
    try:
        base.chmod(0o755)
        prefix, env = unprivileged(base)
        m = base / "m"
        write_manifest(m / "a.yaml", PRUNE)
        for p in (m, m / "a.yaml"):
            p.chmod(0o755)
        (m / "locked").mkdir()
        (m / "locked").chmod(0)
        done = subprocess.run([*prefix, sys.executable, "-m", "kqplan", "validate", str(m)],
                              capture_output=True, text=True, check=False, cwd=base, env=env)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert done.returncode == 1, done.stdout + done.stderr
    # shown from the root, the current directory base (no kqplan.toml, no git work tree)
    assert f"\n{shown(m / 'locked', base)}: error[KQP008] cannot read directory: Permission denied" \
        in "\n" + done.stdout


def test_a_directory_symlink_loop_is_reported(tmp_path):
    m = tmp_path / "m"
    write_manifest(m / "a.yaml", PRUNE)
    (m / "sub").mkdir()
    (m / "sub" / "up").symlink_to(m)
    result = run_cli("validate", m)
    assert result.exit_code == 1
    assert f"{m / 'sub' / 'up'}: error[KQP008] directory symlink loop" in result.stdout
