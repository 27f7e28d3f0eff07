"""The cluster's Kafka version range and metadata mode, from the ApiVersions answer (no extra
request), shown in plans and reports — against the real broker and the sandbox."""

from __future__ import annotations

import re

from tests.apply_live_test import live  # noqa: F401  (a fixture)
from tests.helpers import run_cli, write_manifest


def test_plan_and_report_name_the_version_and_mode(live, tmp_path):  # noqa: F811
    write_manifest(tmp_path / "q.yaml", "entities: []\n")
    plan = run_cli("plan", tmp_path / "q.yaml", "--bootstrap-server", live.bootstrap, "--format", "json")
    assert plan.exit_code == 0, plan.stderr
    cluster = plan.json["cluster"]
    assert cluster["mode"] == "kraft"  # 4.3.1 has no ZooKeeper mode; the sandbox answers as KRaft
    assert re.fullmatch(r">=\d+\.\d+", cluster["version"])
    if live.name == "real_kafka":
        assert cluster["version"] >= ">=4.0"
    text = run_cli("plan", tmp_path / "q.yaml", "--bootstrap-server", live.bootstrap)
    assert f"), Kafka {cluster['version']} (kraft)" in text.stdout.splitlines()[0]
