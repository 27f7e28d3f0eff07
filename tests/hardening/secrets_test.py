"""A --command-config line that is not key=value may hold a secret: it is never echoed."""

from __future__ import annotations

import pytest

from tests.helpers import run_cli

SECRET = "S3cr3tValue-do-not-print"


@pytest.mark.parametrize("text", [
    f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.password=\n{SECRET}\n",  # value wrapped
    f"sasl.password\\={SECRET}\n",  # escaped '=': the whole line is a key
    "security.protocol=SASL_PLAINTEXT\n"
    "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
    f'required username="a"\n  password="{SECRET}";\n',  # a JAAS value split across lines
])
def test_a_malformed_line_is_located_but_never_shown(tmp_path, text):
    config = tmp_path / "client.properties"
    config.write_text(text)
    result = run_cli("describe", "--bootstrap-server", "127.0.0.1:9", "--command-config", config)
    assert result.exit_code == 1
    assert SECRET not in result.stdout + result.stderr
    assert f"{config}:" in result.stderr
    assert "is not a `key=value` setting (its text is not shown: it may hold a secret)" in result.stderr


def test_a_misspelt_setting_name_is_still_shown_with_a_suggestion(tmp_path):
    config = tmp_path / "client.properties"
    config.write_text("security.protocoll=SSL\n")
    result = run_cli("describe", "--bootstrap-server", "127.0.0.1:9", "--command-config", config)
    assert result.stderr == (f"Error: {config}:1: security.protocoll: unknown setting\n"
                             "  = help: did you mean security.protocol?\n")
