"""The harness's version matrix without a broker: which entries it runs, in which order, with which jars
and logging, and how the plugin orders and names the tests (a collect-only pytest run)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.helpers import REPO
from tests.kafka.broker import (
    POM,
    KafkaSpec,
    default_matrix,
    java_command,
    kafka_matrix,
    maven_profile,
    pinned_kafka_version,
    write_log_config,
)

KRAFT_4 = KafkaSpec(pinned_kafka_version(), "kraft")
ZK_39 = KafkaSpec("3.9.1", "zookeeper")


def test_the_default_matrix_is_the_pinned_kraft_release_and_the_last_zookeeper_line():
    assert kafka_matrix({}) == default_matrix() == (KRAFT_4, ZK_39)


def test_the_matrix_variable_lists_entries_in_order_without_repeats():
    env = {"KQPLAN_KAFKA_MATRIX": " 3.6.2-zookeeper, 4.3.1 ,2.8.2-zk,3.6.2-zookeeper,"}
    assert kafka_matrix(env) == (KafkaSpec("3.6.2", "zookeeper"), KafkaSpec("4.3.1", "kraft"),
                                 KafkaSpec("2.8.2", "zookeeper"))
    assert [s.id for s in kafka_matrix(env)] == ["3.6.2-zookeeper", "4.3.1-kraft", "2.8.2-zookeeper"]


def test_all_is_the_whole_matrix():
    assert [s.id for s in kafka_matrix({"KQPLAN_KAFKA_MATRIX": "all"})] == [
        f"{KRAFT_4.version}-kraft", "3.9.1-zookeeper", "3.9.1-kraft", "3.6.2-zookeeper", "2.8.2-zookeeper"]


def test_the_single_broker_variables_still_pick_one_broker():
    assert kafka_matrix({"KQPLAN_KAFKA_VERSION": "3.9.1"}) == (KafkaSpec("3.9.1", "kraft"),)
    assert kafka_matrix({"KQPLAN_KAFKA_VERSION": "3.6.2", "KQPLAN_KAFKA_MODE": "zookeeper"}) == \
        (KafkaSpec("3.6.2", "zookeeper"),)
    # The matrix wins over them.
    assert kafka_matrix({"KQPLAN_KAFKA_MATRIX": "3.9.1-kraft", "KQPLAN_KAFKA_VERSION": "2.8.2"}) == \
        (KafkaSpec("3.9.1", "kraft"),)


@pytest.mark.parametrize(("entry", "message"), [
    ("4.3.1-zookeeper", "4.3.1-zookeeper: Kafka 4.0 removed ZooKeeper mode; use 4.3.1-kraft or a 3.x "
                        "release in ZooKeeper mode"),
    ("3.2.3-kraft", "3.2.3-kraft: KRaft needs Kafka 3.3+; use 3.2.3-zookeeper"),
    ("2.6.3-zookeeper", "2.6.3-zookeeper: the SSL listener needs PEM key stores (Kafka 2.7+)"),
    ("3.9.1-raft", "3.9.1-raft: the mode is one of kraft, zookeeper (or zk)"),
    ("latest", "'latest' is not a Kafka release number"),
])
def test_an_entry_the_harness_cannot_run_is_refused_naming_it(entry, message):
    with pytest.raises(ValueError, match=r"^KQPLAN_KAFKA_MATRIX='4\.3\.1,") as err:
        kafka_matrix({"KQPLAN_KAFKA_MATRIX": f"4.3.1,{entry}"})
    assert str(err.value).endswith(message)


def test_releases_before_4_log_through_log4j1(tmp_path):
    assert [maven_profile(v) for v in ("2.8.2", "3.9.1", "4.0.0", "4.3.1")] == \
        ["log4j1", "log4j1", "log4j2", "log4j2"]
    assert "<id>log4j1</id>" in POM.read_text()
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    new.mkdir()
    (old / "reload4j-1.2.25.jar").touch()
    (new / "log4j-core-2.25.4.jar").touch()
    old_config = write_log_config(tmp_path / "old.properties", libs=old, target="SYSTEM_ERR")
    new_config = write_log_config(tmp_path / "new.properties", libs=new, target="SYSTEM_ERR")
    assert "log4j.appender.out.Target=System.err" in old_config.read_text()
    assert "appender.out.target = SYSTEM_ERR" in new_config.read_text()
    assert f"-Dlog4j.configuration={old_config.as_uri()}" in java_command(old, "M", log_config=old_config)
    assert f"-Dlog4j2.configurationFile={new_config}" in java_command(new, "M", log_config=new_config)


SAMPLE = '''
import pytest
from tests.kafka.broker import KafkaSpec
from tests.kafka.plugin import real_kafka_params

@pytest.fixture(params=["sandbox", *real_kafka_params()])
def target(request):
    return request.param

def test_unit():
    pass

@pytest.mark.floods_broker
def test_floods(target):
    pass

def test_direct(real_kafka):
    pass

def test_via_target(target):
    pass

def test_both_ways(target, real_kafka):
    pass

def test_later_unit():
    pass
'''


def test_the_plugin_names_marks_and_groups_the_tests_by_broker(tmp_path):
    """Every broker's tests run together (each broker starts once), ids name the broker, other tests
    keep their place; a test reaching two brokers at once is deselected."""
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["tests.kafka.plugin"]\n')
    (tmp_path / "sample_test.py").write_text(SAMPLE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KQPLAN_")}
    env |= {"KQPLAN_KAFKA_MATRIX": "4.3.1-kraft,3.9.1-zookeeper", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-m", "real_kafka or not real_kafka", "sample_test.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    ids = [line.split("::", 1)[1] for line in done.stdout.splitlines() if "::" in line]
    assert ids == [  # pytest itself groups the tests taking real_kafka (a session-scoped parameter)
        "test_unit",
        "test_floods[sandbox]",
        "test_direct[real_kafka-4.3.1-kraft]",
        "test_both_ways[sandbox-real_kafka-4.3.1-kraft]",
        "test_both_ways[real_kafka-4.3.1-kraft-real_kafka-4.3.1-kraft]",
        "test_via_target[sandbox]",
        "test_via_target[real_kafka-4.3.1-kraft]",
        "test_later_unit",
        "test_floods[real_kafka-4.3.1-kraft]",  # floods_broker: last on its broker
        "test_direct[real_kafka-3.9.1-zookeeper]",
        "test_both_ways[sandbox-real_kafka-3.9.1-zookeeper]",
        "test_both_ways[real_kafka-3.9.1-zookeeper-real_kafka-3.9.1-zookeeper]",
        "test_via_target[real_kafka-3.9.1-zookeeper]",
        "test_floods[real_kafka-3.9.1-zookeeper]",
    ]
    assert "2 deselected" in done.stdout  # real_kafka-4.3.1 with real_kafka-3.9.1, and the reverse
    marked = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                             "-m", "not real_kafka", "sample_test.py"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=120)
    assert [line.split("::", 1)[1] for line in marked.stdout.splitlines() if "::" in line] == \
        ["test_unit", "test_floods[sandbox]", "test_via_target[sandbox]", "test_later_unit"]


def test_a_bad_matrix_stops_the_session_with_the_reason(tmp_path):
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["tests.kafka.plugin"]\n')
    (tmp_path / "sample_test.py").write_text(SAMPLE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KQPLAN_")}
    env |= {"KQPLAN_KAFKA_MATRIX": "4.3.1-zookeeper", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "sample_test.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode != 0
    assert "Kafka 4.0 removed ZooKeeper mode" in done.stdout + done.stderr

