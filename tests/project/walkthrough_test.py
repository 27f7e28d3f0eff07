"""The README is the front door (issue 32 §5): its five-minute walkthrough runs verbatim — two
sandbox brokers, ``kqplan init``, a change, plan, apply, drift, drift accepted, a release and a
quota test (issue 44) — and every relative link in it points at a file of the repository."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
PORTS = (29092, 29093)  # the walkthrough's sandboxes


def walkthrough() -> str:
    found = re.search(r"^## Five minutes with kqplan\n.*?^```sh\n(.*?)^```", README, re.M | re.S)
    assert found is not None, "README.md has no five-minute walkthrough"
    return found.group(1)


def as_the_clone(where: Path, venv: Path) -> Path:
    """``where`` laid out as the clone the walkthrough expects: its ``.venv`` (``venv``) and examples."""
    where.mkdir(parents=True, exist_ok=True)
    (where / ".venv").symlink_to(venv)
    (where / "examples").symlink_to(REPO / "examples")
    return where


def run_walkthrough(clone: Path, env: dict[str, str], ports: tuple[int, int] = PORTS) -> str:
    """The walkthrough in ``bash -e`` from ``clone`` (see :func:`as_the_clone`), as written but its
    sandboxes' ports, which ``ports`` replace: what it printed, once it has exited 0."""
    script = walkthrough()
    for written, port in zip(PORTS, ports, strict=True):
        assert re.search(rf"\b{written}\b", script), f"the walkthrough no longer uses port {written}"
        script = re.sub(rf"\b{written}\b", str(port), script)
    for port in ports:
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", port)) != 0, (
                f"port {port}, which the README's walkthrough uses, is taken on this machine")
    (clone / "walkthrough.sh").write_text(script)
    # its own process group: the sandboxes it starts in the background stop with it, whatever fails
    shell = subprocess.Popen(["bash", "-e", "walkthrough.sh"], cwd=clone, env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True)
    try:
        out, _ = shell.communicate(timeout=180)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGTERM)
        if shell.poll() is None:
            shell.kill()
            shell.communicate()
    assert shell.returncode == 0, out
    return out


def assert_the_walkthrough_did_what_the_readme_says(out: str, clone: Path) -> None:
    assert "Wrote kqplan.toml with 2 cluster(s)." in out
    assert "No changes. The cluster matches the manifests." in out
    assert "+ {user=reporting}" in out
    assert "Apply complete: 1 added, 0 changed, 0 deleted." in out
    assert "~ consumer_byte_rate = 1048576 (1 MiB) -> 5242880 (5 MiB)" in out  # the drift, to undo
    assert "drift found: exit 2" in out
    # quota intent as code (issue 44): the drift accepted where it is declared, a release, a test
    assert "  ~ {user=reporting} consumer_byte_rate: 5 MiB -> 1 MiB  # quotas/prod/quotas.yaml:28:34" in out
    assert "holds   reporting reads 1 MiB/s  (quotas/prod/tests.yaml:4:5)" in out
    assert out.rstrip().endswith("Quota tests after this plan: 1 hold, 0 fail (of 1).")  # bash -e: exit 0
    assert "{user=legacy}" not in out.split("drift found: exit 2")[1].split("(altered)")[1]  # not deleted
    toml = (clone / "demo" / "kqplan.toml").read_text()
    assert 'id = "kqplan-example-prod-eu"' in toml
    assert 'id = "staging-cluster"' in toml


def test_the_walkthrough_runs_verbatim(tmp_path):
    """In this venv (every extra): tests/project/extras_test.py runs it again in the base install."""
    clone = as_the_clone(tmp_path, Path(sys.prefix))
    env = {k: v for k, v in os.environ.items() if not k.startswith("KQPLAN_")}
    assert_the_walkthrough_did_what_the_readme_says(run_walkthrough(clone, env), clone)


def test_the_readme_s_links_point_at_files():
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if "://" not in link]
    assert local, "no relative link found: the pattern is wrong"
    missing = [link for link in local if not (REPO / link).exists()]
    assert missing == []


def test_the_readme_is_the_front_door_and_the_reference_is_in_docs():
    assert len(README.splitlines()) < 120
    for heading in ("## Set up", "## Five minutes with kqplan", "## Documentation"):
        assert heading in README


def test_the_observability_example_runs_and_prints_what_the_readme_shows(tmp_path):
    """The README's Observability example: its commands run in bash as written (``$ `` lines and
    the heredoc they open), and every line of the forecast the README shows is what kqplan prints."""
    from tests.project.extras_test import observability_example

    commands, shown = observability_example()
    script = commands.replace("kqplan ", f"{Path(sys.prefix) / 'bin' / 'kqplan'} ", 1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KQPLAN_")}
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, text=True, capture_output=True,
                          timeout=120, stdin=subprocess.DEVNULL, check=False)
    assert done.returncode == 1, done.stdout + done.stderr  # --fail-on-throttle: the buckets are new
    printed = (done.stdout + done.stderr).splitlines()
    for line in shown:
        assert line in printed, (line, done.stdout + done.stderr)
