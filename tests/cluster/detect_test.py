"""The cluster's Kafka version range and metadata mode, from the ApiVersions answer (no extra
request), shown in plans and reports — against the real broker and the sandbox."""

from __future__ import annotations

import re

from tests.helpers import run_cli, write_manifest
from tests.kafka.broker import version_tuple


def test_plan_and_report_name_the_version_and_mode(live, tmp_path):
    write_manifest(tmp_path / "q.yaml", "entities: []\n")
    plan = run_cli("plan", tmp_path / "q.yaml", "--bootstrap-server", live.bootstrap, "--format", "json")
    assert plan.exit_code == 0, plan.stderr
    cluster = plan.json["cluster"]
    assert re.fullmatch(r">=\d+\.\d+", cluster["version"])
    if live.kafka is not None:
        # The release line exactly (each line adds an API version kqplan knows), and the mode.
        major, minor = version_tuple(live.kafka.version)
        assert (cluster["version"], cluster["mode"]) == (f">={major}.{minor}", live.kafka.mode)
    else:
        assert cluster["mode"] == "kraft"  # the sandbox's default flavour answers as KRaft
    text = run_cli("plan", tmp_path / "q.yaml", "--bootstrap-server", live.bootstrap)
    assert f"), Kafka {cluster['version']} ({cluster['mode']})" in text.stdout.splitlines()[0]
