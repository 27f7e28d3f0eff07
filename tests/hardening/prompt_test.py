"""Ctrl-D at apply's confirmation prompt cancels the apply (it was an internal error)."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time

from tests.helpers import REPO

PAY = REPO / "examples" / "payments"


def test_ctrl_d_at_the_prompt_cancels(tmp_path):
    primary, secondary = os.openpty()
    env = {k: v for k, v in os.environ.items() if k != "CI"}  # CI=true disables prompts
    proc = subprocess.Popen([sys.executable, "-m", "kqplan", "apply", str(PAY), "--sandbox",
                             str(PAY / "snapshot.json")], stdin=secondary, stdout=secondary,
                            stderr=subprocess.PIPE, env=env, cwd=tmp_path)
    os.close(secondary)
    seen = b""
    deadline = time.monotonic() + 60
    while b"Enter a value:" not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([primary], [], [], 1)
        if ready:
            seen += os.read(primary, 4096)
    assert b"Enter a value:" in seen
    os.write(primary, b"\x04")  # Ctrl-D: end of input
    rest = b""
    while proc.poll() is None and time.monotonic() < deadline:
        ready, _, _ = select.select([primary], [], [], 0.5)
        if ready:
            try:
                rest += os.read(primary, 4096)
            except OSError:
                break
    code = proc.wait(30)
    os.close(primary)
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    assert code == 1, stderr
    assert b"Apply cancelled." in rest
    assert "internal error" not in stderr
