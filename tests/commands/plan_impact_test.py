"""plan --principals (blast radius), the <default> warning, and validate's lint, through the CLI."""

from __future__ import annotations

from tests.helpers import REPO, run_cli, write_manifest

PAY, PAY_STATE = REPO / "examples/payments", REPO / "examples/payments/snapshot.json"


def test_principals_file_shows_whose_effective_quota_changes(tmp_path):
    principals = tmp_path / "p.csv"
    principals.write_text("user,client-id\npayments-api,web\nsomeone,app\n")
    result = run_cli("plan", PAY, "--state", PAY_STATE, "--principals", principals)
    assert result.exit_code == 0, result.stderr
    tail = result.stdout.split("Plan: 2 to add, 2 to change, 1 to delete.\n", 1)[1]
    assert tail.startswith("\nBlast radius: 1 principals change effective quota (of 2 checked)") or \
        tail.startswith("\nBlast radius: 1 principal changes effective quota (of 2 checked)"), tail
    assert "  {user=payments-api, client-id=web}\n" in tail
    assert "~ request_percentage = 50 {user=<default>} -> 25 {user=payments-api}" in tail
    assert "someone" not in tail


def test_the_json_has_every_principal_the_text_points_to(tmp_path):
    """The text says "use --format json for every principal": the JSON on stdout has them (issue 41:
    it had none), a plan-v1 document; the saved plan file keeps the plan alone."""
    import json

    import jsonschema

    principals = tmp_path / "p.csv"
    principals.write_text("user,client-id\npayments-api,web\nsomeone,app\n")
    out = tmp_path / "plan.json"
    result = run_cli("plan", PAY, "--state", PAY_STATE, "--principals", principals, "--format", "json",
                     "--out", out)
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["impact"]["summary"] == {"checked": 2, "changed": 1, "lose_limit": 0, "gain_limit": 0}
    [who] = doc["impact"]["principals"]
    assert who["entity"] == {"user": "payments-api", "client-id": "web"}
    assert who["keys"]["request_percentage"] == {
        "before": {"value": 50.0, "source": {"user": None}},
        "after": {"value": 25.0, "source": {"user": "payments-api"}}}
    schema = json.loads((REPO / "schemas" / "plan-v1.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(doc)
    assert "impact" not in json.loads(out.read_text())


def test_a_bad_principals_file_is_located(tmp_path):
    principals = tmp_path / "p.jsonl"
    principals.write_text('{"user": "a", "client-id": "b"}\n{"user": 5}\n')
    result = run_cli("plan", PAY, "--state", PAY_STATE, "--principals", principals)
    assert result.exit_code == 1
    assert f"{principals}:2:" in result.stderr
    assert "Traceback" not in result.stderr


def test_changing_a_default_warns_without_a_principals_file(tmp_path):
    path = write_manifest(tmp_path / "q.yaml", "entities:\n  - user: <default>\n"
                          "    quotas: {producer_byte_rate: 1MiB}\n")
    result = run_cli("plan", path, "--sandbox")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.count("{user=<default>}") == 1
    assert "affects every principal without a more specific entry" in result.stderr
    assert not result.stderr.startswith("warning: warning:")


def test_validate_reports_shadowing_and_user_prefix_as_warnings(tmp_path):
    path = write_manifest(tmp_path / "q.yaml", "entities:\n  - user: <default>\n"
                          "    quotas: {producer_byte_rate: 1MiB}\n  - client-id: app\n"
                          "    quotas: {producer_byte_rate: 2MiB}\n  - user: 'User:alice'\n"
                          "    quotas: {consumer_byte_rate: 1KiB}\n")
    result = run_cli("validate", path)
    assert result.exit_code == 0
    assert f"{path}:7:14: warning[KQP170] producer_byte_rate of {{client-id=app}} never takes effect" \
        in result.stdout
    assert "warning[KQP172] user 'User:alice' will never match" in result.stdout
    assert result.stdout.endswith("Found 0 error(s) and 2 warning(s).\n")
    assert run_cli("validate", "--strict", path).exit_code == 1


def test_each_example_project_has_no_lint_warnings():
    # (validating examples/ as one state merges two unrelated projects, and lint rightly sees
    # payments' {user=<default>} shadow converged's {client-id=<default>})
    assert run_cli("validate", REPO / "examples/payments").stdout == "Valid: 6 entities in 2 file(s).\n"
    assert run_cli("validate", REPO / "examples/converged").stdout == "Valid: 5 entities in 1 file(s).\n"
