"""examples/gitlab/.gitlab-ci.yml: the plan is made in the merge request, the apply after the merge
sends exactly that plan (the artifact of the merge request's last pipeline, never a plan made on
main), and the client properties are written 0600 outside the checkout.

The apply job's own script runs here in bash, as a GitLab runner runs it: against a stand-in for
GitLab's REST API on a loopback port (the four endpoints the job reads) and a sandbox broker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from kqplan.core.entity import Entity
from kqplan.sandbox import Sandbox, SandboxConfig
from tests.helpers import REPO, run_cli, write_manifest

PIPELINE = yaml.safe_load((REPO / "examples" / "gitlab" / ".gitlab-ci.yml").read_text())
TOKEN = "glpat-test-token"
MERGE_SHA, HEAD_SHA = "m" * 40, "h" * 40


def _rules(job: str) -> list[str]:
    return [rule["if"] for rule in PIPELINE[job]["rules"]]


def test_the_plan_is_made_in_merge_requests_only_and_apply_takes_no_plan_of_its_own_pipeline():
    assert _rules("plan") == ['$CI_PIPELINE_SOURCE == "merge_request_event"']
    assert PIPELINE["apply"]["needs"] == []
    assert all("CI_DEFAULT_BRANCH" in rule for rule in _rules("apply"))
    script = "\n".join(PIPELINE["apply"]["script"])
    assert "/merge_requests/" in script
    assert "/artifacts/plan.json" in script
    assert script.rstrip().endswith("kqplan apply --plan plan.json --cluster prod --auto-approve "
                                    "--report report.json")


def test_every_job_with_the_secret_writes_it_0600_outside_the_checkout():
    text = (REPO / "examples" / "gitlab" / ".gitlab-ci.yml").read_text()
    users = [name for name, job in PIPELINE.items() if isinstance(job, dict)
             and any(word in " ".join(job.get("script", [])) for word in ("kqplan plan", "kqplan apply"))]
    assert users == ["plan", "apply"]
    assert all(PIPELINE[name]["extends"] == ".kafka-client" for name in users)
    steps = PIPELINE[".kafka-client"]["before_script"]
    writes = next(i for i, s in enumerate(steps) if "$KQPLAN_CLIENT_PROPERTIES" in s)
    assert "umask 077" in steps[:writes]
    assert text.count("$KQPLAN_CLIENT_PROPERTIES") == 1  # written in one place only
    for job in PIPELINE.values():
        paths = job.get("artifacts", {}).get("paths", []) if isinstance(job, dict) else []
        assert not any("properties" in p for p in paths)


# -- the apply job, run --------------------------------------------------------------------------

@contextmanager
def gitlab_api(routes: Mapping[str, Any]) -> Iterator[str]:
    """``$CI_API_V4_URL`` of a stand-in that answers ``routes`` (path → JSON value, or bytes as a
    file) to requests carrying the job's token, and 404 to anything else."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            found = routes.get(self.path.removeprefix("/api/v4/projects/42"))
            if self.headers.get("PRIVATE-TOKEN") != TOKEN or found is None:
                self.send_error(404)
                return
            body = found if isinstance(found, bytes) else json.dumps(found).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/api/v4"
    finally:
        server.shutdown()
        server.server_close()


def _plan(workspace: Path, body: str, out: Path) -> bytes:
    write_manifest(workspace / "quotas" / "q.yaml", body)
    made = run_cli("--config", workspace / "kqplan.toml", "plan", "--cluster", "prod", "--out", out)
    assert made.exit_code == 0, made.stderr
    return out.read_bytes()


def _routes(older: bytes, newest: bytes, newest_status: str) -> dict[str, Any]:
    """Merge request !7 (merged as MERGE_SHA) with two pipelines: 11 planned an older commit, 12
    (the newest) planned the last one reviewed."""
    return {
        f"/repository/commits/{MERGE_SHA}/merge_requests": [{"iid": 7, "state": "merged", "sha": HEAD_SHA}],
        "/merge_requests/7/pipelines": [{"id": 12, "sha": HEAD_SHA}, {"id": 11, "sha": "o" * 40}],
        "/pipelines/11/jobs": [{"id": 101, "name": "plan", "status": "success", "web_url": "https://g/j/101"}],
        "/pipelines/12/jobs": [{"id": 30, "name": "validate", "status": "success", "web_url": "https://g/j/30"},
                               {"id": 102, "name": "plan", "status": newest_status,
                                "web_url": "https://g/j/102"}],
        "/jobs/101/artifacts/plan.json": older,
        "/jobs/102/artifacts/plan.json": newest,
    }


def run_apply_job(workspace: Path, api: str) -> subprocess.CompletedProcess[str]:
    """The apply job's before_script (but the pip install) and script, in bash with ``set -eo
    pipefail`` as GitLab's shell executor, then the file's mode and where it is."""
    before = [s for s in PIPELINE[".kafka-client"]["before_script"] if not s.startswith("pip ")]
    check = ['stat -c %a "$KQPLAN_COMMAND_CONFIG" > secret-mode',
             'printf %s "$KQPLAN_COMMAND_CONFIG" > secret-path']
    script = "\n".join(["set -eo pipefail", *before, *PIPELINE["apply"]["script"], *check])
    runner_tmp = workspace.parent / "runner-tmp"  # the runner's temporary directory, not the checkout
    runner_tmp.mkdir()
    env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "HOME": str(workspace),
           "TMPDIR": str(runner_tmp),
           "CI_API_V4_URL": api, "CI_PROJECT_ID": "42", "CI_COMMIT_SHA": MERGE_SHA, "KQPLAN_API_TOKEN": TOKEN,
           "KQPLAN_CLIENT_PROPERTIES": "security.protocol=PLAINTEXT\nclient.id=gitlab-apply"}
    return subprocess.run(["bash", "-c", script], cwd=workspace, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.mark.parametrize("newest_status", ["success", "failed"])
def test_the_apply_job_sends_the_plan_of_the_merge_requests_last_pipeline(tmp_path: Path, newest_status: str):
    workspace = tmp_path / "checkout"
    workspace.mkdir()
    with Sandbox.start(SandboxConfig(port=0)) as sandbox:
        (workspace / "kqplan.toml").write_text(
            f'[clusters.prod]\nbootstrap-server = "{sandbox.bootstrap}"\nmanifests = ["quotas"]\n')
        older = _plan(workspace, "entities:\n  - user: a\n    quotas: {producer_byte_rate: 1MiB}\n",
                      tmp_path / "older.json")
        newest = _plan(workspace, "entities:\n  - user: a\n    quotas: {producer_byte_rate: 2MiB}\n"
                       "  - user: b\n    quotas: {consumer_byte_rate: 1KiB}\n", tmp_path / "newest.json")
        write_manifest(workspace / "quotas" / "q.yaml", "entities: []\n")  # main: apply reads no manifest
        with gitlab_api(_routes(older, newest, newest_status)) as api:
            job = run_apply_job(workspace, api)
        state = dict(sandbox.state)
    if newest_status == "failed":  # never the older pipeline's plan instead
        assert job.returncode == 1, job.stdout + job.stderr
        assert "!7's last pipeline has no successful plan job: re-run it, then apply" in job.stderr
        assert state == {}
        return
    assert job.returncode == 0, job.stdout + job.stderr
    assert "Applying the plan reviewed in !7: https://g/j/102" in job.stdout
    assert state == {Entity.user("a"): {"producer_byte_rate": 2 * 2**20},
                     Entity.user("b"): {"consumer_byte_rate": 1024.0}}
    assert json.loads((workspace / "report.json").read_text())["status"] == "finished"
    assert (workspace / "secret-mode").read_text().strip() == "600"
    secret = Path((workspace / "secret-path").read_text())
    assert workspace not in secret.parents
    assert oct(secret.parent.stat().st_mode & 0o777) == "0o700"
