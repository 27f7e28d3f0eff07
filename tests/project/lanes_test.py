"""The suite's lanes on its xdist workers (tests/lanes.py): Spark's modules in one lane (one JVM,
the Connect tests before the local session's), the real-broker tests in another, the standalone
cluster's together, the rest anywhere."""

from __future__ import annotations

from pathlib import Path

from tests.lanes import lane

ROOT = Path(__file__).resolve().parents[2]


def test_each_test_has_its_lane() -> None:
    assert lane("tests/fleet/connect_test.py::test_plan_and_impact[x]", ROOT) == "spark"
    assert lane("tests/fleet/spark_bucket_rows_test.py::test_a", ROOT) == "spark"
    assert lane("tests/hardening/spark_uri_test.py::test_a", ROOT) == "spark"
    assert lane("tests/cluster/keystore_test.py::test_k[PKCS12-real_kafka-4.3.1-kraft]", ROOT) == "kafka"
    callback = "tests/metrics/callback_real_test.py::test_c[real_kafka-4.3.1-kraft-callback]"
    assert lane(callback, ROOT) == "kafka"
    assert lane("tests/fleet/standalone_test.py::test_impact", ROOT) == "standalone"
    assert lane("tests/project/extras_test.py::test_x", ROOT) is None  # fresh venvs, in subprocesses
    assert lane("tests/core/resolve_test.py::test_r[real_kafka_like]", ROOT) is None
    assert lane("tests/core/resolve_test.py::test_r", ROOT) is None


def test_every_module_that_starts_spark_in_process_is_in_the_spark_lane() -> None:
    """A module that builds a Spark session, asks for the Spark fixtures or runs a command with
    ``--engine spark`` in this process is in the Spark lane (else a second JVM, and a Connect
    session after a local one, in another worker)."""
    for path in sorted((ROOT / "tests").rglob("*_test.py")):
        text = path.read_text(encoding="utf-8")
        module = str(path.relative_to(ROOT))
        if any(word in text for word in ("SparkSession", "connect_server", "spark_cluster", "Engine.SPARK",
                                          '"--engine", "spark"', "(spark", " spark:")):
            assert lane(f"{module}::t", ROOT) in ("spark", "standalone", None), module
            if module not in ("tests/fleet/standalone_test.py", "tests/project/extras_test.py"):
                assert lane(f"{module}::t", ROOT) == "spark", module
