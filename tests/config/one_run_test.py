"""Issue 32 §4: kqplan.toml's problems in one run, in kqplan's words. Every problem of the file
(unknown keys, wrong types, missing layers, bad units, bad cluster names, unknown quota keys) is
reported at once, sorted by position, never in pydantic's wording; the file is kept as far as it
is valid, so that ``validate`` and ``plan`` report the manifests' problems and warnings (``User:``
names, ``<default>`` near-misses, wildcards) in the same run."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kqplan.config.find import find_config, load_config
from kqplan.config.reader import check_config
from kqplan.config.schema import checked_document, validate_document
from kqplan.core.diagnostics import DiagnosticsError
from tests.config.plain_test import FULL, _spots, any_documents, corrupted_documents, near_misses
from tests.helpers import run_cli, shown, write_manifest

PYDANTIC_WORDS = ("Input should", "validation error", "pydantic", "Field required", "Extra inputs",
                  "For further information", "errors.pydantic.dev")

CONFIG = """\
[clusters.prod]
snapshot = "s.json"
manifests = ["m", "overlays/prod"]
bootstrap = "k:9092"

[clusters."../evil"]
id = "x"

[policy]
max-delete = "ten"
required-keys = ["producer_byte_rat"]

[policy.keys.producer_byte_rate]
min = "10XB"
"""
"""Six problems of six kinds, none of which hides another."""

CONFIG_PROBLEMS = [
    (3, "error[KQP191] cluster 'prod': manifests layer 'overlays/prod' does not exist"),
    (4, "error[KQP190] unknown key 'bootstrap' in [clusters.prod]"),
    (6, "error[KQP190] cluster name \"../evil\" cannot be used: it contains a path separator"),
    (10, "error[KQP190] policy.max-delete: must be a whole number ≥ 0, not 'ten'"),
    (11, "error[KQP190] policy.required-keys: unknown quota key 'producer_byte_rat'"),
    (14, "error[KQP190] policy.keys.producer_byte_rate.min: unknown byte unit 'XB' in '10XB'"),
]

MANIFEST = """\
entities:
  - user: "User:judy"
    quotas: {producer_byte_rate: 1MiB}
  - user: default
    quotas: {producer_byte_rate: 1MiB}
  - client-id: "*"
    quotas: {producer_byte_rate: 1MiB}
  - user: alice
    quotas: {producer_byte_rat: 1MiB}
"""
MANIFEST_PROBLEMS = [
    "4:11: warning[KQP172] user 'User:judy' will never match",
    "6:11: warning[KQP173] user 'default' is a name, not the default user",
    "8:16: warning[KQP174] client-id '*' is a name, not a wildcard",
    "11:14: error[KQP110] unknown quota key 'producer_byte_rat'",
]


def project(tmp_path: Path, config: str = CONFIG, manifest: str = MANIFEST) -> tuple[Path, Path]:
    (tmp_path / "kqplan.toml").write_text(config, encoding="utf-8")
    write_manifest(tmp_path / "m" / "q.yaml", manifest)
    return tmp_path / "kqplan.toml", tmp_path / "m"


def assert_config_problems(text: str, toml: Path, *, planning: bool = False) -> None:
    """Every problem of CONFIG, located, in the order of the file, and no pydantic wording
    (``planning``: a plan of other paths than prod's is not stopped by prod's layer not being
    written yet: that is validate's to report, and plan --cluster prod's). The file is shown
    from the repository root, its directory (issue 43)."""
    name = shown(toml, toml.parent)
    lines = [line for line in text.splitlines() if line.startswith(f"{name}:")]
    expected = [(n, m) for n, m in CONFIG_PROBLEMS if not (planning and "KQP191" in m)]
    assert lines == [f"{name}:{n}:1: {message}" for n, message in expected], text
    assert not any(word in text for word in PYDANTIC_WORDS), text
    assert "= help: did you mean 'bootstrap-server'?" in text
    assert "= help: did you mean 'producer_byte_rate'?" in text
    assert "Traceback" not in text
    assert "internal error" not in text


def test_every_problem_of_kqplan_toml_in_one_validate_run(tmp_path):
    toml, manifests = project(tmp_path)
    result = run_cli("--config", toml, "validate", manifests)
    assert result.exit_code == 1
    assert_config_problems(result.stderr, toml)
    assert result.stdout == ""


def test_every_problem_of_kqplan_toml_in_one_plan_run(tmp_path):
    toml, manifests = project(tmp_path)
    result = run_cli("--config", toml, "plan", manifests, "--sandbox")
    assert result.exit_code == 1
    assert_config_problems(result.stderr, toml, planning=True)


@pytest.mark.parametrize("command", [("validate",), ("plan", "--sandbox")])
def test_the_files_problems_and_the_manifests_in_one_run(tmp_path, command):
    """kqplan.toml's errors, the manifest's error and its three warnings: all in one run."""
    toml, manifests = project(tmp_path)
    result = run_cli("--config", toml, command[0], manifests, *command[1:])
    assert result.exit_code == 1
    assert_config_problems(result.stderr, toml, planning=command[0] == "plan")
    q = shown(manifests / "q.yaml", tmp_path)  # m/q.yaml: from the root, kqplan.toml's directory
    located = [line.removeprefix(f"{q}:") for line in result.stderr.splitlines() if line.startswith(f"{q}:")]
    assert [s for s in located if s.startswith(tuple(p.split(" ")[0] for p in MANIFEST_PROBLEMS))] == located
    for expected in MANIFEST_PROBLEMS:
        assert any(s.startswith(expected) for s in located), (expected, result.stderr)


def test_validate_cluster_reads_the_layers_that_exist(tmp_path):
    toml, _ = project(tmp_path)
    result = run_cli("--config", toml, "validate", "--cluster", "prod")
    assert result.exit_code == 1
    assert_config_problems(result.stderr, toml)
    assert "warning[KQP172] user 'User:judy'" in result.stderr
    broken = run_cli("--config", toml, "validate", "--cluster", "../evil")  # left out: the file says why
    assert broken.exit_code == 1
    assert_config_problems(broken.stderr, toml)


def test_manifest_warnings_stay_beside_manifest_errors(tmp_path):
    _, manifests = project(tmp_path, config="")
    result = run_cli("validate", manifests)
    assert result.exit_code == 1
    for expected in MANIFEST_PROBLEMS:  # m/q.yaml: from kqplan.toml's directory, the root
        assert f"\n{shown(manifests / 'q.yaml', tmp_path)}:{expected}" in "\n" + result.stdout, result.stdout
    assert result.stdout.endswith("Found 1 error(s) and 3 warning(s).\n")
    planned = run_cli("plan", manifests, "--sandbox")
    assert planned.exit_code == 1
    assert "warning[KQP172] user 'User:judy'" in planned.stderr


def test_the_file_is_kept_as_far_as_it_is_valid(tmp_path):
    toml, manifests = project(tmp_path)
    config, problems = check_config(toml)
    assert [(p.span.line, p.code) for p in problems] == [(n, m.split("[")[1][:6]) for n, m in CONFIG_PROBLEMS]
    assert list(config.clusters) == ["prod"]  # "../evil" left out
    # the layer not written yet is kept (export, import and init create it; validate reads the other)
    assert config.clusters["prod"].manifests == (manifests.resolve(), (tmp_path / "overlays/prod").resolve())
    assert config.policy.max_delete == 10  # the default in place of "ten"
    assert config.policy.required_keys == ()
    assert [(b.key, b.min, b.max) for b in config.policy.key_bounds] == [("producer_byte_rate", None, None)]
    found: list = []
    assert find_config(tmp_path, found) == config
    assert found == problems
    with pytest.raises(DiagnosticsError) as raised:
        load_config(toml)
    assert list(raised.value.diagnostics) == problems


@pytest.mark.parametrize(("text", "line", "column", "message"), [
    ('[policy]\nmax-delete = \n', 2, 14, "invalid TOML: Invalid value"),
    ('[policy\nmax-delete = 1\n', 1, 8, "invalid TOML: Expected ']' at the end of a table declaration"),
    ('[policy]\nmax-delete = 1\n[policy]\n', 3, 8, "invalid TOML: Cannot declare ('policy',) twice"),
])
def test_a_toml_syntax_error_is_located(tmp_path, text, line, column, message):
    toml, manifests = project(tmp_path, config=text)
    result = run_cli("--config", toml, "validate", manifests)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"{shown(toml, tmp_path)}:{line}:{column}: error[KQP190] {message}"), \
        result.stderr
    assert "= help: kqplan.toml is TOML" in result.stderr


@pytest.mark.parametrize(("text", "expected"), [
    ("[policy]\nmax-delete = -1\n", "policy.max-delete: must be a whole number ≥ 0, not -1"),
    ("[policy]\nmax-delete = 2.5\n", "policy.max-delete: must be a whole number ≥ 0, not 2.5"),
    ("[policy]\nmax-delete-percent = true\n", "policy.max-delete-percent: must be a number from 0 to "
     "100, not true"),
    ("[policy]\nmax-delete-percent = 101\n", "policy.max-delete-percent: must be a number from 0 to "
     "100, not 101"),
    ("[policy]\nallow-unmanaged = \"no\"\n", "policy.allow-unmanaged: must be true or false, not 'no'"),
    ("[policy]\nrequired-keys = \"producer_byte_rate\"\n", "policy.required-keys: must be a list of "
     "quota keys in quotes, such as [\"producer_byte_rate\"], not 'producer_byte_rate'"),
    ("[policy]\nrequired-labels = [\"team\", 3]\n", "policy.required-labels[1]: must be a label name "
     "in quotes, not 3"),
    ("[clusters.prod]\nmanifests = \"base\"\n", "clusters.prod.manifests: must be a list of "
     "directories in quotes, such as [\"base\", \"overlays/prod\"], not 'base'"),
    ("[clusters]\nprod = 7\n", "clusters.prod: must be a cluster id in quotes, or a [clusters.NAME] "
     "table, not 7"),
    ("[clusters.prod]\nversion = 3.9\n", "clusters.prod.version: must be a Kafka version in quotes, "
     "such as \"3.9\", not 3.9"),
    ("[limits]\nmax-file-mib = 0\n", "limits.max-file-mib: must be a whole number of MiB greater than "
     "0, not 0"),
    ("policy = 5\n", "policy: must be a table ([policy]), not 5"),
    ("[policy.keys]\nproducer_byte_rate = 5\n", "policy.keys.producer_byte_rate: must be a table with "
     "min and/or max, not 5"),
    ("[policy.keys.producer_byte_rate]\nmin = [1]\n", "policy.keys.producer_byte_rate.min: must be a "
     "number, or a size in quotes such as \"10MiB\", not a list"),
    ("[custom]\nkeys = \"x_rate\"\n", "custom.keys: must be a list of quota key names in quotes, such "
     "as [\"x_custom_rate\"], not 'x_rate'"),
])
def test_wrong_types_in_kqplans_words(tmp_path, text, expected):
    toml, manifests = project(tmp_path, config=text, manifest="entities: []\n")
    result = run_cli("--config", toml, "validate", manifests)
    assert result.exit_code == 1
    assert result.stderr.startswith(
        f"{shown(toml, tmp_path)}:{len(text.splitlines())}:1: error[KQP190] {expected}\n"), result.stderr
    assert not any(word in result.stderr for word in PYDANTIC_WORDS)


def test_several_problems_in_one_table_and_its_neighbours(tmp_path):
    text = ('[policy]\nmax-delete = "ten"\nmax-delete-percent = 200\nallow-unmanaged = 1\nmax_delet = 3\n'
            '[limits]\nmax-file-mib = "big"\nmax-input-mib = -2\n[custom]\nkeys = [1, "x_rate"]\n')
    toml, _ = project(tmp_path, config=text, manifest="entities: []\n")
    config, problems = check_config(toml)
    assert [(p.span.line, p.message.split(":")[0].split(" ")[0]) for p in problems] == [
        (2, "policy.max-delete"), (3, "policy.max-delete-percent"), (4, "policy.allow-unmanaged"),
        (5, "unknown"), (7, "limits.max-file-mib"), (8, "limits.max-input-mib"), (10, "custom.keys[0]")]
    assert problems[3].hint == "did you mean 'max-delete'?"
    assert config.custom_keys == frozenset({"x_rate"})  # the valid item of the list is kept


_MESSAGE = re.compile(r"^(unknown key '.*' in (\[.+\]|the top level)|.+?: must be .+, not .+|[^ ]+: .+|"
                      r"cluster name .+|cluster '.*': .+|custom\.\S+ redeclares .+)$")


def _assert_in_kqplans_words(problems: list) -> None:
    for p in problems:
        assert _MESSAGE.match(p.message), p.message
        assert not any(w in p.message + (p.hint or "") for w in PYDANTIC_WORDS), p.message


@settings(max_examples=400, deadline=None)
@given(st.one_of(corrupted_documents(), any_documents))
def test_any_document_all_problems_at_once_and_a_valid_rest(raw):
    """Whatever the file holds: its problems in kqplan's words, and what is kept is a valid file
    (the schema takes it back unchanged); no problem at all exactly when the schema takes it."""
    before = copy.deepcopy(raw)
    doc, problems = checked_document(Path("kqplan.toml"), "", raw)
    assert raw == before  # the caller's document is not changed
    _assert_in_kqplans_words(problems)
    assert validate_document(Path("kqplan.toml"), "", doc) == doc
    try:
        valid = validate_document(Path("kqplan.toml"), "", raw)
    except DiagnosticsError:
        assert problems
    else:
        assert not problems
        assert valid == doc


def test_every_near_miss_at_every_spot_is_in_kqplans_words():
    for spot in _spots(FULL):
        for miss in [*near_misses.elements, {"typo": 1}]:
            doc = copy.deepcopy(FULL)
            parent = doc
            for key in spot[:-1]:
                parent = parent[key]
            parent[spot[-1]] = copy.deepcopy(miss)
            kept, problems = checked_document(Path("kqplan.toml"), "", doc)
            _assert_in_kqplans_words(problems)
            assert validate_document(Path("kqplan.toml"), "", kept) == kept
