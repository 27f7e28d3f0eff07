"""The README's quota intent example runs verbatim: its files, its commands, the output it shows."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO


def console(title: str) -> list[tuple[str, list[str]]]:
    """The ``console`` blocks of README section ``title``, in order: each ``$`` command (with its
    here-document) and the output shown after it."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = re.search(rf"^## {title}\n(.*?)(?=^## )", readme, re.M | re.S)
    assert section is not None, f"README.md has no section '## {title}'"
    blocks = re.findall(r"^```console\n(.*?)^```", section.group(1), re.M | re.S)
    assert blocks, f"README.md has no console example under '## {title}'"
    runs: list[tuple[str, list[str]]] = []
    lines = iter("".join(blocks).splitlines())
    for line in lines:
        if line.startswith("$ "):
            command = line[2:]
            heredoc = re.search(r"<<'(\w+)'", command)
            if heredoc:
                body = []
                for more in lines:
                    body.append(more)
                    if more == heredoc.group(1):
                        break
                command += "\n" + "\n".join(body)
            runs.append((command, []))
        else:
            runs[-1][1].append(line)
    return runs


def test_the_quota_tests_example_gives_the_output_shown(tmp_path: Path):
    runs = console("Quota intent as code")
    assert [c.split()[:2] for c, _ in runs] == [
        ["cat", ">"], ["cat", ">"], ["kqplan", "test"],  # quota tests
        ["cat", ">"], ["kqplan", "import"], ["kqplan", "plan"],  # accepting drift
        ["git", "init"], ["cat", ">"], ["cat", ">"], ["KQPLAN_BASE_REF=HEAD", "kqplan"]]  # a release
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("KQPLAN_")},
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    codes = []
    for command, shown in runs:
        done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                              check=False, timeout=60)
        assert done.stdout.splitlines() == shown, (command, done.stderr)
        assert done.stderr == "", command  # the README shows all a terminal would
        codes.append(done.returncode)
    assert codes == [0, 0, 1, 0, 0, 0, 0, 0, 0, 0]  # kqplan test exits 1: a test fails
    assert "producer_byte_rate: 12MiB" in (tmp_path / "quotas.yaml").read_text()
