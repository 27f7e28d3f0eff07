"""Version- and mode-aware rules: what a ZooKeeper-mode or pre-2.7 cluster would refuse or store
differently is refused before anything is sent (declared in the inventory, or detected)."""

from __future__ import annotations

import pytest

from kqplan.core.entity import Entity
from kqplan.core.versions import ClusterProfile, entity_problem, problems, value_problem
from tests.helpers import run_cli, shown, write_manifest

ZK_39 = ClusterProfile.of("3.9", "zookeeper")
KRAFT = ClusterProfile.of(">=4.3", "kraft")
OLD = ClusterProfile.of("2.6", "zookeeper")


@pytest.mark.parametrize(("key", "value", "profile", "refused"), [
    ("producer_byte_rate", 1235.0000001, ZK_39, True),   # ZK truncates to 1235: never converges
    ("producer_byte_rate", 1235.0000001, KRAFT, False),  # KRaft keeps it (fraction <= 1e-6 tolerated)
    ("connection_creation_rate", 10.0000005, ZK_39, True),
    ("request_percentage", 12.5, ZK_39, False),          # DOUBLE keys keep fractions everywhere
    ("controller_mutation_rate", 1.0, OLD, True),        # came with 2.7 (KIP-599)
    ("controller_mutation_rate", 1.0, ZK_39, False),
])
def test_value_rules(key, value, profile, refused):
    assert (value_problem(key, value, profile) is not None) is refused


@pytest.mark.parametrize(("entity", "profile", "refused"), [
    (Entity.ip("::1"), ZK_39, True), (Entity.ip("2001:db8::1"), ZK_39, True),
    (Entity.ip("::ffff:10.0.0.8"), ZK_39, True), (Entity.ip("10.0.0.8"), ZK_39, False),
    (Entity.ip("::1"), KRAFT, False), (Entity.ip("10.0.0.8"), OLD, True), (Entity.ip(None), OLD, True),
    (Entity.user("a"), OLD, False),
])
def test_entity_rules(entity, profile, refused):
    assert (entity_problem(entity, profile) is not None) is refused


def test_a_detected_lower_bound_proves_no_missing_feature():
    # the sandbox advertises 2.6's API set: ">=2.6" must not refuse ip entities (2.7+)
    lower = ClusterProfile.of(">=2.6", "kraft")
    assert entity_problem(Entity.ip("10.0.0.1"), lower) is None
    assert value_problem("controller_mutation_rate", 1.0, lower) is None


def test_nothing_is_judged_for_an_unknown_target():
    assert problems({Entity.ip("::1"): {"connection_creation_rate": 1.5}}, ClusterProfile()) == []


def test_a_declared_zookeeper_cluster_is_checked_offline(tmp_path):
    write_manifest(tmp_path / "m" / "q.yaml", "entities:\n  - user: a\n"
                   "    quotas: {producer_byte_rate: 1235.0000001}\n  - ip: '::1'\n"
                   "    quotas: {connection_creation_rate: 5}\n")
    (tmp_path / "kqplan.toml").write_text('[clusters.legacy]\nsnapshot = "s.json"\nmanifests = ["m"]\n'
                                          'mode = "zookeeper"\nversion = "3.9"\n')
    (tmp_path / "s.json").write_text('{"format_version": 1, "cluster_id": "c", "entities": []}')
    path = shown(tmp_path / "m" / "q.yaml", tmp_path)  # m/q.yaml: from the root, kqplan.toml's directory
    for command in ("validate", "plan"):
        result = run_cli("--config", tmp_path / "kqplan.toml", command, "--cluster", "legacy")
        assert result.exit_code == 1
        out = "\n" + result.stdout + result.stderr  # each diagnostic begins a line
        assert (f"\n{path}:5:34: error[KQP145] {{user=a}}: a ZooKeeper-mode broker stores 1235.0000001 "
                "as 1235 (producer_byte_rate is LONG)") in out
        assert (f"\n{path}:6:5: error[KQP145] {{ip=::1}}: ZooKeeper-mode brokers refuse IPv6 ip "
                "entities") in out
    # the same manifests are fine for a KRaft cluster (the default, strict rules)
    (tmp_path / "kqplan.toml").write_text('[clusters.new]\nsnapshot = "s.json"\nmanifests = ["m"]\n')
    assert run_cli("--config", tmp_path / "kqplan.toml", "validate", "--cluster", "new").exit_code == 0
