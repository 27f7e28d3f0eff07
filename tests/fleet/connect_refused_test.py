"""``--spark-remote sc://HOST:PORT`` with nothing listening (issue 32) printed nothing and hung past
2 minutes (pyspark retries a refused connection for minutes): the address is now tried once,
within a few seconds, and the error names it with how to start a Connect server. While Spark
starts or works, a CI log still gets its "still running" line."""

from __future__ import annotations

import re
import socket
import time

import pytest

from kqplan.core.errors import KqplanError
from kqplan.fleet.spark import connect_address, reachable, ticking
from tests.helpers import fleet_cli, run_kqplan


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_a_closed_port_fails_within_seconds_naming_the_address(fleet, closed_port):
    remote = f"sc://127.0.0.1:{closed_port}"
    started = time.monotonic()
    result = run_kqplan("--config", fleet / "kqplan.toml", "fleet", "plan", "--cluster", "east",
                        "--engine", "spark", "--spark-remote", remote, timeout=20)
    assert time.monotonic() - started < 20
    assert result.exit_code == 1, result.stdout + result.stderr
    assert (f"Error: cannot reach the Spark Connect server at 127.0.0.1:{closed_port} ({remote}): connection "
            "refused: nothing listens there\n") in result.stderr
    started_by = f"sbin/start-connect-server.sh --conf spark.connect.grpc.binding.port={closed_port}"
    assert started_by in result.stderr
    assert "Traceback" not in result.stderr


def test_the_step_is_named_in_a_ci_log_before_it_fails(fleet, closed_port, monkeypatch):
    monkeypatch.setattr("kqplan.commands.fleet.LOG_EVERY", 0.0)
    usage = fleet / "usage.csv"
    usage.write_text("cluster,user,client_id,producer_byte_rate\neast,a,x,3\n")
    result = fleet_cli(fleet, "impact", "--cluster", "east", "--usage", usage, "--out", fleet / "out",
                       "--engine", "spark", "--spark-remote", f"sc://127.0.0.1:{closed_port}")
    assert result.exit_code == 1
    lines = [re.sub(r" \(\d+ s elapsed\)$", "", line) for line in result.stderr.splitlines()]
    assert f"Starting Spark Connect sc://127.0.0.1:{closed_port}…" in lines
    assert lines[-2].startswith("Error: cannot reach the Spark Connect server at 127.0.0.1:")


@pytest.mark.parametrize(("remote", "address"), [
    ("sc://localhost", ("localhost", 15002)), ("sc://10.0.0.1:443/;use_ssl=true", ("10.0.0.1", 443)),
    ("sc://[::1]:15003", ("::1", 15003))])
def test_connect_urls_give_their_address(remote, address):
    assert connect_address(remote) == address


@pytest.mark.parametrize(("remote", "problem"), [
    ("http://host:15002", "not a Spark Connect URL"), ("sc://host:99999", "the port is not a number"),
    ("sc://:15002", "not a Spark Connect URL")])
def test_other_text_is_no_connect_url(remote, problem):
    with pytest.raises(KqplanError, match=problem):
        connect_address(remote)


def test_an_unknown_host_is_said_so():
    with pytest.raises(KqplanError, match=r"at no-such-host\.invalid:15002 .*: the host is unknown"):
        reachable("sc://no-such-host.invalid", timeout=5)


def test_a_listening_address_passes():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        reachable(f"sc://127.0.0.1:{server.getsockname()[1]}", timeout=5)


def test_ticking_repeats_the_step_while_the_block_runs():
    heard: list[str] = []
    with ticking(heard.append, lambda: "Starting Spark Connect sc://x:1", every=0.05):
        time.sleep(0.3)
    assert len(heard) >= 3
    assert set(heard) == {"Starting Spark Connect sc://x:1"}
    before = len(heard)
    time.sleep(0.15)
    assert len(heard) == before


def test_a_token_in_the_url_is_never_shown(closed_port, monkeypatch):
    remote = f"sc://127.0.0.1:{closed_port}/;use_ssl=false;token=s3cr3t"
    with pytest.raises(KqplanError) as err:
        reachable(remote, timeout=5)
    assert "s3cr3t" not in str(err.value)
    assert f"(sc://127.0.0.1:{closed_port}/;use_ssl=false;token=…)" in str(err.value)
    monkeypatch.setenv("SPARK_REMOTE", remote)
    from kqplan.fleet.spark import where

    assert where(None, None).shown == f"Spark Connect sc://127.0.0.1:{closed_port}/;use_ssl=false;token=… " \
        "(from SPARK_REMOTE)"
