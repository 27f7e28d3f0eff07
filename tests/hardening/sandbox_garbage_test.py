"""A malformed request makes the sandbox hang up on that connection, with one line, no traceback."""

from __future__ import annotations

import socket
import struct
import subprocess
import sys


def test_garbage_closes_the_connection_and_the_sandbox_keeps_serving():
    proc = subprocess.Popen([sys.executable, "-m", "kqplan", "sandbox", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        port = int(line.rsplit(":", 1)[1])
        # DescribeClientQuotas v1 with a header, then a body that is not one
        body = struct.pack(">hhih", 48, 1, 7, 1) + b"x" + b"\x00" + b"\xff" * 11
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            conn.sendall(struct.pack(">i", len(body)) + body)
            assert conn.recv(100) == b""  # hung up
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            probe = struct.pack(">hhih", 18, 0, 8, 0)
            conn.sendall(struct.pack(">i", len(probe)) + probe)
            assert len(conn.recv(4)) == 4  # the next connection is still served
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert "Traceback" not in err
    assert "malformed request" in err
