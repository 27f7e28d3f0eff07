"""``kqplan init`` and the KQP191 hints, round three (issue 41): the ``kqplan.toml`` init writes
reads back through kqplan's own reader, whatever the names (a TOML writer, never JSON's escapes);
init checks the whole layout — layers shared or nested included — before it writes anything; and
the hint for a missing layer after the first makes an empty layer, not a second export."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from kqplan.config.reader import read_config
from kqplan.core.entity import Entity
from kqplan.core.filenames import component_problem
from kqplan.sandbox import Sandbox, SandboxConfig
from tests.helpers import Result, run_cli, write_manifest

PROD_SEED = {Entity.user("alice"): {"producer_byte_rate": 1000.0},
             Entity.user(None): {"consumer_byte_rate": 2000.0}}
STAGING_SEED = {Entity.user("carol"): {"producer_byte_rate": 10.0}}
HOSTILE_ID = 'ID-"\\🚀\u202e'
"""A cluster id with what TOML must escape, an emoji and a bidi mark: written and read back."""


@pytest.fixture(scope="module")
def prod() -> Iterator[Sandbox]:
    with Sandbox.start(SandboxConfig(port=0, cluster_id=HOSTILE_ID, seed=PROD_SEED)) as box:
        yield box


@pytest.fixture(scope="module")
def staging() -> Iterator[Sandbox]:
    with Sandbox.start(SandboxConfig(port=0, cluster_id="STAGING-ID", seed=STAGING_SEED)) as box:
        yield box


def tree(root: Path) -> dict[str, bytes | None]:
    """Everything under ``root``: each file's bytes, each directory (None), each symlink's target."""
    found: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        name = path.relative_to(root).as_posix()
        found[name] = (os.readlink(path).encode() if path.is_symlink() else
                       path.read_bytes() if path.is_file() else None)
    return found


def no_traceback(result: Result) -> None:
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    assert result.exit_code in (0, 1), result


def no_changes(name: str) -> None:
    result = run_cli("plan", "--cluster", name, "--detailed-exitcode")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "No changes." in result.stdout, result.stdout


# -- 1. the kqplan.toml init writes is TOML kqplan reads ------------------------------------------

HOSTILE = '🚀"\'\\ \x00\n\x1b\x7f\u202e\u200b\udc80ßsSK\u212a.-_=${}`#[]ä\u0301'
NAMES = st.one_of(st.text(min_size=1, max_size=12),
                  st.text(alphabet=st.sampled_from(HOSTILE + "prod"), min_size=1, max_size=8))


def refused(names: list[str]) -> bool:
    """Whether init must refuse these names: a name that cannot be a cluster's (the reader's
    rule), or two that differ only in case."""
    folded = [n.casefold() for n in names]
    return (any(component_problem(n) is not None for n in names)
            or len(set(folded)) != len(folded))


@example(names=["prod-🚀"])
@example(names=["ß", "ss"])
@example(names=['a"b', "c'd", "e\\f"])
@example(names=["true", "1.5", "a.b", "[x]", "#c", "é", "e\u0301"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(names=st.lists(NAMES.filter(lambda n: "=" not in n), min_size=1, max_size=3))
def test_init_writes_a_kqplan_toml_that_reads_back_with_the_same_names(tmp_path_factory, prod, names):
    root = tmp_path_factory.mktemp("init")
    args = [a for name in names for a in ("--cluster", f"{name}={prod.bootstrap}")]
    with contextlib.chdir(root):
        result = run_cli("init", *args, "--timeout", "10s")
    no_traceback(result)
    if refused(names):
        assert result.exit_code == 1, result
        assert "Error: " in result.stderr
        assert tree(root) == {}  # refused before anything is written
        return
    assert result.exit_code == 0, result.stderr
    config = read_config(root / "kqplan.toml")  # no KQP190: every name as it was given
    assert list(config.clusters) == names
    for name in names:
        entry = config.clusters[name]
        assert entry.bootstrap == prod.bootstrap
        assert entry.id == HOSTILE_ID
        assert entry.manifests == ((root / "quotas" / name).resolve(),)
        assert entry.manifests[0].is_dir()


def test_an_adopted_cluster_with_an_emoji_in_its_name_plans_clean(tmp_path, monkeypatch, prod):
    monkeypatch.chdir(tmp_path)
    properties = tmp_path / 'client "🚀" \\ #.properties'
    properties.write_text("client.id = init-test\n")
    result = run_cli("init", "--cluster", f"prod-🚀={prod.bootstrap}", "--command-config", properties)
    assert result.exit_code == 0, result.stderr
    entry = read_config(tmp_path / "kqplan.toml").clusters["prod-🚀"]
    assert entry.command_config == properties
    assert entry.id == HOSTILE_ID
    no_changes("prod-🚀")
    validate = run_cli("validate", "--cluster", "prod-🚀")
    assert validate.exit_code == 0, validate.stderr


def test_a_path_kqplan_toml_cannot_hold_is_refused_before_anything_is_written(tmp_path, monkeypatch, prod):
    outside = tmp_path / "outside"
    outside.mkdir()
    properties = Path(os.fsdecode(bytes(outside) + b"/client-\xff.properties"))  # not UTF-8
    properties.write_text("client.id = init-test\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    monkeypatch.chdir(repo)
    result = run_cli("init", "--cluster", f"prod={prod.bootstrap}", "--command-config", properties)
    no_traceback(result)
    assert result.exit_code == 1
    assert "kqplan.toml is UTF-8" in result.stderr
    assert "client-\\udcff.properties" in result.stderr  # shown escaped
    assert tree(repo) == {}


# -- 2. all or nothing, layers included -----------------------------------------------------------

def inventory(repo: Path, layers: dict[str, tuple[str, ...]], boxes: dict[str, Sandbox]) -> None:
    text = "".join(f'[clusters.{name}]\nbootstrap-server = "{boxes[name].bootstrap}"\n'
                   f"manifests = [{', '.join(f'{chr(34)}{m}{chr(34)}' for m in listed)}]\n\n"
                   for name, listed in layers.items())
    (repo / "kqplan.toml").write_text(text)


def test_a_shared_first_layer_is_refused_before_anything_is_written(tmp_path, monkeypatch, prod, staging):
    monkeypatch.chdir(tmp_path)
    inventory(tmp_path, {"prod": ("base", "overlays/prod"), "staging": ("base", "overlays/staging")},
              {"prod": prod, "staging": staging})
    before = tree(tmp_path)
    result = run_cli("init")
    no_traceback(result)
    assert result.exit_code == 1
    assert ("Error: init would export cluster prod into base, which cluster staging lists too"
            in result.stderr), result.stderr
    assert "give each cluster a first layer of its own" in result.stderr
    assert "kqplan import" in result.stderr
    assert tree(tmp_path) == before  # nothing written: not base/, not overlays/
    again = run_cli("init")  # and so a second run says the same, not "base exists"
    assert "which cluster staging lists too" in again.stderr
    assert tree(tmp_path) == before


@pytest.mark.parametrize(("layers", "message"), [
    ({"prod": ("quotas/prod",), "staging": ("quotas/staging", "quotas/prod")},
     "init would export cluster prod into quotas/prod, which cluster staging lists too"),
    ({"prod": ("quotas",), "staging": ("quotas/staging",)},
     "init would write quotas/staging inside quotas"),
    ({"prod": ("quotas/prod", "overlays"), "staging": ("quotas/staging", "overlays/staging")},
     "init would write overlays/staging inside overlays"),
    ({"prod": ("kqplan.toml/x",), "staging": ("quotas/staging",)},
     "init cannot write kqplan.toml/x: kqplan.toml is not a directory"),
])
def test_layers_in_each_other_s_way_are_refused_before_anything_is_written(
        tmp_path, monkeypatch, prod, staging, layers, message):
    monkeypatch.chdir(tmp_path)
    inventory(tmp_path, layers, {"prod": prod, "staging": staging})
    before = tree(tmp_path)
    result = run_cli("init")
    no_traceback(result)
    assert result.exit_code == 1
    assert message in result.stderr, result.stderr
    assert tree(tmp_path) == before


def test_a_dangling_symlink_in_a_later_layer_s_place_is_refused_before_anything_is_written(
        tmp_path, monkeypatch, prod):
    monkeypatch.chdir(tmp_path)
    inventory(tmp_path, {"prod": ("quotas/prod", "overlays/prod")}, {"prod": prod})
    (tmp_path / "overlays").mkdir()
    (tmp_path / "overlays/prod").symlink_to(tmp_path / "nowhere")
    before = tree(tmp_path)
    result = run_cli("init")
    no_traceback(result)
    assert result.exit_code == 1
    assert "init refuses to write into overlays/prod: it exists" in result.stderr, result.stderr
    assert tree(tmp_path) == before


def test_a_write_that_fails_leaves_nothing_behind(tmp_path, monkeypatch, prod, staging):
    monkeypatch.chdir(tmp_path)
    too_long = "overlays/" + "x" * 300  # the file system refuses it, after the exports' directories
    inventory(tmp_path, {"prod": ("quotas/prod", too_long), "staging": ("quotas/staging",)},
              {"prod": prod, "staging": staging})
    before = tree(tmp_path)
    result = run_cli("init")
    no_traceback(result)
    assert result.exit_code == 1
    assert "Error: init could not write" in result.stderr, result.stderr
    assert tree(tmp_path) == before  # not quotas/prod, not quotas/staging, not overlays/


def test_names_the_file_system_refuses_are_errors_before_anything_is_written(tmp_path, monkeypatch, prod):
    monkeypatch.chdir(tmp_path)
    result = run_cli("init", "--cluster", f"prod={prod.bootstrap}", "--layers", "x" * 300)
    no_traceback(result)
    assert result.exit_code == 1
    assert "Error: init cannot write xxx" in result.stderr
    assert "File name too long" in result.stderr
    assert tree(tmp_path) == {}
    (tmp_path / "o").mkdir()
    inventory(tmp_path, {"prod": ("q", "o/" + "x" * 300)}, {"prod": prod})
    before = tree(tmp_path)
    for command in ("validate", "init"):
        result = run_cli(command)
        no_traceback(result)
        assert result.exit_code == 1
        assert "error[KQP190] cluster 'prod': manifests layer 'o/xxx" in result.stderr
        assert "cannot be used: File name too long" in result.stderr
    assert tree(tmp_path) == before


POOL = ("base", "base/prod", "overlays", "overlays/prod", "overlays/staging", "quotas/prod",
        "quotas/staging", "common", "kqplan.toml/x")


@example(prod_layers=["quotas/prod", "overlays/prod"], staging_layers=["quotas/staging", "overlays/staging"],
         existing=[])
@example(prod_layers=["quotas/prod", "common"], staging_layers=["quotas/staging", "common"],  # shared
         existing=[])
@example(prod_layers=["base", "overlays/prod"], staging_layers=["base", "overlays/staging"], existing=[])
@example(prod_layers=["quotas/prod", "overlays/prod"], staging_layers=["quotas/staging"],
         existing=["quotas/prod"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prod_layers=st.lists(st.sampled_from(POOL), min_size=1, max_size=3, unique=True),
       staging_layers=st.lists(st.sampled_from(POOL), min_size=1, max_size=3, unique=True),
       existing=st.lists(st.sampled_from(POOL[:-1]), max_size=2, unique=True))
def test_init_writes_a_working_layout_or_nothing(tmp_path_factory, prod, staging, prod_layers,
                                                 staging_layers, existing):
    """``existing``: layers already there (an empty manifest each, for any cluster)."""
    repo = tmp_path_factory.mktemp("layout")
    for layer in existing:
        write_manifest(repo / layer / "mine.yaml", "entities: []\n")
    inventory(repo, {"prod": tuple(prod_layers), "staging": tuple(staging_layers)},
              {"prod": prod, "staging": staging})
    before = tree(repo)
    with contextlib.chdir(repo):
        result = run_cli("init")
        no_traceback(result)
        event("refused" if result.exit_code else "written")
        if result.exit_code != 0:
            assert "Error: " in result.stderr
            assert tree(repo) == before, result.stderr
            return
        assert not {prod_layers[0], staging_layers[0]} & set(existing)  # init exports into new layers only
        after = tree(repo)
        assert {name: after.get(name) for name in before} == before  # and never overwrites
        no_changes("prod")
        no_changes("staging")


# -- 3. KQP191: a missing layer after the first is made empty, not exported again -------------------

def hinted_command(text: str) -> str:
    """The shell command a hint gives (between backticks: ``mkdir -p … && printf …``)."""
    found = re.search(r"`((?:mkdir -p [^`]*&& )?printf [^`]*)`", text)
    assert found, text
    return found[1]


def test_a_missing_first_layer_is_exported(tmp_path, monkeypatch, prod):
    monkeypatch.chdir(tmp_path)
    inventory(tmp_path, {"prod": ("base", "overlays/prod")}, {"prod": prod})
    write_manifest(tmp_path / "overlays/prod/o.yaml", "cluster: prod\nentities: []\n")
    plan = run_cli("plan", "--cluster", "prod")
    assert plan.exit_code == 1
    assert "Error: cluster 'prod': manifests layer 'base' does not exist" in plan.stderr
    assert "`kqplan export --cluster prod --out base` writes it from the cluster" in plan.stderr
    validate = run_cli("validate", "--cluster", "prod")
    assert "error[KQP191] cluster 'prod': manifests layer 'base' does not exist" in validate.stderr
    assert "`kqplan export --cluster prod --out base` writes it from the cluster" in validate.stderr
    assert run_cli("export", "--cluster", "prod", "--out", "base").exit_code == 0
    no_changes("prod")


@pytest.mark.parametrize(("name", "later"), [
    ("prod", "overlays/prod"),
    ("it's 🚀", "overlays/it's 🚀"),
    ("true", "overrides.yaml"),  # a layer may be one file
])
@pytest.mark.parametrize("command", ["plan", "validate"])
def test_a_missing_later_layer_is_made_empty_and_the_hint_works_verbatim(
        tmp_path, monkeypatch, prod, name, later, command):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kqplan.toml").write_text(
        f'[clusters."{name}"]\nbootstrap-server = "{prod.bootstrap}"\nmanifests = ["base", "{later}"]\n')
    assert run_cli("export", "--cluster", name, "--out", "base").exit_code == 0
    result = run_cli(command, "--cluster", name)
    assert result.exit_code == 1
    assert f"cluster '{name}': manifests layer '{later}' does not exist" in result.stderr
    assert "kqplan export" not in result.stderr  # an export there lists every entity twice (KQP102)
    assert "kqplan import" in result.stderr
    subprocess.run(["sh", "-c", hinted_command(result.stderr)], cwd=tmp_path, check=True, timeout=30)
    no_changes(name)
    assert run_cli("validate", "--cluster", name).exit_code == 0


def test_the_id_line_init_suggests_is_toml_that_reads_back(tmp_path, monkeypatch, prod):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kqplan.toml").write_text(
        f'[clusters."it\'s 🚀"]\nbootstrap-server = "{prod.bootstrap}"\nmanifests = ["quotas/x"]\n')
    result = run_cli("init")
    assert result.exit_code == 0, result.stderr
    note = re.search(r"note: (\[clusters\..*\]) records no id; add (id = .*) so that", result.stderr)
    assert note, result.stderr
    assert tomllib.loads(f"{note[1]}\n{note[2]}\n") == {"clusters": {"it's 🚀": {"id": HOSTILE_ID}}}
