"""The kraft flavour answers as a KRaft 4.3 broker, and says so: its ApiVersions set is a real 4.3
broker's (the APIs it serves at the versions it serves), so a plan against it reads the release and
the mode it claims (``Kafka >=4.3 (kraft)``; it printed ``>=2.6``, from the few APIs it advertised)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka.protocol.metadata import ApiVersionsRequest

from kqplan.cluster.connection import config_from_properties
from kqplan.cluster.transport import KafkaTransport
from kqplan.sandbox import Flavor, Sandbox, SandboxConfig
from kqplan.sandbox.apis import DESCRIBE_CLUSTER, METADATA, SUPPORTED
from tests.helpers import run_cli, write_manifest
from tests.kafka.plugin import real_kafka_for, real_kafka_params

MANIFEST = "entities:\n  - user: kraft-flavor-a\n    quotas: {producer_byte_rate: 1MiB}\n"


def advertised(bootstrap: str) -> tuple[dict[int, tuple[int, int]], tuple[str | None, str | None]]:
    """The broker's ApiVersions set (as asked at v3: a real broker wants a client software name)
    and what kqplan's transport reads from it: (version, mode)."""
    transport = KafkaTransport(config_from_properties("", bootstrap=bootstrap, source="(test)", env={}))
    try:
        request = ApiVersionsRequest(client_software_name="kqplan-test", client_software_version="1.0")
        response = transport.send(request)
        assert response.error_code == 0
        return ({k.api_key: (k.min_version, k.max_version) for k in response.api_keys},
                transport.broker_kind())
    finally:
        transport.close()


@pytest.mark.parametrize("flavor", list(Flavor))
def test_a_plan_against_the_sandbox_names_the_release_and_mode_it_answers_as(tmp_path: Path, flavor: Flavor):
    manifest = write_manifest(tmp_path / "q.yaml", MANIFEST)
    with Sandbox.start(SandboxConfig(port=0, flavor=flavor)) as sandbox:
        text = run_cli("plan", manifest, "--bootstrap-server", sandbox.bootstrap)
        as_json = run_cli("plan", manifest, "--bootstrap-server", sandbox.bootstrap, "--format", "json")
    assert text.exit_code == 0, text.stderr
    assert f", Kafka >={flavor.release} ({flavor.mode}):" in text.stdout.splitlines()[0]
    assert (as_json.json["cluster"]["version"], as_json.json["cluster"]["mode"]) == \
        (f">={flavor.release}", flavor.mode)


def test_the_in_process_sandbox_is_a_kraft_4_3_broker(tmp_path: Path):
    """``--sandbox``: the README's first command."""
    result = run_cli("plan", write_manifest(tmp_path / "q.yaml", MANIFEST), "--sandbox")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0].endswith(", Kafka >=4.3 (kraft):")


def test_the_kraft_flavour_answers_api_versions_v4_in_kind():
    """As a 4.3 broker does (v3 and v4 have the same body); v5 gets the v0 error body."""
    with Sandbox.start(SandboxConfig(port=0)) as sandbox:
        keys, kind = advertised(sandbox.bootstrap)
    assert keys[18] == (0, 4)
    assert kind == (">=4.3", "kraft")
    assert all(keys[k] == served for k, served in SUPPORTED.items())  # never a version it cannot serve
    assert 4 not in keys  # no LeaderAndIsr: a KRaft broker


def _kraft_43(param: object) -> bool:
    spec = param.values[0]  # type: ignore[attr-defined]
    return spec.mode == "kraft" and spec.version.startswith("4.3.")


@pytest.mark.parametrize("spec", [p for p in real_kafka_params() if _kraft_43(p)])
def test_the_kraft_flavour_advertises_a_real_4_3_brokers_api_versions(request, spec):
    """Every key a real 4.3 KRaft broker advertises, at its ranges, but for the two APIs the sandbox
    serves at lower versions than 4.3 (Metadata 12 of 13, DescribeCluster 1 of 2); the same
    (release, mode) read from both."""
    real, real_kind = advertised(real_kafka_for(request, spec).bootstrap)
    with Sandbox.start(SandboxConfig(port=0)) as sandbox:
        ours, our_kind = advertised(sandbox.bootstrap)
    assert set(ours) == set(real)
    assert {k for k in real if ours[k] != real[k]} == {METADATA, DESCRIBE_CLUSTER}
    assert all(real[k][0] <= ours[k][0] <= ours[k][1] <= real[k][1] for k in (METADATA, DESCRIBE_CLUSTER))
    assert our_kind == real_kind == (">=4.3", "kraft")
