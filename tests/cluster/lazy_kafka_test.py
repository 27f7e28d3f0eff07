"""kafka-python's package __init__ (admin client, consumer, producer) is not run for kqplan's
wire access, and still runs for anyone in the same process who asks the package for a name."""

from __future__ import annotations

import subprocess
import sys


def fresh(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout


def test_the_wire_backend_does_not_run_kafkas_init():
    out = fresh("import sys, kqplan.cluster.kafka, kqplan.cluster.transport; print(sorted(m for m in "
                "('kafka.admin', 'kafka.consumer', 'kafka.producer') if m in sys.modules))")
    assert out == "[]\n"


def test_the_package_completes_itself_when_asked():
    out = fresh("import kqplan.cluster.kafka; "
                "from kafka import KafkaAdminClient, TopicPartition, __version__; import kafka; "
                "print(KafkaAdminClient.__name__, TopicPartition.__name__, bool(__version__),"
                " kafka.__name__)")
    assert out == "KafkaAdminClient TopicPartition True kafka\n"
