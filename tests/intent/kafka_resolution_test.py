"""``kqplan test`` judges as Kafka resolves: on hundreds of random quota states, each test's verdict
is the one Kafka's own ClientQuotaManager gives (tests/fleet/QuotaBuckets.java drives it), for
named client-ids, a client that sends none, and a principal without a client-id, which must hold
for every client-id, here also one that no entity names."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
import yaml

from kqplan.core.entity import Entity
from kqplan.core.intent import judge
from kqplan.manifest.intent import read_tests
from kqplan.manifest.source import SourceFile
from tests.helpers import run_cli
from tests.kafka.oracle import CLIENTS, KEY, USERS, ask, compile_oracle, random_state

pytestmark = pytest.mark.slow

OTHER = "zz-other"  # a client-id no entity names
BOUNDS = [10, 20, 30, 40, 50]


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    return compile_oracle(tmp_path_factory.mktemp("oracle"))


PROBES = [(u, c) for u in USERS for c in ["", *CLIENTS, OTHER]]


def _limit(answer: list[str]) -> float:
    return math.inf if answer[4] == "unlimited" else float(answer[4])


def expected_verdicts(answers: list[list[str]]) -> tuple[list[dict[str, object]], dict[str, bool]]:
    """Tests of every connection with Kafka's limit (and one off it), and of every principal
    without a client-id against each bound: each with the verdict Kafka's answers give."""
    tests: list[dict[str, object]] = []
    want: dict[str, bool] = {}
    limits: dict[str, list[float]] = {}
    for answer in answers:
        user, client, limit = answer[0], answer[1], _limit(answer)
        limits.setdefault(user, []).append(limit)
        shown = "unlimited" if limit == math.inf else int(limit)
        off = 1 if limit == math.inf else int(limit) + 1
        for name, value, holds in ((f"{user}/{client} exact", shown, True),
                                   (f"{user}/{client} off", off, False)):
            tests.append({"name": name, "principal": {"user": user, "client-id": client},
                          "expect": {KEY: value}})
            want[name] = holds
    for user, seen in limits.items():
        for bound in BOUNDS:
            for word, holds in (("at-most", all(v <= bound for v in seen)),
                                ("at-least", all(v >= bound for v in seen))):
                name = f"{user} {word} {bound}"
                tests.append({"name": name, "principal": {"user": user}, "expect": {KEY: {word: bound}}})
                want[name] = holds
    return tests, want


def document(tests: list[dict[str, object]]) -> dict[str, object]:
    return {"apiVersion": "kqplan/v1", "kind": "QuotaTests", "tests": tests}


def text_of(doc: dict[str, object]) -> str:
    return json.dumps(doc, indent=1)  # YAML too, and written and read much faster than PyYAML's


def test_every_verdict_is_the_one_kafkas_client_quota_manager_gives(oracle):
    rng = random.Random(44)
    states = [random_state(rng) for _ in range(300)]
    answered = ask(oracle, [(state, PROBES) for state in states])
    held = failed = 0
    for state, answers in zip(states, answered, strict=True):
        tests, want = expected_verdicts(answers)
        doc = document(tests)
        read, problems = read_tests(SourceFile.of("t.yaml", text_of(doc)), doc)
        assert not problems, problems
        got = {v.test.name: v.holds for v in judge(read, state)}
        assert got == want, (state, {k: (got[k], want[k]) for k in got if got[k] != want[k]})
        held += sum(want.values())
        failed += len(want) - sum(want.values())
    assert held > 3000  # both verdicts, many times over
    assert failed > 3000


def _manifest(state: dict[Entity, dict[str, float]]) -> str:
    entities = []
    for entity, quotas in state.items():
        entry: dict[str, object] = {t: "<default>" if n is None else n for t, n in entity.parts}
        entry["quotas"] = {KEY: int(quotas[KEY])}
        entities.append(entry)
    return yaml.safe_dump({"apiVersion": "kqplan/v1", "kind": "ClientQuotas", "entities": entities},
                          sort_keys=False)


def test_the_command_gives_kafkas_verdicts_and_exits_1_on_any_failure(oracle, tmp_path: Path):
    rng = random.Random(4401)
    states = [random_state(rng) for _ in range(12)]
    answered = ask(oracle, [(state, PROBES) for state in states])
    for i, (state, answers) in enumerate(zip(states, answered, strict=True)):
        tests, want = expected_verdicts(answers)
        home = tmp_path / str(i)
        home.mkdir()
        (home / "q.yaml").write_text(_manifest(state))
        (home / "t.yaml").write_text(text_of(document(tests)))
        result = run_cli("test", home, "--format", "json")
        assert result.exit_code == 1, result.stderr  # every state has its "off" tests
        report = json.loads(result.stdout)
        assert {t["name"]: t["result"] == "holds" for t in report["tests"]} == want
        only_holding = [t for t in tests if want[str(t["name"])]]
        (home / "t.yaml").write_text(text_of(document(only_holding)))
        again = run_cli("test", home)
        assert again.exit_code == 0, again.stdout + again.stderr
        assert f"Tests: {len(only_holding)} hold, 0 fail" in again.stdout
