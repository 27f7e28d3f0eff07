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


def test_the_wire_backend_builds_only_the_admin_apis_it_uses():
    out = fresh("import sys, kqplan.cluster.kafka; print(sorted(m.rpartition('.')[2] for m in sys.modules "
                "if m.startswith('kafka.protocol.admin.')), 'urllib.request' in sys.modules)")
    assert out == "['client_quotas', 'groups'] False\n"


def test_the_admin_package_completes_itself_when_asked():
    out = fresh("import kqplan.cluster.kafka; import kafka.protocol.admin as admin; "
                "from kafka.protocol.admin import ListGroupsRequest, DescribeAclsRequest; "
                "from kafka.protocol.admin.groups import ListGroupsRequest as direct; "
                "print(ListGroupsRequest is direct, DescribeAclsRequest.__name__, len(admin.__all__) > 40, "
                "kqplan.cluster.kafka.DescribeClientQuotasRequest is admin.DescribeClientQuotasRequest)")
    assert out == "True DescribeAclsRequest True True\n"
