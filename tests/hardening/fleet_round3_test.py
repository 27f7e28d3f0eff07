"""Issue 41, the fleet's part: ``fleet apply --report`` has the single apply's life cycle (an
earlier run's file is replaced however this run ends: a cluster that cannot be planned, SIGTERM
after a cluster was altered, an error mid-way), ``--out``/``--usage`` values that look like URIs
are URIs, well formed or refused before any work, and the fleet package keeps no dead code."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from referencing import Registry, Resource

from kqplan.core.errors import KqplanError
from kqplan.sandbox import Fault, Sandbox, SandboxConfig
from tests.commands.fleet_apply_test import MANIFEST, NAMES, SEED, rate, three_clusters
from tests.helpers import REPO, run_cli, write_manifest

STALE = {"ok": True, "status": "finished", "clusters": []}
"""An earlier run's report: a success."""


def _schemas() -> tuple[dict[str, Any], Registry[Any]]:
    single = json.loads((REPO / "schemas" / "report-v1.json").read_text())
    fleet = json.loads((REPO / "schemas" / "fleet-report-v1.json").read_text())
    return fleet, Registry().with_resource(single["$id"], Resource.from_contents(single))


def valid(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` checked against schemas/fleet-report-v1.json (each cluster's report against
    report-v1.json); the clusters by name."""
    schema, registry = _schemas()
    jsonschema.Draft202012Validator(schema, registry=registry).validate(document)
    return {c["name"]: c for c in document["clusters"]}


@pytest.fixture
def slow_fleet(tmp_path: Path) -> Iterator[tuple[Path, dict[str, Sandbox]]]:
    """Three sandboxes; prod-eu's real alter waits 30 s before the broker handles it (its
    validateOnly passes at once): the fleet apply stands in prod-eu's alter meanwhile."""
    with ExitStack() as stack:
        yield three_clusters(stack, tmp_path, Fault("alter", delay_ms=30_000))


def _alter_sent(box: Sandbox) -> bool:
    """The apply's validateOnly and the describe after it are answered: the real alter comes next."""
    served = box.requests
    validated = [i for i, r in enumerate(served) if r.api_name == "AlterClientQuotas" and r.validate_only]
    return bool(validated) and any(r.api_name == "DescribeClientQuotas" for r in served[validated[0]:])


def stale(path: Path) -> Path:
    path.write_text(json.dumps(STALE))
    return path


# -- fleet apply --report: every exit path writes this run's report -----------------------------------

def test_a_cluster_that_cannot_be_planned_replaces_an_earlier_report(slow_fleet, tmp_path):
    toml, boxes = slow_fleet
    report = stale(tmp_path / "fleet-report.json")
    manifest = toml.parent / "q" / "prod-us" / "q.yaml"
    text = manifest.read_text()
    manifest.write_text(text.replace("producer_byte_rate: 2000", "producer_byte_rat: 2000", 1))
    result = run_cli("--config", toml, "fleet", "apply", "--rollout", "--auto-approve", "--report", report)
    assert result.exit_code == 1, result.stdout + result.stderr
    assert "fleet apply stops before any change" in result.stderr
    assert all(rate(box, "u1") == 1000.0 for box in boxes.values())
    document = json.loads(report.read_text())
    clusters = valid(document)
    assert (document["ok"], document["status"]) == (False, "failed")
    assert "could not be planned (prod-us:" in document["error"]
    assert document["started_at"]
    assert document["finished_at"]
    assert clusters["prod-us"]["status"] == "failed"
    assert "producer_byte_rat" in clusters["prod-us"]["error"]
    assert [clusters[n]["status"] for n in ("staging", "prod-eu")] == ["not started", "not started"]
    assert all(c["report"] is None for c in clusters.values())


def test_sigterm_after_a_cluster_was_altered_leaves_an_interrupted_report(slow_fleet, tmp_path):
    toml, boxes = slow_fleet
    report = stale(tmp_path / "fleet-report.json")
    child = subprocess.Popen(
        [sys.executable, "-m", "kqplan", "--config", str(toml), "fleet", "apply", "--rollout",
         "--auto-approve", "--report", str(report)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:  # staging applied, prod-eu's alter sent and held by its broker
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "no in-progress report with staging applied"
            document = json.loads(report.read_text())
            if document.get("status") == "in progress":
                statuses = {c["name"]: c["status"] for c in document["clusters"]}
                if statuses == {"staging": "applied", "prod-eu": "in progress", "prod-us": "not started"}:
                    break
            time.sleep(0.05)
        in_progress = document
        box = boxes["prod-eu"]
        while not _alter_sent(box):  # validateOnly answered, the describe before the alter answered
            assert time.monotonic() < deadline, "prod-eu's alter never went out"
            time.sleep(0.05)
        time.sleep(0.3)  # the alter on its way: held by the broker
        child.send_signal(signal.SIGTERM)
        out, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 130, out + err
    assert "Traceback" not in err
    valid(in_progress)
    assert (in_progress["ok"], in_progress["finished_at"]) == (False, None)
    document = json.loads(report.read_text())
    clusters = valid(document)
    assert (document["ok"], document["status"]) == (False, "interrupted")
    assert document["started_at"] == in_progress["started_at"]
    assert document["finished_at"]
    assert clusters["staging"]["status"] == "applied"
    assert {e["status"] for e in clusters["staging"]["report"]["entities"]} == {"applied"}
    assert clusters["prod-eu"]["status"] == "interrupted"
    assert clusters["prod-eu"]["report"]["status"] == "interrupted"
    assert {e["status"] for e in clusters["prod-eu"]["report"]["entities"]} == {"unknown"}  # in flight
    assert (clusters["prod-us"]["status"], clusters["prod-us"]["report"]) == ("not started", None)
    assert (rate(boxes["staging"], "u1"), rate(boxes["prod-us"], "u1")) == (2000.0, 1000.0)


def test_an_error_mid_way_leaves_a_failed_report(slow_fleet, tmp_path):
    """The whole command's --timeout passes during prod-eu's alter: prod-eu failed, and prod-us is
    not started (its connection could only time out): the run stops with that error."""
    toml, boxes = slow_fleet
    report = stale(tmp_path / "fleet-report.json")
    result = run_cli("--config", toml, "fleet", "apply", "--auto-approve", "--report", report,
                     "--timeout", "4s")
    out = result.stdout + result.stderr
    assert result.exit_code == 1, out
    assert "Traceback" not in out
    assert "--timeout 4 s passed: prod-us not started" in result.stderr
    document = json.loads(report.read_text())
    clusters = valid(document)
    assert (document["ok"], document["status"]) == (False, "failed")
    assert document["error"].startswith("--timeout 4 s passed: prod-us not started")
    assert clusters["staging"]["status"] == "applied"
    assert clusters["prod-eu"]["status"] == "failed"
    assert "applied" not in {e["status"] for e in clusters["prod-eu"]["report"]["entities"]}
    assert (clusters["prod-us"]["status"], clusters["prod-us"]["report"]) == ("not started", None)
    assert (rate(boxes["staging"], "u1"), rate(boxes["prod-us"], "u1")) == (2000.0, 1000.0)


def test_a_completed_run_and_a_declined_one_describe_themselves(tmp_path):
    with ExitStack() as stack:
        boxes = {n: stack.enter_context(Sandbox.start(SandboxConfig(port=0, cluster_id=f"id-{n}", seed=SEED)))
                 for n in NAMES[:2]}
        (tmp_path / "kqplan.toml").write_text("".join(
            f'[clusters.{n}]\nbootstrap-server = "{b.bootstrap}"\nid = "id-{n}"\nmanifests = ["q/{n}"]\n\n'
            for n, b in boxes.items()))
        for name in boxes:
            write_manifest(tmp_path / "q" / name / "q.yaml", f"cluster: {name}\n" + MANIFEST)
        report = stale(tmp_path / "r.json")
        args = ("--config", tmp_path / "kqplan.toml", "fleet", "apply", "--auto-approve", "--report", report)
        done = run_cli(*args)
        assert done.exit_code == 0, done.stdout + done.stderr
        document = json.loads(report.read_text())
        clusters = valid(document)
        assert (document["ok"], document["status"], document["error"]) == (True, "finished", None)
        assert [c["status"] for c in clusters.values()] == ["applied", "applied"]
        again = run_cli(*args)
        assert again.exit_code == 0
        document = json.loads(report.read_text())
        assert (document["ok"], document["status"]) == (True, "finished")
        assert [c["status"] for c in valid(document).values()] == ["no changes", "no changes"]


# -- URIs: a value whose first component has a colon is a URI, well formed or refused ---------------

def _fleet_root(tmp_path: Path) -> Path:
    """An inventory of one offline (snapshot) cluster with a change to plan, and a usage file."""
    (tmp_path / "snap.json").write_text(json.dumps({"format_version": 1, "cluster_id": "c1", "entities": []}))
    (tmp_path / "kqplan.toml").write_text('[clusters.c1]\nsnapshot = "snap.json"\nid = "c1"\n'
                                          'manifests = ["q"]\n')
    write_manifest(tmp_path / "q" / "q.yaml",
                   "entities:\n  - user: u1\n    quotas: {producer_byte_rate: 2000}\n")
    (tmp_path / "u.csv").write_text("cluster,user,client_id,producer_byte_rate\nc1,u1,,1500\n")
    return tmp_path


def _listing(root: Path) -> set[Path]:
    return {p.relative_to(root) for p in root.rglob("*")}


HOSTILE_OUT = ["file:rel", "file:", "file:/", "file:/abs/x", "file://host/x", "file://", "FILE:x",
               "s3a:", "s3a:bucket/x", "s3a:///x", "gs://", "hdfs:///x", "s_3://b/x", "3s://b/x", ":x", "-a://b",
               "s3a://b/x?y", "s3a://b/x#y", "file:///tmp/x%00y", "c:x", "x y://b"]


@pytest.mark.parametrize("out", HOSTILE_OUT)
def test_fleet_impact_refuses_an_out_that_is_no_usable_uri_before_any_work(tmp_path, monkeypatch, out):
    root = _fleet_root(tmp_path)
    monkeypatch.chdir(root)
    before = _listing(root)
    result = run_cli("fleet", "impact", "--usage", "u.csv", "--out", out)
    assert result.exit_code == 1, result.stdout + result.stderr
    assert "internal error" not in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("Error: --out "), result.stderr
    assert _listing(root) == before  # nothing created


@pytest.mark.parametrize("command", [
    ("fleet", "plan", "--out", "{}"),
    ("fleet", "snapshot", "--out", "{}"),
    ("fleet", "impact", "--usage", "u.csv", "--out", "{}"),
    ("fleet", "impact", "--usage", "{}", "--out", "out"),
    ("fleet", "rightsize", "--usage", "{}", "--out", "out"),
    ("fleet", "rightsize", "--usage", "u.csv", "--out", "{}"),
    ("fleet", "usage", "--prometheus", "http://127.0.0.1:1", "--out", "{}"),
], ids=lambda c: " ".join(c[:2] + c[-2:-1]))
def test_every_fleet_command_refuses_file_rel(tmp_path, monkeypatch, command):
    root = _fleet_root(tmp_path)
    monkeypatch.chdir(root)
    before = _listing(root)
    result = run_cli(*[part.replace("{}", "file:rel") for part in command])
    assert result.exit_code == 1, result.stdout + result.stderr
    assert "internal error" not in result.stderr
    assert "file:rel: not a URI" in result.stderr, result.stderr
    assert "./file:rel" in result.stderr  # how to name a local directory so
    assert _listing(root) == before


def test_a_local_name_with_a_colon_works_where_written_as_a_path(tmp_path, monkeypatch):
    """``./file:rel`` is the local directory ``file:rel`` (pyarrow would read ``file:rel/…`` as a
    URI): impact and plan write their tables there, and the tables read back."""
    import pyarrow.parquet as pq

    root = _fleet_root(tmp_path)
    monkeypatch.chdir(root)
    (root / "in:put").mkdir()
    (root / "u.csv").rename(root / "in:put" / "u.csv")
    result = run_cli("fleet", "impact", "--usage", "./in:put", "--out", "./file:rel")
    assert result.exit_code == 0, result.stdout + result.stderr
    impact = pq.read_table(str((root / "file:rel" / "impact.parquet").absolute()))
    assert set(impact.column("user").to_pylist()) == {"u1"}
    result = run_cli("fleet", "plan", "--out", "./plan:out")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert pq.read_table(str((root / "plan:out" / "changes.parquet").absolute())).num_rows == 1
    uri = run_cli("fleet", "impact", "--usage", (root / "in:put" / "u.csv").as_uri(), "--out",
                  (root / "by-uri").as_uri())
    assert uri.exit_code == 0, uri.stdout + uri.stderr
    assert (root / "by-uri" / "impact.parquet").is_file()


SCHEME = st.from_regex(r"[A-Za-z][A-Za-z0-9+.\-]{0,6}", fullmatch=True)
REST = st.text(st.sampled_from("/:?#%@ .ab0-"), max_size=12)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.one_of(st.builds(lambda s, c, r: s + c + r, SCHEME, st.sampled_from([":", "://", ":/", ":///"]),
                                REST),
                      st.builds(lambda a, r: a + ":" + r, st.text(min_size=1, max_size=4).filter(
                          lambda a: "/" not in a), REST)))
def test_a_value_with_a_scheme_is_a_file_path_as_documented_or_refused(text):
    """Whatever the value, :func:`local_location` gives the path a well-formed ``file://`` URI
    names (absolute, never with a NUL, never a relative leftover of the URI), or refuses it with a
    KqplanError that says which flag; a value whose first component has no colon is a path as
    written."""
    from kqplan.fleet.locations import local_location

    try:
        path = local_location("--out", text)
    except KqplanError as exc:
        refused = exc.message
    else:
        refused = None
    if refused is not None:
        assert refused.startswith("--out ")
        return
    first = text.split("/", 1)[0]
    if path is None:  # another filesystem's URI, well formed: Spark's to read or write
        scheme, _, rest = text.partition("://")
        assert re.fullmatch(r"[A-Za-z][A-Za-z0-9+.\-]+", scheme), text
        assert scheme.lower() != "file"
        assert rest.split("/", 1)[0], text  # a bucket, a container, a host
        assert not set("?#") & set(text), text
    elif ":" in first:
        assert re.match(r"(?i)file://(localhost)?/", text), text
        assert path.is_absolute()
        assert "\0" not in str(path)
    else:
        assert path == Path(text)


