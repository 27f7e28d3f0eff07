"""Whatever a name, a file name, a cluster name or a message holds, it is escaped for where it lands:
a PR comment or job summary (Markdown), a workflow command (GitHub annotations), a terminal.

Hostile text is generated (hypothesis) from the pieces that once forged output: ``<!--`` (which hid
every later change, and can carry the sticky comment's marker), new lines, fences, pipes,
``</details>``, bidi and ESC characters, and workflow command syntax. Rendered Markdown is parsed
with a CommonMark parser (markdown-it, tables on): a hostile rendering must have the block
structure of a plain one — no heading, list item, row or HTML block of its own — and show the
text exactly."""

from __future__ import annotations

import html
import re
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from kqplan.core.diagnostics import Diagnostic, Related, Severity, Span, render_text
from kqplan.core.entity import Entity, visible
from kqplan.core.impact import blast_radius
from kqplan.core.ownership import Ownership, ScopePattern
from kqplan.core.plan import ClusterRef, Plan, apply_ops, diff
from kqplan.core.principals import Principal
from kqplan.fleet.proposals import ClusterResult, markdown_view
from kqplan.fleet.proposals import render_text as proposals_text
from kqplan.fleet.rightsize import ProposalRow, Rules, target
from kqplan.render.escape import (
    github_data,
    github_property,
    markdown_block,
    markdown_cell,
    markdown_code,
    markdown_text,
)
from kqplan.render.github import render_plan_github
from kqplan.render.impact import render_impact_text
from kqplan.render.markdown import render_markdown
from kqplan.render.proposals import render_markdown as proposals_markdown
from kqplan.render.text import render_text as plan_text
from tests.helpers import run_cli, write_manifest

MARKER = "<!-- Sticky Pull Request Commentkqplan-prod -->"
PIECES = [MARKER, "<!--", "-->", "\n", "\r\n", "\r", "`", "```", "````", "|", "\\|", "\\", "</details>",
          "<details>", "</pre>", "<code>", "\u202e", "\u2066", "\u200b", "\x1b[31m", "\x1b]8;;x\x07", "\x00",
          "\t", "\u2028", "\x85", "# ", "### kqplan: no changes", "- ", "+ ", "1. ", "    ", "=", "::error::",
          "::warning file=x::", "%0A", "%25", ",", ":", "*", "_", "[x](y)", "]", "@team", "&amp;", "<", ">",
          "~~", "!", " "]
hostile = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=3)), min_size=1,
                   max_size=6).map("".join)
FAST = settings(max_examples=60, deadline=None)

MD = MarkdownIt("commonmark", {"html": True}).enable("table").enable("strikethrough")


def structure(text: str) -> list[tuple[str, str]]:
    """The Markdown's block structure: every block token (paragraphs, headings, lists, table rows
    and cells, HTML blocks), without the inline content."""
    return [(t.type, t.tag) for t in MD.parse(text) if t.type != "inline"]


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def shown(text: str) -> str:
    """What a reader sees of rendered Markdown: the HTML's text, references decoded."""
    parser = _Text()
    parser.feed(MD.render(text))
    return "".join(parser.parts)


def words(text: str) -> list[str]:
    """Text compared the way a reader compares it: spaces at the ends of a paragraph, a cell or a
    code span are not shown."""
    return text.split()


def cells(row: str) -> int:
    """Cells of a table row as GFM splits it (a pipe after a backslash is part of a cell)."""
    return len(re.split(r"(?<!\\)\|", row.strip().strip("|"))) if row.startswith("|") else 0


def assert_tables_keep_their_columns(text: str) -> None:
    width = 0
    for line in text.splitlines():
        if not line.startswith("|"):
            width = 0
            continue
        width = width or cells(line)
        assert cells(line) == width, line


def assert_safe_markdown(text: str) -> None:
    assert "<!--" not in text
    assert all(ch.isprintable() or ch == "\n" for ch in text), [ch for ch in text if not ch.isprintable()]
    assert_tables_keep_their_columns(text)


# -- the escaping functions ----------------------------------------------------------------------

@FAST
@given(hostile)
def test_markdown_inline_functions_keep_one_line_and_show_the_text_exactly(text):
    for escaped in (markdown_text(text), markdown_cell(text), markdown_code(text),
                    markdown_code(text, cell=True)):
        assert "<!--" not in escaped
        assert escaped.isprintable()  # one line
    # in a paragraph, and as the one cell of a table row: the text exactly, in one block or cell
    assert structure(f"x {markdown_text(text)}") == structure("x y")
    assert words(shown(f"x {markdown_text(text)}")) == words(f"x {visible(text)}")
    assert words(shown(f"x {markdown_code(text)}")) == words(f"x {visible(text)}")
    for escaped in (markdown_cell(text), markdown_code(text, cell=True)):
        table = f"| a |\n|---|\n| {escaped} |\n"
        assert structure(table) == structure("| a |\n|---|\n| b |\n")
        assert cells(f"| {escaped} |") == 1


@FAST
@given(hostile.filter(bool))
def test_text_at_the_start_of_a_list_item_opens_no_block(text):
    note = f"> - {markdown_text(text)}\n"
    assert structure(note) == structure("> - y\n")
    assert words(shown(note)) == words(visible(text))


@FAST
@given(st.lists(hostile, min_size=1, max_size=4).map("\n".join))
def test_a_block_is_one_pre_element_whatever_its_lines(text):
    block = markdown_block(text)
    assert "<!--" not in block
    assert block.count("<pre>") == block.count("</pre>") == 1
    assert [t.type for t in MD.parse(f"{block}\n\n### after\n")] == \
        ["html_block", "heading_open", "inline", "heading_close"]  # no heading of its own, nothing hidden
    inner = block.removeprefix("<pre>\n").removesuffix("\n</pre>")
    assert html.unescape(inner) == "\n".join(visible(line) for line in text.splitlines())


@FAST
@given(hostile)
def test_workflow_command_values_stay_on_their_line(text):
    prop, data = github_property(text), github_data(text)
    assert prop.isprintable()
    assert not re.search(r"[,:]", prop)
    assert data.isprintable()

    def decode(s: str) -> str:
        return s.replace("%0A", "\n").replace("%0D", "\r").replace("%3A", ":").replace("%2C", ",") \
            .replace("%25", "%")

    assert decode(prop) == visible(text)
    assert decode(data) == "\n".join(visible(line) for line in text.split("\n"))


# -- a plan, everywhere it is rendered ---------------------------------------------------------

def hostile_plan(name: str, file: str, cluster: str, note: str) -> Plan:
    """A change of every kind named ``name`` (a quota key too), from manifest ``file``, on cluster
    ``cluster``, with a note, an unmanaged entity and a principal in the blast radius."""
    # two rows in each change's table: the changes may sort in any order, the shape is the same
    desired = {Entity.user(name): {"producer_byte_rate": 1.0, name: 2.0},
               Entity.user("plain"): {"producer_byte_rate": 5.0, "consumer_byte_rate": 6.0},
               Entity.user_client(name, name): {"consumer_byte_rate": 3.0, "producer_byte_rate": 4.0}}
    actual = {Entity.user_client(name, name): {"consumer_byte_rate": 9.0},
              Entity.client(name): {"request_percentage": 1.0},
              Entity.ip(name): {"connection_creation_rate": 1.0}}
    own = Ownership.of([(True, [ScopePattern.of({"client-id": "*"})])])
    plan = diff(desired, actual, own, cluster=ClusterRef(cluster, f"{cluster}:9092", "3.9", "kraft"),
                fingerprint=None, origin=lambda e: f"{file}:3:5 (overrides {file}:1:1)")
    return replace(plan, notes=(note, f"{file}:4:7: warning[KQP170] {note}"))


def renderings(name: str, file: str, cluster: str, note: str) -> tuple[str, str, str, str]:
    plan = hostile_plan(name, file, cluster, note)
    actual = {Entity.user_client(name, name): {"consumer_byte_rate": 9.0}}
    who = [Principal(name, name), Principal("p", "")]
    impact = blast_radius(actual, apply_ops(actual, plan.changes), who)
    warning = Diagnostic("KQP170", note, Span(file, 4, 7), Severity.WARNING, hint=note,
                         related=(Related(Span(file, 1, 1), note),))
    return (render_markdown(plan, impact=impact, artifact=file), render_plan_github(plan, [warning]),
            plan_text(plan) + render_impact_text(impact), render_text([warning]))


PLAIN = renderings("name", "q.yaml", "c1", "a note")


@FAST
@given(hostile.filter(bool), hostile, hostile, hostile.filter(bool))  # kqplan has no empty name nor note
def test_a_plan_renders_the_same_shape_whatever_its_names(name, file, cluster, note):
    markdown, github, text, diagnostics = renderings(name, file, cluster, note)
    assert_safe_markdown(markdown)
    assert structure(markdown) == structure(PLAIN[0])
    seen = shown(markdown)
    for part in (Entity.user(name).display, visible(file), visible(note)):
        assert part in seen or part.strip() in seen
    # annotations: one line each, the same ones, every property escaped
    assert len(github.splitlines()) == len(PLAIN[1].splitlines())
    for line in github.splitlines():
        assert re.fullmatch(r"::(notice|warning|error) title=[^,:]+(,file=[^,:]*(,line=\d+,col=\d+)?)?::.*",
                            line), line
    # terminal: every character printable, no line of its own
    for rendered, plain in ((text, PLAIN[2]), (diagnostics, PLAIN[3])):
        assert all(line.isprintable() for line in rendered.splitlines())
        assert len(rendered.splitlines()) == len(plain.splitlines())


def test_a_file_name_cannot_hide_the_changes_after_it_or_carry_a_marker():
    name = f"q.yaml\n{MARKER}\n<!--"
    markdown, github, text, diagnostics = renderings("a", name, "c1", "a note")
    assert "<!--" not in markdown
    assert structure(markdown) == structure(PLAIN[0])
    assert markdown.count("#### `") == PLAIN[0].count("#### `")
    assert len(github.splitlines()) == len(PLAIN[1].splitlines())
    assert ",file=q.yaml\\n<!-- Sticky Pull Request Commentkqplan-prod -->\\n<!--,line=3,col=5::" in github
    assert "  # q.yaml\\n<!-- Sticky" in text
    assert len(text.splitlines()) == len(PLAIN[2].splitlines())
    assert diagnostics.startswith(f"q.yaml\\n{MARKER}\\n<!--:4:7: warning")


@pytest.mark.parametrize("path", ["bidi\u202eevil.yaml", "esc\x1b[2J.yaml", "new\nline.yaml"])
def test_paths_are_escaped_in_text_output(path):
    _, _, text, diagnostics = renderings("a", path, "c1", "n")
    assert any(line.endswith(f"  # {visible(path)}:3:5 (overrides {visible(path)}:1:1)")
               for line in text.splitlines())
    assert diagnostics.splitlines()[0] == f"{visible(path)}:4:7: warning[KQP170] n"
    assert all(line.isprintable() for line in text.splitlines() + diagnostics.splitlines())


# -- fleet rightsize's proposals ----------------------------------------------------------------

def proposals(cluster: str, user: str, client: str, error: str) -> list[ClusterResult]:
    bucket = target(user, client).display
    row = ProposalRow(cluster, user, client, "producer_byte_rate", 10.0, bucket, 10.0, 15.0, 16.0, 8.0,
                      bucket, "raise", 16.0, bucket)
    return [ClusterResult(cluster, [row], Path(f"out/{cluster}/rightsize.yaml")),
            ClusterResult(f"{cluster}-down", error=error)]


RULES = Rules.of(stat="p99", headroom=1.5, tolerance=0.5)
PLAIN_PROPOSALS = proposals("c1", "u", "c", "e")


@FAST
@given(hostile, hostile, hostile, hostile)
def test_fleet_proposals_render_the_same_shape_whatever_their_names(cluster, user, client, error):
    results = proposals(cluster, user, client, error)
    markdown = proposals_markdown(markdown_view(results, RULES))
    assert_safe_markdown(markdown)
    assert structure(markdown) == structure(proposals_markdown(markdown_view(PLAIN_PROPOSALS, RULES)))
    seen = shown(markdown)
    assert visible(cluster) in seen
    assert visible(error).strip() in seen
    assert target(user, client).display in seen
    text = proposals_text(results, Path("out/proposals.parquet"))
    assert all(line.isprintable() for line in text.splitlines())
    assert len(text.splitlines()) == len(proposals_text(PLAIN_PROPOSALS, Path("out/proposals.parquet"))
                                         .splitlines())


def test_a_cluster_named_like_a_marker_or_a_row_stays_in_its_cell():
    results = proposals(f"prod |{MARKER}\n| x | y |", "u", "c", "down\n### kqplan: no changes")
    markdown = proposals_markdown(markdown_view(results, RULES))
    assert "<!--" not in markdown
    assert "### kqplan: no changes" not in markdown.splitlines()
    assert_tables_keep_their_columns(markdown)
    assert "| <code>prod &#124;&#60;&#33;&#45;&#45; Sticky" in markdown
    assert "| down\\\\n### kqplan: no changes |" in markdown


# -- through the command line -------------------------------------------------------------------

def test_validate_writes_a_file_name_as_one_annotation_property(tmp_path):
    # a new line in a file name wrote a second, forged annotation
    folder = tmp_path / "m"
    write_manifest(folder / "a\n::error file=x.yaml::forged,.yaml", "entities:\n  - user: a\n"
                   "    quotas: {producer_byte_rat: 1}\n")
    result = run_cli("validate", folder, "--format", "github")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("::error title=kqplan KQP110,file=")
    assert "/a\\n%3A%3Aerror file=x.yaml%3A%3Aforged%2C.yaml,line=5,col=14::unknown quota key" in lines[0]


def test_diagnostics_in_text_escape_the_file_name_and_the_manifest_text_they_echo(tmp_path):
    folder = tmp_path / "m"
    write_manifest(folder / "esc\x1b[2J\u202e.yaml", 'entities:\n  - user: a\n    "k\\n### h\\u202e": 1\n'
                   "    quotas: {producer_byte_rate: 1}\n")
    result = run_cli("validate", folder)
    assert result.exit_code == 1
    first = result.stdout.splitlines()[0]
    assert first == (f"{folder}/esc\\x1b[2J\\u202e.yaml:5:5: error[KQP020] unknown field 'k\\n### h\\u202e' "
                     "in entity")


def test_plan_markdown_of_a_hostile_file_name_shows_every_change(tmp_path):
    folder = tmp_path / "m"
    write_manifest(folder / f"a\n{MARKER}\n<!--.yaml", "entities:\n  - user: first\n"
                   "    quotas: {producer_byte_rate: 1}\n")
    write_manifest(folder / "b.yaml", "entities:\n  - user: later\n    quotas: {producer_byte_rate: 1}\n")
    snapshot = tmp_path / "s.json"
    snapshot.write_text('{"format_version": 1, "cluster_id": "c", "entities": []}')
    md = run_cli("plan", folder, "--state", snapshot, "--format", "markdown")
    assert md.exit_code == 0, md.stderr
    assert "<!--" not in md.stdout
    seen = shown(md.stdout)
    assert "{user=first}" in seen
    assert "{user=later}" in seen  # once, the file name's "<!--" hid every change after it
    assert f"a\\n{MARKER}\\n<!--.yaml" in seen
