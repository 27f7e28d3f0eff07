"""A saved plan cannot lie: apply --plan verifies it before anything is sent (sandbox, TCP)."""

from __future__ import annotations

import json

import pytest

from kqplan.core.entity import Entity
from kqplan.sandbox import Sandbox, SandboxConfig
from tests.helpers import run_cli, write_manifest

SEED = {Entity.user("victim"): {"producer_byte_rate": 1024.0}, Entity.user("b"): {"producer_byte_rate": 1.0}}


@pytest.fixture
def saved(tmp_path):
    with Sandbox.start(SandboxConfig(seed=SEED, cluster_id="c")) as box:
        write_manifest(tmp_path / "q.yaml", "entities:\n  - user: new\n    quotas: {producer_byte_rate: 1}\n"
                       "  - user: b\n    quotas: {producer_byte_rate: 2}\n")
        plan = tmp_path / "plan.json"
        assert run_cli("plan", tmp_path / "q.yaml", "--bootstrap-server", box.bootstrap, "--out", plan
                       ).exit_code == 0
        yield box, plan


def apply(box, plan):
    return run_cli("apply", "--plan", plan, "--bootstrap-server", box.bootstrap, "--auto-approve")


def edit(plan, change):
    doc = json.loads(plan.read_text())
    change(doc)
    plan.write_text(json.dumps(doc))


def test_an_untouched_plan_applies(saved):
    box, plan = saved
    assert apply(box, plan).exit_code == 0
    assert box.state[Entity.user("new")] == {"producer_byte_rate": 1.0}


@pytest.mark.parametrize(("tamper", "message"), [
    # a "+ {user=victim}" whose ops delete it
    (lambda d: d["changes"][1].update(entity={"user": "victim"}, display="{user=victim}",
                                      ops=[{"key": "producer_byte_rate", "value": None, "remove": True}]),
     "its ops are not the change from before to after"),
    (lambda d: d["changes"][0].update(action="delete"), "action delete does not match its before/after"),
    (lambda d: d["changes"][0]["after"].update(producer_byte_rate=9.0), "its ops are not the change"),
    (lambda d: d["changes"].append(d["changes"][0]), "appears twice in the plan"),
    (lambda d: d["changes"][1].update(after={"producer_byte_rate": float("nan")},
                                      ops=[{"key": "producer_byte_rate", "value": float("nan"),
                                            "remove": False}]),
     "producer_byte_rate=nan is not a valid quota"),
])
def test_a_tampered_plan_is_refused_and_nothing_is_sent(saved, tamper, message):
    box, plan = saved
    edit(plan, tamper)
    edit(plan, lambda d: d.pop("digest"))  # even without the digest, consistency is checked
    result = apply(box, plan)
    assert result.exit_code == 1
    assert message in result.stderr
    assert box.state == SEED


def test_a_hand_edit_is_detected_by_the_digest(saved):
    box, plan = saved
    edit(plan, lambda d: d["notes"].append("looks fine to me"))
    result = apply(box, plan)
    assert result.exit_code == 1
    assert "the plan was edited after it was made (its digest does not match)" in result.stderr


def redigest(doc):
    """What a forger who knows the digest's recipe does: the digest of the edited body."""
    from kqplan.planfile.codec import digest

    doc["digest"] = digest({k: v for k, v in doc.items() if k != "digest"})


def test_a_plan_without_its_digest_is_refused_as_edited(saved):
    """The issue's forgery: a quota edited (+ {user=new} 1 B/s → 7 B/s), its op edited to match, the
    digest deleted — a plan consistent in itself that nobody reviewed."""
    box, plan = saved

    def forge(d):
        change = next(c for c in d["changes"] if c["display"] == "{user=new}")
        change["after"]["producer_byte_rate"] = 7.0
        change["ops"] = [{"key": "producer_byte_rate", "value": 7.0, "remove": False}]
        d.pop("digest")
    edit(plan, forge)
    for command in (("apply", "--plan", plan, "--bootstrap-server", box.bootstrap, "--auto-approve"),
                    ("show", plan)):
        result = run_cli(*command)
        assert result.exit_code == 1, result.stdout + result.stderr
        assert "the plan was edited after it was made (it has no digest" in result.stderr
    assert box.state == SEED


@pytest.mark.parametrize("value", [None, "", "sha256:", "sha256:" + "0" * 64])
def test_a_null_or_made_up_digest_is_refused(saved, value):
    box, plan = saved
    edit(plan, lambda d: d.update(digest=value))
    result = apply(box, plan)
    assert result.exit_code == 1
    assert "the plan was edited after it was made" in result.stderr
    assert box.state == SEED


def test_a_plan_without_a_cluster_id_is_not_applied(saved):
    box, plan = saved
    edit(plan, lambda d: d["cluster"].update(id=None))
    edit(plan, redigest)
    result = apply(box, plan)
    assert result.exit_code == 1
    assert "the plan records no cluster id" in result.stderr
    assert box.state == SEED
