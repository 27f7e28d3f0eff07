"""``SandboxConfig(brokers=N)`` (``kqplan sandbox --brokers N``): Metadata and DescribeCluster list N
brokers, all served by the one process, so a plan divides cluster-wide budgets by N without N JVMs."""

from __future__ import annotations

import pytest
from kafka.protocol.admin import DescribeClusterRequest
from kafka.protocol.metadata import MetadataRequest

from kqplan.sandbox import Sandbox, SandboxConfig
from tests.helpers import Live


def _live(box: Sandbox) -> Live:
    return Live("sandbox", box.bootstrap, box.bootstrap, {})


@pytest.mark.parametrize("brokers", [1, 3, 6])
def test_identity_reads_the_broker_count_from_metadata(brokers):
    config = SandboxConfig(brokers=brokers, cluster_id="c")
    with Sandbox.start(config) as box, _live(box).cluster() as cluster:
        ident = cluster.identity()
        assert (ident.cluster_id, ident.brokers) == ("c", brokers)
        assert len(box.requests_of(3)) == 1  # still one Metadata request for the identity


def test_metadata_and_describe_cluster_list_every_broker_at_the_address_dialled():
    with Sandbox.start(SandboxConfig(brokers=3)) as box, _live(box).cluster() as cluster:
        metadata = cluster.transport.send(MetadataRequest(topics=[], allow_auto_topic_creation=False,
                                                          min_version=1))
        host, port = box.addresses[0]
        assert [(b.node_id, b.host, b.port) for b in metadata.brokers] == [(n, host, port) for n in (1, 2, 3)]
        request = DescribeClusterRequest(include_cluster_authorized_operations=False)
        described = cluster.transport.send(request)
        assert [b.broker_id for b in described.brokers] == [1, 2, 3]


def test_a_cluster_has_at_least_one_broker():
    with pytest.raises(ValueError, match="brokers must be 1 or more"):
        SandboxConfig(brokers=0)
