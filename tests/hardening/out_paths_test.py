"""Names never escape ``--out`` (issue 29): a cluster name that is not one plain file name is a
located KQP190 error in kqplan.toml, and every path the fleet commands write is joined through
:func:`kqplan.files.inside`, so a name that reaches them another way (built in code, read from a
file) is refused before anything is written, never written outside ``--out``, and never an
internal error. The fleet summaries escape the names and client-ids they print, in text and
Markdown."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kqplan.cli.boundary import run
from kqplan.commands.fleet import (
    Engine,
    FleetFormat,
    impact_command,
    plan_command,
    rightsize_command,
    snapshot_command,
)
from kqplan.config.model import ClusterEntry, ProjectConfig
from kqplan.console import Streams
from kqplan.core.entity import Entity
from kqplan.core.errors import KqplanError
from kqplan.core.filenames import component_problem, fit_name
from kqplan.fleet.spark_tables import join_uri
from kqplan.snapshot.file import write_snapshot
from tests.helpers import run_cli, write_manifest

HOSTILE = ["../evil", "..", ".", "/", "a/b", "a\\b", "{victim}/abs", "../victim/rel", "-rf", " x", "x ",
           "a\x00b", "a\nb", "a\rb", "\x1b[31mred", "\u202eevil", "x" * 300, "é" * 120, "", "ok",
           "proposals.md", "PROPOSALS.parquet", "con", "a<!--b"]
names = st.one_of(st.sampled_from(HOSTILE),
                  st.text(alphabet=st.sampled_from("ab./\\\x00\n -é"), max_size=10),
                  st.text(alphabet=st.sampled_from("xé/."), min_size=190, max_size=260))
COMMANDS = ("snapshot", "impact", "rightsize", "plan")
SUFFIX = {"snapshot": ".json", "impact": "-utilization.png", "rightsize": "", "plan": ""}


def listing(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``root`` with its size and mtime (nanoseconds): any write shows."""
    found = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(directory, name)
            st_ = path.lstat()
            is_dir = path.is_dir() and not path.is_symlink()  # a directory's mtime changes as --out is made
            found[str(path.relative_to(root))] = (-1, 0) if is_dir else (st_.st_size, st_.st_mtime_ns)
    return found


def project(root: Path, cluster_names: list[str], key: str = "consumer_byte_rate"
            ) -> tuple[ProjectConfig, Path]:
    """Clusters under ``cluster_names`` as Python builds them (no kqplan.toml to refuse them): a
    snapshot each, one manifest layer, usage of a principal on each (JSON lines carry any name), of
    ``key`` (by default one no quota limits: impact draws no chart, which takes a second)."""
    inputs = root / "in"
    manifests = write_manifest(inputs / "m" / "q.yaml", "entities:\n  - user: a\n"
                               "    quotas: {producer_byte_rate: 2048}\n").parent
    entries = {}
    lines = []
    for i, name in enumerate(cluster_names):
        snap = inputs / f"s{i}.json"
        write_snapshot(snap, {Entity.user("a"): {"producer_byte_rate": 1024.0}}, f"id-{i}")
        entries[name] = ClusterEntry(name, id=f"id-{i}", snapshot=snap, manifests=(manifests,))
        lines += [json.dumps({"cluster": name, "user": "a", "client_id": "c", key: 4096.0,
                              "ts": t}) for t in (0, 60)]
    usage = inputs / "usage.jsonl"
    usage.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return ProjectConfig(clusters=entries), usage


def invoke(command: str, config: ProjectConfig, usage: Path, out: Path) -> tuple[int, str, str]:
    """The command through the CLI's error boundary: (exit code, stdout, stderr)."""
    out_s, err_s = io.StringIO(), io.StringIO()
    streams = Streams(out_s, err_s)
    bodies: dict[str, Callable[[], int]] = {
        "snapshot": lambda: snapshot_command(config, [], out=out, streams=streams),
        "impact": lambda: impact_command(config, [], usage=[usage], stat="max", engine=Engine.LOCAL, out=out,
                                         fmt=FleetFormat.TEXT, fail_on_throttle=False, streams=streams),
        "rightsize": lambda: rightsize_command(config, [], usage=[usage], stat="max", headroom=1.5,
                                               tolerance=0.5, mins=[], labels=[], engine=Engine.LOCAL,
                                               out=out, fmt=FleetFormat.TEXT, streams=streams),
        "plan": lambda: plan_command(config, [], engine=Engine.LOCAL, out=out, fmt=FleetFormat.TEXT,
                                     detailed_exitcode=False, streams=streams),
    }
    with contextlib.redirect_stderr(err_s):
        code = run(bodies[command])
    return code, out_s.getvalue(), err_s.getvalue()


def _bad(name: str) -> bool:
    return component_problem(fit_name(name, "")) is not None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(command=st.sampled_from(COMMANDS), drawn=st.lists(names, min_size=1, max_size=3, unique=True))
def test_no_name_writes_outside_out_and_a_refusal_is_a_clean_exit_1(command, drawn):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        victim = root / "victim"
        victim.mkdir()
        (victim / "keep.json").write_text("precious", encoding="utf-8")
        cluster_names = list(dict.fromkeys(n.replace("{victim}", str(victim)) for n in drawn))
        config, usage = project(root, cluster_names)
        out = root / "work" / "out"
        out.parent.mkdir()
        before = listing(root)
        code, stdout, stderr = invoke(command, config, usage, out)
        assert code in (0, 1), (code, stderr)
        assert "internal error" not in stderr, stderr
        assert "Traceback" not in stderr, stderr
        after = listing(root)
        outside = {p: v for p, v in after.items() if not p.startswith("work/out")}
        assert outside == before, sorted(set(outside.items()) ^ set(before.items()))
        assert (victim / "keep.json").read_text(encoding="utf-8") == "precious"
        for text in (stdout, stderr):  # every name printed escaped: no control or bidi character
            assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f\u202e]", text), text
        if command != "plan" and any(map(_bad, cluster_names)):
            assert code == 1, stdout + stderr
            assert after == before  # refused before anything was written, --out not even created
            # refused by the path check, or first by the check of rightsize's own file names
            assert stderr.startswith(("Error: cannot write ", "Error: cluster ")), stderr
            assert "cannot write " in stderr or "cannot be written to" in stderr, stderr


def test_the_reported_case_snapshot_and_impact_stay_inside(tmp_path):
    """The issue's reproduction: ``../evil`` and an absolute path as cluster names (here built
    in code, as a kqplan.toml now refuses them) wrote ``OUT/../evil.json`` and ``/abs/victim.json``."""
    victim = tmp_path / "victim"
    config, usage = project(tmp_path, ["../evil", str(victim)])
    for command in ("snapshot", "impact"):
        code, _, stderr = invoke(command, config, usage, tmp_path / "out")
        assert code == 1
        assert stderr.startswith("Error: cannot write '../evil' under ")
        assert "it contains a path separator" in stderr
    assert not (tmp_path / "evil.json").exists()
    assert not Path(f"{victim}.json").exists()
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("command", "suffix"), [("snapshot", ".json"), ("impact", "-utilization.png")])
def test_a_long_name_is_shortened_with_a_hash_inside_out(tmp_path, command, suffix):
    long = "é" * 150  # 300 bytes: over a file name's 255
    config, usage = project(tmp_path, [long], key="producer_byte_rate")
    code, stdout, stderr = invoke(command, config, usage, tmp_path / "out")
    assert code == 0, stderr
    written = [p for p in (tmp_path / "out").iterdir() if p.suffix in (".json", ".png")]
    assert [p.name for p in written] == [fit_name(long, suffix)]
    assert len(written[0].name.encode()) <= 200
    assert command == "impact" or str(written[0]) in stdout


# -- kqplan.toml refuses the names ------------------------------------------------------------------

def toml_key(name: str) -> str:
    """``name`` as a TOML basic-string key (control characters and DEL escaped)."""
    return '"' + "".join(f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7f or c in '"\\' else c
                         for c in name) + '"'


@pytest.mark.parametrize(("form", "line"), [("table", 3), ("key", 4)])
@pytest.mark.parametrize("name", ["../evil", "/abs/victim", "..", "a\x00b", "a\nb", "-x", "é" * 101, ""])
def test_kqplan_toml_refuses_a_name_that_is_not_one_file_name(tmp_path, name, form, line):
    body = (f'[clusters.ok]\nsnapshot = "ok.json"\n[clusters.{toml_key(name)}]\nsnapshot = "s.json"\n'
            if form == "table" else f'[clusters]\nok = "ID"\n\n{toml_key(name)} = "ID2"\n')
    (tmp_path / "kqplan.toml").write_text(body, encoding="utf-8")
    before = listing(tmp_path)
    result = run_cli("--config", tmp_path / "kqplan.toml", "fleet", "snapshot", "--out", tmp_path / "out")
    assert result.exit_code == 1
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"kqplan.toml:{line}:1: error[KQP190] cluster name \"")  # from its directory
    assert "\" cannot be used: " in first
    assert "= help: fleet commands write files named after each cluster under --out" in result.stderr
    assert "\x00" not in result.stderr
    assert "a\nb" not in result.stderr
    assert listing(tmp_path) == before


@pytest.mark.parametrize("via", ["plain", "schema"])
def test_both_reader_paths_refuse_the_name(tmp_path, via):
    """The hand check passes the file to the schema, which refuses it (a file the hand check does
    not take, ``bootstrap_server``, goes to the schema directly), with the other problems too."""
    extra = 'bootstrap_server = "k:9092"\n' if via == "schema" else ""
    (tmp_path / "kqplan.toml").write_text(f'[clusters."../evil"]\nid = "x"\n{extra}'
                                          '\n[clusters.b]\nmode = "raft"\n', encoding="utf-8")
    result = run_cli("--config", tmp_path / "kqplan.toml", "validate", tmp_path)
    assert result.exit_code == 1
    assert "\nkqplan.toml:1:1: error[KQP190] cluster name \"../evil\" cannot be used: it " \
        "contains a path separator" in "\n" + result.stderr  # shown from its directory, the root


def test_a_dotted_name_quoted_in_toml_is_a_plain_name_and_located_right(tmp_path):
    (tmp_path / "kqplan.toml").write_text('[clusters."eu.prod"]   # a comment\nmode = "raft"\n',
                                          encoding="utf-8")
    result = run_cli("--config", tmp_path / "kqplan.toml", "validate", tmp_path)
    assert result.stderr.startswith("kqplan.toml:2:1: error[KQP190] cluster 'eu.prod': "
                                    "mode must be kraft or zookeeper")


# -- URIs the Spark engine writes to ----------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(st.one_of(st.sampled_from(HOSTILE), st.text(max_size=12)))
def test_a_name_joined_to_a_uri_is_one_plain_name(name):
    if component_problem(name) is None:
        assert join_uri("s3a://bucket/out/", name) == "s3a://bucket/out/" + name
        return
    with pytest.raises(KqplanError) as refused:
        join_uri("s3a://bucket/out/", name)
    assert "\n" not in refused.value.message
    assert "\x00" not in refused.value.message


# -- the fleet summaries escape what they print -----------------------------------------------------

HOSTILE_CLIENTS = ["a|b", "x\ny", "<!-- hide", "`tick`", "c|`d`|<!--e-->", "\u202eevil", "@team"]


def _throttled_project(root: Path) -> tuple[ProjectConfig, Path]:
    """One cluster whose plan lowers ``{user=<default>}`` so every observed client is throttled;
    the client-ids are hostile (they come from a usage file)."""
    inputs = root / "in"
    manifests = write_manifest(inputs / "m" / "q.yaml", "entities:\n  - user: <default>\n"
                               "    quotas: {producer_byte_rate: 1024}\n").parent
    snap = inputs / "s.json"
    write_snapshot(snap, {Entity.user(None): {"producer_byte_rate": 1e9}}, "id")
    lines = [json.dumps({"cluster": "prod", "user": user, "client_id": client, "producer_byte_rate": 1e6,
                         "ts": 0}) for user, client in zip(HOSTILE_CLIENTS, HOSTILE_CLIENTS, strict=True)]
    usage = inputs / "usage.jsonl"
    usage.write_text("\n".join(lines) + "\n", encoding="utf-8")
    entry = ClusterEntry("prod", snapshot=snap, manifests=(manifests,))
    return ProjectConfig(clusters={"prod": entry}), usage


def _table_rows(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("|")]


def _cells(row: str) -> int:
    """Columns of a Markdown table row: unescaped pipes (``\\|`` is a pipe inside a cell)."""
    return len(re.findall(r"(?<!\\)\|", row)) - 1


def test_impact_markdown_keeps_its_rows_and_columns_with_hostile_client_ids(tmp_path):
    config, usage = _throttled_project(tmp_path)
    out_s, err_s = io.StringIO(), io.StringIO()
    code = impact_command(config, [], usage=[usage], stat="max", engine=Engine.LOCAL, out=tmp_path / "out",
                          fmt=FleetFormat.MARKDOWN, fail_on_throttle=False, streams=Streams(out_s, err_s))
    text = out_s.getvalue()
    assert code == 0, err_s.getvalue()
    assert "<!--" not in text
    assert "\u202e" not in text
    rows = _table_rows(text)
    assert len(rows) == 3  # header, rule, the cluster
    assert {_cells(r) for r in rows} == {7}
    assert "newly throttled" in rows[0]
    assert "none" not in rows[2]
    assert len(text.splitlines()) == 5  # heading, blank, three table lines: no name added a line


def test_impact_text_escapes_client_ids(tmp_path):
    config, usage = _throttled_project(tmp_path)
    out_s = io.StringIO()
    impact_command(config, [], usage=[usage], stat="max", engine=Engine.LOCAL, out=tmp_path / "out",
                   fmt=FleetFormat.TEXT, fail_on_throttle=False, streams=Streams(out_s, io.StringIO()))
    text = out_s.getvalue()
    assert len(text.splitlines()) == 1
    assert "\u202e" not in text
    assert "\\u202eevil" in text


def test_plan_summaries_escape_cluster_names_and_errors(tmp_path):
    """A cluster name (built in code) and an error text carrying ``|``, a newline and ``<!--``:
    the Markdown table keeps one row and six columns per cluster, the text one line each."""
    from kqplan.commands.fleet import render

    errors = {"a|b<!--x": "cannot read x|y\nforged line <!-- hidden", "`c`": "e\x1b[2J"}
    markdown = render({}, errors, 0, FleetFormat.MARKDOWN)
    assert "<!--" not in markdown
    assert "\x1b" not in markdown
    rows = _table_rows(markdown)
    assert len(rows) == 4
    assert {_cells(r) for r in rows} == {6}
    text = render({}, errors, 0, FleetFormat.TEXT)
    assert len(text.splitlines()) == 3
    assert "\x1b" not in text


def test_a_name_with_math_markup_is_drawn_as_text_in_the_chart(tmp_path):
    """A chart's title carries the cluster name: ``$}$`` was parsed as matplotlib's math
    markup (an internal error); it is text."""
    config, usage = project(tmp_path, ["a$}$b"], key="producer_byte_rate")
    code, _, stderr = invoke("impact", config, usage, tmp_path / "out")
    assert code == 0, stderr
    assert (tmp_path / "out" / "a$}$b-utilization.png").is_file()
