"""``kqplan test`` through the command line: the issue's three tests, ``from``, budgets, layers and
expiry, every format, the refusals, ``--related`` for pre-commit, and what ``plan`` says of tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import run_cli

QUOTAS = """\
apiVersion: kqplan/v1
kind: ClientQuotas
entities:
  - user: alice
    quotas: {producer_byte_rate: 10MiB}
  - user: <default>
    client-id: app
    quotas: {producer_byte_rate: 1MiB}
  - user: <default>
    quotas: {producer_byte_rate: 5MiB}
  - user: carol
    client-id: bulk
    quotas: {producer_byte_rate: 60MiB}
"""

TESTS = """\
apiVersion: kqplan/v1
kind: QuotaTests
tests:
  - name: alice keeps her own 10 MiB
    principal: {user: alice, client-id: app}
    expect:
      producer_byte_rate: 10MiB
    from: {user: alice}
  - name: bob falls back to the app default
    principal: {user: bob, client-id: app}
    expect:
      producer_byte_rate: 1MiB
      consumer_byte_rate: unlimited
  - name: carol stays under 50 MiB
    principal: {user: carol}
    expect:
      producer_byte_rate: {at-most: 50MiB}
"""


def write(root: Path, **files: str) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def snapshot(path: Path, entities: list[tuple[dict[str, str | None], dict[str, float]]]) -> Path:
    path.write_text(json.dumps({"format_version": 1, "cluster_id": "prod", "entities": [
        {"entity": e, "quotas": q} for e, q in entities]}), encoding="utf-8")
    return path


def test_the_issues_example_offline(tmp_path, monkeypatch):
    write(tmp_path, **{"q.yaml": QUOTAS, "tests.yaml": TESTS})
    monkeypatch.chdir(tmp_path)
    result = run_cli("test", ".")
    assert result.exit_code == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "holds   alice keeps her own 10 MiB  (tests.yaml:4:5)"
    assert lines[1] == "holds   bob falls back to the app default  (tests.yaml:9:5)"
    assert lines[2] == "FAILS   carol stays under 50 MiB  (tests.yaml:14:5)"
    assert ("tests.yaml:14:5: error[KQP201] test 'carol stays under 50 MiB' fails for {user=carol} (any "
            "client-id): producer_byte_rate is 60 MiB from {user=carol, client-id=bulk} with client-id bulk, "
            "expected at most 50 MiB") in lines
    assert "  = note: {user=carol, client-id=bulk} is declared at q.yaml:11:5" in lines
    assert lines[-1] == "Tests: 2 hold, 1 fail (of 3), judged on the manifests' desired state."
    fixed = QUOTAS.replace("quotas: {producer_byte_rate: 60MiB}", "quotas: {producer_byte_rate: 50MiB}")
    write(tmp_path, **{"q.yaml": fixed})
    passing = run_cli("test", ".")
    assert passing.exit_code == 0, passing.stdout
    assert passing.stdout.splitlines()[-1].startswith("Tests: 3 hold, 0 fail (of 3)")


def test_from_names_the_entity_that_must_supply_the_value(tmp_path, monkeypatch):
    quotas = QUOTAS.replace("  - user: alice\n    quotas: {producer_byte_rate: 10MiB}\n",
                            "  - user: alice\n    client-id: app\n    quotas: {producer_byte_rate: 10MiB}\n")
    write(tmp_path, **{"q.yaml": quotas, "tests.yaml": TESTS})
    monkeypatch.chdir(tmp_path)
    result = run_cli("test", ".")
    assert result.exit_code == 1
    assert ("test 'alice keeps her own 10 MiB' fails for {user=alice, client-id=app}: producer_byte_rate "
            "comes from {user=alice, client-id=app} (10 MiB)") in result.stdout
    assert "expects from {user=alice}" in result.stdout


def test_an_empty_client_id_sees_only_the_user_levels(tmp_path, monkeypatch):
    """Kafka's rule for a client that sends no client-id: {user=<default>, client-id=app} never
    applies to it, {user=<default>} does."""
    tests = """\
apiVersion: kqplan/v1
kind: QuotaTests
tests:
  - name: no client-id
    principal: {user: bob, client-id: ""}
    expect: {producer_byte_rate: 5MiB}
    from: {user: <default>}
"""
    write(tmp_path, **{"q.yaml": QUOTAS, "t.yaml": tests})
    monkeypatch.chdir(tmp_path)
    assert run_cli("test", ".").exit_code == 0


def test_a_budget_cannot_be_judged_offline_and_is_judged_on_the_cluster(tmp_path, monkeypatch):
    quotas = QUOTAS.replace("quotas: {producer_byte_rate: 5MiB}",
                            "quotas: {producer_byte_rate: {per-cluster: 30MiB}}")
    tests = """\
apiVersion: kqplan/v1
kind: QuotaTests
tests:
  - name: dave gets the default
    principal: {user: dave}
    expect: {producer_byte_rate: {at-least: 1MiB}}
"""
    write(tmp_path, **{"q.yaml": quotas, "t.yaml": tests})
    monkeypatch.chdir(tmp_path)
    offline = run_cli("test", ".")
    assert offline.exit_code == 1
    assert "unknown dave gets the default" in offline.stdout
    assert ("error[KQP202] test 'dave gets the default' cannot be judged without the cluster's broker count: "
            "producer_byte_rate is {user=<default>}'s per-cluster budget") in offline.stdout
    assert "1 cannot be judged offline" in offline.stdout
    cluster = snapshot(tmp_path / "s.json", [({"user": None}, {"producer_byte_rate": 10485760.0})])
    online = run_cli("test", ".", "--state", cluster)
    assert online.exit_code == 0, online.stdout
    assert online.stdout.splitlines()[-1] == "Tests: 1 hold, 0 fail (of 1), judged on cluster prod."


def test_layers_overrides_and_expiry_are_the_plans(tmp_path, monkeypatch):
    overlay = """\
apiVersion: kqplan/v1
kind: ClientQuotas
entities:
  - user: alice
    override: true
    expires: 2026-06-01
    quotas: {producer_byte_rate: 20MiB}
"""
    tests = TESTS.replace("producer_byte_rate: 10MiB\n    from", "producer_byte_rate: 20MiB\n    from")
    write(tmp_path, **{"base/q.yaml": QUOTAS, "base/t.yaml": tests, "prod/q.yaml": overlay})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KQPLAN_NOW", "2026-05-01T00:00:00Z")
    before = run_cli("test", "base", "prod")
    assert "holds   alice keeps her own 10 MiB" in before.stdout  # the override's 20 MiB
    monkeypatch.setenv("KQPLAN_NOW", "2026-07-01T00:00:00Z")
    after = run_cli("test", "base", "prod")
    assert "FAILS   alice keeps her own 10 MiB" in after.stdout  # expired: back to the base's 10 MiB
    assert "producer_byte_rate is 10 MiB from {user=alice}" in after.stdout
    assert "{user=alice} is declared at base/q.yaml:4:5" in after.stdout


def test_json_and_github_forms(tmp_path, monkeypatch):
    write(tmp_path, **{"q.yaml": QUOTAS, "tests.yaml": TESTS})
    monkeypatch.chdir(tmp_path)
    result = run_cli("test", ".", "--format", "json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["summary"] == {"tests": 3, "hold": 2, "fail": 1, "unknown": 0}
    carol = report["tests"][2]
    assert carol["name"] == "carol stays under 50 MiB"
    assert carol["filename"] == "tests.yaml"
    assert carol["location"] == {"row": 14, "column": 5}
    assert carol["code"] == "KQP201"
    assert carol["misses"] == [{"key": "producer_byte_rate", "why": "value",
                                "expected": {"bound": "at-most", "value": 52428800.0},
                                "value": 62914560.0, "source": {"user": "carol", "client-id": "bulk"},
                                "client_id": "bulk", "connection": "client-id bulk"}]
    github = run_cli("test", ".", "--format", "github")
    assert github.exit_code == 1
    first = github.stdout.splitlines()[0]
    assert first.startswith("::error title=kqplan KQP201,file=tests.yaml,line=14,col=5::test 'carol stays")
    assert github.stdout.splitlines()[-1] == (
        "::error title=kqplan test::Tests: 2 hold, 1 fail (of 3), judged on the manifests' desired state.")


def test_refusals_are_clear(tmp_path, monkeypatch):
    write(tmp_path, **{"q.yaml": QUOTAS})
    monkeypatch.chdir(tmp_path)
    none = run_cli("test", ".")
    assert none.exit_code == 1
    assert "no quota tests in the manifests given" in none.stderr
    write(tmp_path, **{"tests.yaml": TESTS})
    cluster = snapshot(tmp_path / "s.json", [])
    both = run_cli("test", ".", "--offline", "--state", cluster)
    assert both.exit_code == 1
    assert "--offline judges the manifests; it cannot be combined with --state" in both.stderr
    broken = QUOTAS.replace("producer_byte_rate: 1MiB", "producer_byte_rat: 1MiB")
    write(tmp_path, **{"q.yaml": broken})
    invalid = run_cli("test", ".")
    assert invalid.exit_code == 1
    assert "q.yaml:8:14: error[KQP110] unknown quota key 'producer_byte_rat'" in invalid.stderr
    assert "Traceback" not in invalid.stderr + invalid.stdout


def test_related_judges_the_tests_beside_a_changed_file(tmp_path, monkeypatch):
    write(tmp_path, **{"team/q.yaml": QUOTAS, "team/tests.yaml": TESTS, "other/q.yaml": QUOTAS,
                       "ci.yaml": "on: push\n"})
    monkeypatch.chdir(tmp_path)
    changed = run_cli("test", "--related", "--offline", "team/q.yaml", "ci.yaml")
    assert changed.exit_code == 1
    assert "FAILS   carol stays under 50 MiB  (team/tests.yaml:14:5)" in changed.stdout
    elsewhere = run_cli("test", "--related", "--offline", "other/q.yaml", "ci.yaml")
    assert elsewhere.exit_code == 0
    assert "No quota tests beside the changed files." in elsewhere.stderr


def test_plan_says_which_tests_start_or_stop_holding(tmp_path, monkeypatch):
    write(tmp_path, **{"q.yaml": QUOTAS, "tests.yaml": TESTS})
    monkeypatch.chdir(tmp_path)
    cluster = snapshot(tmp_path / "s.json", [
        ({"user": "alice"}, {"producer_byte_rate": 10485760.0}),
        ({"user": None}, {"producer_byte_rate": 5242880.0}),
        ({"user": "carol", "client-id": "bulk"}, {"producer_byte_rate": 10485760.0})])
    plan = run_cli("plan", ".", "--state", cluster)
    assert plan.exit_code == 0, plan.stderr  # a plan reports tests, never refuses on them
    out = plan.stdout
    assert "quota test 'alice keeps her own 10 MiB' (tests.yaml:4:5)" not in out  # holds before and after
    assert "quota test 'bob falls back to the app default' (tests.yaml:9:5) would start holding." in out
    assert ("quota test 'carol stays under 50 MiB' (tests.yaml:14:5) would stop holding: "
            "producer_byte_rate is 60 MiB from {user=carol, client-id=bulk} with client-id bulk, "
            "expected at most 50 MiB.") in out
    assert "Quota tests after this plan: 2 hold, 1 fail (of 3)." in out
    data = json.loads(run_cli("plan", ".", "--state", cluster, "--format", "json").stdout)
    assert any("would stop holding" in note for note in data["notes"])


@pytest.mark.parametrize(("body", "message"), [
    ("  - name: a\n    principal: {user: <default>}\n    expect: {producer_byte_rate: 1}\n",
     "t.yaml:5:16: error[KQP200] a connection has real names, not <default>"),
    ("  - name: a\n    principal: {client-id: app}\n    expect: {producer_byte_rate: 1}\n",
     "t.yaml:5:16: error[KQP200] a connection needs a user"),
    ("  - name: a\n    principal: {user: a}\n    expect: {producer_rate: 1}\n",
     "t.yaml:6:14: error[KQP110] unknown quota key 'producer_rate'\n"
     "  = help: did you mean 'producer_byte_rate'?"),
    ("  - name: a\n    principal: {ip: 10.0.0.1}\n    expect: {producer_byte_rate: 1}\n",
     "t.yaml:6:14: error[KQP111] producer_byte_rate does not apply to ip connections"),
    ("  - name: a\n    principal: {user: a}\n    expect: {producer_byte_rate: {at-mots: 1}}\n",
     "t.yaml:6:35: error[KQP020] unknown field 'at-mots' in producer_byte_rate's bounds\n"
     "  = help: did you mean 'at-most'?"),
    ("  - name: a\n    principal: {user: a}\n    expect: {producer_byte_rate: {at-most: unlimited}}\n",
     "error[KQP200] producer_byte_rate: at-most takes a value, not unlimited"),
    ("  - name: a\n    principal: {user: a}\n    expect: {producer_byte_rate: 10 MB/s}\n",
     "t.yaml:6:34: error[KQP116]"),
    ("  - name: a\n    principal: {user: a}\n    expect: {producer_byte_rate: [1]}\n",
     "error[KQP021] producer_byte_rate: expected a number, a byte size like 10MiB, unlimited, or bounds, "
     "got a list"),
    ("  - name: a\n    principal: {user: a}\n    expect: {producer_byte_rate: 1}\n    from: {user: b}\n",
     "t.yaml:7:11: error[KQP200] `from` {user=b} never applies to {user=a} (any client-id)"),
    ("  - name: a\n    principle: {user: a}\n    expect: {}\n",
     "t.yaml:5:5: error[KQP020] unknown field 'principle' in tests[0]\n  = help: did you mean 'principal'?"),
    ("  - name: a\n    principal: {user: a}\n    expect: {producer_byte_rate: 1}\n"
     "  - name: a\n    principal: {user: b}\n    expect: {producer_byte_rate: 1}\n",
     "t.yaml:7:11: error[KQP200] a test named 'a' already exists\n  = note: first named at t.yaml:4:5"),
])
def test_validate_locates_every_problem_of_a_test(tmp_path, monkeypatch, body, message):
    head = "apiVersion: kqplan/v1\nkind: QuotaTests\ntests:\n"
    write(tmp_path, **{"q.yaml": QUOTAS, "t.yaml": head + body})
    monkeypatch.chdir(tmp_path)
    result = run_cli("validate", ".")
    assert result.exit_code == 1
    assert message in result.stdout, result.stdout
    assert "Traceback" not in result.stdout + result.stderr


def test_a_cluster_value_kafka_refuses_fails_as_a_value_not_as_a_budget():
    """A ZooKeeper cluster may store NaN: with a target it is the value Kafka holds, never mistaken
    for an offline budget's share."""
    import math

    import yaml

    from kqplan.core.entity import Entity
    from kqplan.core.intent import Why, judge
    from kqplan.manifest.intent import read_tests
    from kqplan.manifest.source import SourceFile

    text = TESTS.split("  - name: bob", maxsplit=1)[0]
    tests, problems = read_tests(SourceFile.of("t.yaml", text), yaml.safe_load(text))
    assert not problems
    [verdict] = judge(tests, {Entity.user("alice"): {"producer_byte_rate": math.nan}})
    assert [m.why for m in verdict.misses] == [Why.VALUE]
    [offline] = judge(tests, {}, {Entity.user("alice"): {"producer_byte_rate": 20971520.0}})
    assert [m.why for m in offline.misses] == [Why.BUDGET]
    assert offline.unknown


def test_a_target_must_be_the_cluster_the_manifests_are_guarded_to(tmp_path, monkeypatch):
    guarded = QUOTAS.replace("kind: ClientQuotas\n", "kind: ClientQuotas\ncluster: west\n")
    inventory = '[clusters.west]\nsnapshot = "west.json"\nid = "west-id"\nmanifests = ["m"]\n'
    write(tmp_path, **{"m/q.yaml": guarded, "m/tests.yaml": TESTS, "kqplan.toml": inventory})
    monkeypatch.chdir(tmp_path)
    snapshot(tmp_path / "east.json", []).write_text(
        (tmp_path / "east.json").read_text().replace('"prod"', '"east-id"'), encoding="utf-8")
    wrong = run_cli("test", "m", "--state", "east.json")
    assert wrong.exit_code == 1
    assert "wrong cluster: the manifests are guarded to 'west' (id west-id)" in wrong.stderr
    snapshot(tmp_path / "west.json", []).write_text(
        (tmp_path / "west.json").read_text().replace('"prod"', '"west-id"'), encoding="utf-8")
    named = run_cli("test", "--cluster", "west")
    assert named.stdout.splitlines()[-1] == "Tests: 0 hold, 3 fail (of 3), judged on cluster west (west-id)."
