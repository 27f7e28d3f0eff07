"""``kqplan test``, ``kqplan import --drift`` and ``released:`` against a live cluster, the sandbox
and the real Apache Kafka brokers: the cluster as it is (one describe), before and after an apply,
after an edit behind kqplan's back, and an entity kqplan no longer manages."""

from __future__ import annotations

from kqplan.core.cluster import Alteration, Op
from kqplan.core.entity import Entity
from tests.helpers import kq, manifests, mine, run_cli

QUOTAS = """\
entities:
  - user: P-api
    quotas: {producer_byte_rate: 10MiB}
  - user: P-api
    client-id: batch
    quotas: {producer_byte_rate: 2MiB}
"""

TESTS = """\
apiVersion: kqplan/v1
kind: QuotaTests
tests:
  - name: the api keeps 10 MiB
    principal: {user: P-api, client-id: web}
    expect: {producer_byte_rate: 10MiB, consumer_byte_rate: unlimited}
    from: {user: P-api}
  - name: batch stays at or under 2 MiB
    principal: {user: P-api, client-id: batch}
    expect: {producer_byte_rate: {at-most: 2MiB}}
"""


def test_the_cluster_as_it_is(live, prefix, tmp_path):
    path = manifests(tmp_path, prefix, QUOTAS)
    (path.parent / "tests.yaml").write_text(TESTS.replace("P", prefix), encoding="utf-8")
    offline = run_cli("test", path.parent)
    assert offline.exit_code == 0, offline.stdout + offline.stderr
    before = kq(live, "test", path.parent)
    assert before.exit_code == 1
    assert before.stdout.count("FAILS") == 2  # unlimited is above every at-most
    assert "producer_byte_rate is unlimited (no quota at any level), expected 10 MiB" in before.stdout
    applied = kq(live, "apply", path.parent, "--auto-approve")
    assert applied.exit_code == 0, applied.stdout + applied.stderr
    after = kq(live, "test", path.parent)
    assert after.exit_code == 0, after.stdout
    assert "Tests: 2 hold, 0 fail (of 2), judged on cluster" in after.stdout
    edited = Entity.user(f"{prefix}-api")
    with live.cluster() as c:
        c.alter([Alteration(edited, (Op("producer_byte_rate", 5242880.0),))], validate_only=False)
    want = {edited: {"producer_byte_rate": 5242880.0},
            Entity.user_client(f"{prefix}-api", "batch"): {"producer_byte_rate": 2097152.0}}
    assert live.until(mine(prefix), want) == want
    drifted = kq(live, "test", path.parent)
    assert drifted.exit_code == 1
    assert (f"test 'the api keeps 10 MiB' fails for {{user={prefix}-api, client-id=web}}: producer_byte_rate "
            f"is 5 MiB from {{user={prefix}-api}}, expected 10 MiB") in drifted.stdout
    assert f"{{user={prefix}-api}} is declared at " in drifted.stdout


def test_import_drift_accepts_an_edit_made_on_the_cluster(live, prefix, tmp_path):
    path = manifests(tmp_path, prefix, QUOTAS.replace("10MiB}", "10MiB}  # agreed"))
    applied = kq(live, "apply", path.parent, "--auto-approve")
    assert applied.exit_code == 0, applied.stdout + applied.stderr
    api = Entity.user(f"{prefix}-api")
    batch = Entity.user_client(f"{prefix}-api", "batch")
    with live.cluster() as c:
        c.alter([Alteration(api, (Op("producer_byte_rate", 12582912.0), Op("request_percentage", 40.0))),
                 Alteration(batch, (Op("producer_byte_rate", None),))], validate_only=False)
    want = {api: {"producer_byte_rate": 12582912.0, "request_percentage": 40.0}}
    assert live.until(mine(prefix), want) == want
    before = path.read_text()
    done = kq(live, "import", path.parent, "--drift")
    assert done.exit_code == 0, done.stdout + done.stderr
    left = f"  {{user={prefix}-api, client-id=batch}} is in the manifests but not on the cluster"
    assert left in done.stdout
    after = path.read_text()
    assert [line for line in after.splitlines() if line not in before.splitlines()] == [
        "    quotas: {producer_byte_rate: 12MiB, request_percentage: 40} # agreed"]  # the drifted line only
    plan = kq(live, "plan", path.parent)
    assert "Plan: 1 to add, 0 to change, 0 to delete." in plan.stdout  # batch, which was left


RELEASING = """\
ownership:
  prune: true
  scope: [{user: "P-*"}]
released:
  - {user: P-legacy}
entities:
  - user: P-api
    quotas: {producer_byte_rate: 10MiB}
"""


def test_apply_leaves_a_released_entity_and_prunes_the_rest(live, prefix, tmp_path):
    legacy, gone = Entity.user(f"{prefix}-legacy"), Entity.user(f"{prefix}-gone")
    with live.cluster() as c:
        c.alter([Alteration(legacy, (Op("producer_byte_rate", 2048.0),)),
                 Alteration(gone, (Op("producer_byte_rate", 1024.0),))], validate_only=False)
    want = {legacy: {"producer_byte_rate": 2048.0}, gone: {"producer_byte_rate": 1024.0}}
    assert live.until(mine(prefix), want) == want
    path = manifests(tmp_path, prefix, RELEASING)
    plan = kq(live, "plan", path.parent, "--format", "json")  # the real broker is shared: others' too
    assert plan.exit_code == 0, plan.stdout + plan.stderr
    assert {c["entity"]["user"]: c["action"] for c in plan.json["changes"]} == {
        f"{prefix}-api": "create", f"{prefix}-gone": "delete"}
    assert {"user": f"{prefix}-legacy"} not in [u["entity"] for u in plan.json["unmanaged"]]
    applied = kq(live, "apply", path.parent, "--auto-approve")
    assert applied.exit_code == 0, applied.stdout + applied.stderr
    want = {legacy: {"producer_byte_rate": 2048.0},
            Entity.user(f"{prefix}-api"): {"producer_byte_rate": 10485760.0}}
    assert live.until(mine(prefix), want) == want
