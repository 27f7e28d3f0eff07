"""Inputs that used to end in "internal error" or a misleading message now get a real one."""

from __future__ import annotations

import pytest

from tests.helpers import run_cli, write_manifest


def test_an_integer_of_5000_digits_is_too_large_not_an_internal_error(tmp_path):
    path = write_manifest(tmp_path / "q.yaml", "entities:\n  - user: a\n    quotas: {producer_byte_rate: "
                          + "9" * 5000 + "}\n")
    result = run_cli("validate", path)
    assert result.exit_code == 1
    assert (f"{path}:5:34: error[KQP114] producer_byte_rate: Proposed value for producer_byte_rate is too "
            "large for a LONG.") in result.stdout
    assert "internal error" not in result.stdout + result.stderr


@pytest.mark.parametrize("setting", ["ssl.endpoint.identification.algorithm=", "ssl.truststore.type=PEM",
                                     "ssl.key.password=x", "enable.ssl.certificate.verification=false"])
def test_tls_settings_without_a_tls_protocol_are_refused_not_ignored(tmp_path, setting):
    config = tmp_path / "client.properties"
    config.write_text(setting + "\n")
    result = run_cli("describe", "--bootstrap-server", "127.0.0.1:9", "--command-config", config)
    assert result.exit_code == 1
    assert f"{config}:1: {setting.split('=')[0]}: is set but security.protocol is PLAINTEXT" in result.stderr
    assert "set security.protocol=SSL (or SASL_SSL)" in result.stderr


def test_sandbox_flags_are_checked_before_listening(tmp_path):
    port = run_cli("sandbox", "--port", "99999")
    assert port.exit_code == 1
    assert "Invalid value for '--port'" in port.stderr
    cert = run_cli("sandbox", "--port", "0", "--tls-cert", tmp_path / "nope.pem", "--tls-key", tmp_path / "k")
    assert cert.exit_code == 1
    assert f"--tls-cert {tmp_path / 'nope.pem'}: no such file" in cert.stderr


def test_command_config_from_dev_zero_is_refused_quickly():
    result = run_cli("describe", "--bootstrap-server", "127.0.0.1:9", "--command-config", "/dev/zero")
    assert result.exit_code == 1
    assert "cannot read command config /dev/zero: it is a device, not a regular file" in result.stderr


@pytest.mark.parametrize(("body", "where", "message"), [
    ("entities:\n  - user: a\n    quotas:\n      1: 1024\n", ":6:7:",
     "entities[0].quotas: a quota key must be a name, got a number 1"),
    ("profiles:\n  p:\n    2: 1024\nentities:\n  - user: a\n    profile: p\n", ":5:5:",
     "profiles.p: a quota key must be a name, got a number 2"),
])
def test_a_number_as_a_quota_key_is_named_as_the_key(tmp_path, body, where, message):
    # it used to read "quota value must be a number (…), got a number": the value was fine
    # (write_manifest adds two header lines: the key is on line 6 / 5, column 7 / 5)
    result = run_cli("validate", write_manifest(tmp_path / "q.yaml", body))
    assert result.exit_code == 1
    first = (result.stdout + result.stderr).splitlines()[0]
    assert where in first
    assert first.endswith(message)
    assert "got a number" not in first.split(message)[0]
