"""kqplan.toml's values with bounds (issue 29): a ``[policy.keys.K]`` bound that is not a finite
number ≥ 0 (TOML's ``nan`` and ``inf`` literals, a negative number, a size that does not parse)
would turn the rule off, so it is a located KQP190 error on both reader paths; ``[limits]
max-input-mib`` is read like ``max-file-mib``; and the file itself is read through the bounded
reader (a FIFO or a device as ``--config`` is a clean error, not a hang)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kqplan.config.find import load_config
from kqplan.core.diagnostics import DiagnosticsError
from kqplan.core.errors import KqplanError
from tests.helpers import run_cli

SCHEMA_ONLY = '\n[clusters.a]\nbootstrap_server = "k:9092"\n'
"""A spelling only the pydantic schema takes (the hand check sends the whole file there)."""


def validate(tmp_path: Path, text: str):
    (tmp_path / "kqplan.toml").write_text(text, encoding="utf-8")
    return run_cli("--config", tmp_path / "kqplan.toml", "validate", tmp_path)


@pytest.mark.parametrize("path", ["plain", "schema"])
@pytest.mark.parametrize(("key", "which", "literal", "shown"), [
    ("producer_byte_rate", "min", "nan", "nan"), ("producer_byte_rate", "max", "inf", "inf"),
    ("consumer_byte_rate", "max", "-inf", "-inf"), ("request_percentage", "min", "-1", "-1"),
    ("request_percentage", "max", "-0.5", "-0.5"), ("request_percentage", "max", "+nan", "nan"),
    ("producer_byte_rate", "max", "1e400", "inf"), ("producer_byte_rate", "min", "1" + "0" * 400, "1000"),
    ("producer_byte_rate", "min", '"1' + "0" * 400 + 'TiB"', "1000"),
])
def test_a_bound_that_would_turn_the_rule_off_is_a_located_error(tmp_path, path, key, which, literal, shown):
    text = f"[policy.keys.{key}]\n# the bound\n  {which} = {literal}\n"
    text += SCHEMA_ONLY if path == "schema" else ""
    result = validate(tmp_path, text)
    assert result.exit_code == 1
    first = result.stderr.splitlines()[0]
    # kqplan.toml shown from the root, its own directory (issue 43)
    assert first.startswith(f"kqplan.toml:3:3: error[KQP190] policy.keys.{key}.{which}: {shown}"), first
    assert first.endswith("is not allowed: a bound must be a finite number ≥ 0")
    allowed = ("a number of bytes per second ≥ 0, or a size such as \"10MiB\"" if key.endswith("byte_rate")
               else "a number ≥ 0")
    assert result.stderr.splitlines()[1] == f"  = help: write {allowed}"
    assert "Traceback" not in result.stderr
    assert "internal error" not in result.stderr


@pytest.mark.parametrize("path", ["plain", "schema"])
def test_a_unit_that_does_not_parse_is_located(tmp_path, path):
    result = validate(tmp_path, '[policy.keys.producer_byte_rate]\nmin = "10 furlongs"\nmax = "-1KiB"\n'
                      + (SCHEMA_ONLY if path == "schema" else ""))
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert lines[0].endswith(":2:1: error[KQP190] policy.keys.producer_byte_rate.min: unknown byte unit "
                             "'furlongs' in '10 furlongs'")
    assert lines[2].endswith(":3:1: error[KQP190] policy.keys.producer_byte_rate.max: '-1KiB' is not a "
                             "number with a byte unit")


def test_valid_bounds_are_kept(tmp_path):
    (tmp_path / "kqplan.toml").write_text('[policy.keys.producer_byte_rate]\nmin = 0\nmax = "1GiB"\n'
                                          '[policy.keys.request_percentage]\nmax = 200.5\n', encoding="utf-8")
    bounds = {b.key: (b.min, b.max) for b in load_config(tmp_path / "kqplan.toml").policy.key_bounds}
    assert bounds == {"producer_byte_rate": (0.0, 1024.0**3), "request_percentage": (None, 200.5)}


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.floats(), st.integers(-(10**30), 10**400)))
def test_every_numeric_bound_is_finite_and_not_negative_or_refused(value):
    import math
    import tempfile

    literal = repr(value) if isinstance(value, int) else {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(
        repr(value), repr(value))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "kqplan.toml")
        path.write_text(f"[policy.keys.request_percentage]\nmax = {literal}\n", encoding="utf-8")
        try:
            [bound] = load_config(path).policy.key_bounds
        except DiagnosticsError as exc:
            refused = exc.diagnostics
        else:
            assert bound.max is not None
            assert math.isfinite(bound.max)
            assert bound.max >= 0
            return
    [diag] = refused
    assert (diag.span.line, diag.span.column) == (2, 1)
    try:
        allowed = math.isfinite(float(value)) and value >= 0
    except OverflowError:  # an integer beyond any double
        allowed = False
    assert not allowed, value


# -- [limits] max-input-mib ----------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["plain", "schema"])
def test_max_input_mib_is_read_on_both_paths(tmp_path, path):
    config = tmp_path / "kqplan.toml"
    config.write_text("[limits]\nmax-input-mib = 3\n" + (SCHEMA_ONLY if path == "schema" else ""),
                      encoding="utf-8")
    assert load_config(config).max_input_bytes == 3 * 1024 * 1024
    config.write_text(SCHEMA_ONLY if path == "schema" else "", encoding="utf-8")
    assert load_config(config).max_input_bytes == 512 * 1024 * 1024


@pytest.mark.parametrize("value", ["0", "-1", "1.5", '"512"', "true", "nan"])
def test_max_input_mib_must_be_a_positive_integer(tmp_path, value):
    result = validate(tmp_path, f"[limits]\nmax-file-mib = 64\nmax-input-mib = {value}\n")
    assert result.exit_code == 1
    assert result.stderr.startswith("kqplan.toml:3:1: error[KQP190] limits.max-input-mib: ")


def test_an_unknown_limit_names_both(tmp_path):
    result = validate(tmp_path, "[limits]\nmax-inpt-mib = 3\n")
    assert "unknown key 'max-inpt-mib' in [limits]" in result.stderr
    assert "did you mean 'max-input-mib'?" in result.stderr


# -- kqplan.toml itself through the bounded reader -------------------------------------------------

def bounded_kqplan(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """kqplan in a process of its own with 4 GiB of address space: code that reads /dev/zero to
    its end fails there with a MemoryError, rather than taking the machine's memory."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    return subprocess.run([sys.executable, "-m", "kqplan", *map(str, args)], capture_output=True, text=True,
                          timeout=60, preexec_fn=limit, check=False)


def test_a_fifo_as_config_is_an_error_not_a_hang(tmp_path):
    fifo = tmp_path / "kqplan.toml"
    os.mkfifo(fifo)
    result = bounded_kqplan("--config", fifo, "validate", tmp_path)  # before: blocked in open() for ever
    assert result.returncode == 1
    assert result.stderr.startswith(f"Error: cannot read config file {fifo}: it is a FIFO, not a regular "
                                    "file")


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_a_device_as_config_is_an_error(device):
    result = bounded_kqplan("--config", device, "validate", ".")
    assert result.returncode == 1
    assert result.stderr.startswith(f"Error: cannot read config file {device}: it is a device, not a "
                                    "regular file")


def test_a_directory_as_config_is_an_error(tmp_path):
    with pytest.raises(KqplanError, match=r"^cannot read config file .*: it is a directory, not a regular"):
        load_config(tmp_path)


def test_a_config_that_is_not_utf8_names_the_line(tmp_path):
    (tmp_path / "kqplan.toml").write_bytes(b"[policy]\nmax-delete = 3 # caf\xe9\n")
    result = run_cli("--config", tmp_path / "kqplan.toml", "validate", tmp_path)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: cannot read config file {tmp_path / 'kqplan.toml'}: line 2 is "
                                    "not valid UTF-8")
