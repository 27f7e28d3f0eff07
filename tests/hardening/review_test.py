"""Nine defects a review of the hardening found (issue 29), each through the real command line
(or, for the file primitives, the function itself): a stream or a symlink as an output path,
control and bidi characters of a path reaching the terminal, the fleet commands ignoring
``[limits] max-input-mib``, a long non-ASCII file name, a partial ``fleet rightsize``, cluster names
that differ only in case, a boolean as a policy bound, a ``/proc`` file read with a huge bound,
and an export of a cluster without an id removing another id-less cluster's files.

The commands that write to ``/dev/stdout`` run in a process of their own (in this process fd 1
is the test runner's capture file, not a stream), with the kqplan this process imported."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import kqplan
from kqplan.core.entity import Entity
from kqplan.core.errors import KqplanError
from kqplan.snapshot.file import write_snapshot
from tests.helpers import Result, run_cli, shown, write_manifest

KQPLAN_ROOT = str(Path(kqplan.__file__).resolve().parent.parent)
"""Where the kqplan under test lives: the subprocesses import the same one."""

STATE = {Entity.user("alice"): {"producer_byte_rate": 1024.0}}
BOB = "entities:\n  - user: bob\n    quotas: {producer_byte_rate: 1KiB}\n"
UNFORMATTED = "entities:\n  - quotas: {producer_byte_rate: 1048576}\n    user: a\n"
HOSTILE_DIR = "dd\x1b[2J\u202eevil"
LONG = "é" * 120  # 240 bytes: with ".yaml" or ".json", a 245-byte file name


def kqplan_process(*args: str | Path, cwd: Path) -> Result:
    """``python -m kqplan ARGS`` in a process of its own (stdout and stderr are pipes)."""
    env = {**os.environ, "PYTHONPATH": KQPLAN_ROOT}
    proc = subprocess.run([sys.executable, "-m", "kqplan", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=60, env=env, check=False)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def seed_and_manifest(root: Path) -> tuple[Path, Path]:
    """A snapshot (the cluster ``c-1`` with alice) and a manifest adding bob."""
    snap = root / "s.json"
    write_snapshot(snap, STATE, "c-1")
    return snap, write_manifest(root / "m" / "q.yaml", BOB)


def clean(result: Result) -> None:
    output = result.stdout + result.stderr
    assert "internal error" not in output, output
    assert "Traceback" not in output, output


def listing(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


# -- 1. a stream or a symlink as an output path ------------------------------------------------------

def test_plan_out_dev_stdout_writes_the_plan_to_stdout(tmp_path):
    snap, manifest = seed_and_manifest(tmp_path)
    result = kqplan_process("plan", manifest, "--state", snap, "--out", "/dev/stdout", cwd=tmp_path)
    assert result.exit_code == 0, result.stdout + result.stderr  # was 1: internal error (temp file in /proc)
    clean(result)
    plan_json, _, rest = result.stdout.partition("\n}\n")
    plan = json.loads(plan_json + "\n}\n")
    assert plan["summary"]["add"] == 1
    assert [c["display"] for c in plan["changes"]] == ["{user=bob}"]
    assert "Plan: 1 to add, 0 to change, 0 to delete." in rest


def test_plan_out_through_a_symlink_into_a_missing_directory_is_refused_before_anything(tmp_path):
    snap, manifest = seed_and_manifest(tmp_path)
    link = tmp_path / "dl"
    link.symlink_to(Path("nodir") / "p.json")
    before = listing(tmp_path)
    result = run_cli("plan", manifest, "--sandbox", snap, "--out", link)
    assert result.exit_code == 1, result.stdout + result.stderr
    clean(result)  # was: internal error FileNotFoundError on nodir/.p.json.XXXX.tmp, after the plan
    assert result.stderr.startswith(f"Error: cannot write the plan file {link}: directory "
                                    f"{tmp_path / 'nodir'} does not exist"), result.stderr
    assert "Plan:" not in result.stdout  # refused before the plan was made
    assert listing(tmp_path) == before


def test_apply_report_to_dev_stdout(tmp_path):
    snap, manifest = seed_and_manifest(tmp_path)
    result = kqplan_process("apply", manifest, "--sandbox", snap, "--auto-approve", "--report", "/dev/stdout",
                            cwd=tmp_path)
    assert result.exit_code == 0, result.stdout + result.stderr  # was 1: internal error after applying
    clean(result)
    assert "  + {user=bob}: applied\n" in result.stdout
    assert "Apply complete: 1 added, 0 changed, 0 deleted." in result.stdout
    start = result.stdout.index('{\n  "format_version"')
    report = json.JSONDecoder().raw_decode(result.stdout, start)[0]
    assert report["ok"] is True
    assert report["summary"]["applied"] == 1
    assert [e["display"] for e in report["entities"]] == ["{user=bob}"]


def test_check_writable_names_the_missing_directory_behind_a_symlink(tmp_path):
    from kqplan.core.errors import KqplanError
    from kqplan.files import check_writable

    link = tmp_path / "dl"
    link.symlink_to(Path("nodir") / "p.json")
    with pytest.raises(KqplanError, match="does not exist") as refused:
        check_writable(link, "the report")
    assert "nodir" in refused.value.message
    check_writable(tmp_path / "fine.json", "the report")


def test_write_atomically_through_a_symlink_into_a_missing_directory_is_a_kqplan_error(tmp_path):
    from kqplan.files import write_atomically

    link = tmp_path / "dl"
    link.symlink_to(Path("nodir") / "p.json")
    with pytest.raises(KqplanError):
        write_atomically(link, "{}\n")
    assert link.is_symlink()
    assert not (tmp_path / "nodir").exists()


def test_write_atomically_to_a_fifo_nobody_reads_is_an_error_not_a_hang(tmp_path):
    from kqplan.files import write_atomically

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    raised: list[BaseException | None] = []

    def write() -> None:
        try:
            write_atomically(fifo, "{}\n")
        except BaseException as exc:  # handed to the test's thread
            raised.append(exc)
        else:
            raised.append(None)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    writer.join(timeout=5)
    if writer.is_alive():  # unblock it (a reader appears), then fail
        with open(fifo, "rb"):
            writer.join(timeout=5)
        pytest.fail("write_atomically blocked on a FIFO nobody reads")
    assert len(raised) == 1
    assert isinstance(raised[0], KqplanError), raised  # was: no error, the FIFO replaced by a file
    assert str(fifo) in raised[0].message
    assert stat.S_ISFIFO(fifo.lstat().st_mode)  # still the FIFO
    assert [p.name for p in tmp_path.iterdir()] == ["pipe"]  # no temporary file left


# -- 2. no ESC or bidi character of a path reaches the terminal --------------------------------------

def no_raw_controls(result: Result) -> None:
    output = result.stdout + result.stderr
    assert "\x1b" not in output, output
    assert "\u202e" not in output, output
    clean(result)


def hostile_dir(tmp_path: Path) -> Path:
    directory = tmp_path / HOSTILE_DIR
    directory.mkdir()
    return directory


def saved_line(result: Result) -> str:
    """The line after ``plan --out`` that says how to apply the saved plan."""
    lines = (result.stdout + result.stderr).splitlines()
    [saved] = [line for line in lines if line.startswith("Saved the plan")]
    return saved


def test_plan_out_in_a_hostile_directory_prints_it_escaped(tmp_path):
    snap, manifest = seed_and_manifest(tmp_path)
    out = hostile_dir(tmp_path) / "plan.json"
    result = run_cli("plan", manifest, "--sandbox", snap, "--out", out)
    assert result.exit_code == 0, result.stdout + result.stderr
    no_raw_controls(result)
    assert out.is_file()
    saved = saved_line(result)
    assert "Apply exactly these changes with: kqplan apply --plan '" in saved  # quoted for the shell


def test_the_apply_command_printed_after_plan_out_is_quoted_for_the_shell(tmp_path):
    snap, manifest = seed_and_manifest(tmp_path)
    (tmp_path / "my plans").mkdir()
    out = tmp_path / "my plans" / "plan.json"
    result = run_cli("plan", manifest, "--sandbox", snap, "--out", out)
    assert result.exit_code == 0, result.stdout + result.stderr
    command = saved_line(result).split("Apply exactly these changes with: ", 1)[1]
    assert shlex.split(command) == ["kqplan", "apply", "--plan", str(out), "--sandbox", str(snap)]


def test_export_json_into_a_hostile_directory_prints_it_escaped(tmp_path):
    snap, _ = seed_and_manifest(tmp_path)
    out = hostile_dir(tmp_path) / "s.json"
    result = run_cli("export", "--state", snap, "--format", "json", "--out", out)
    assert result.exit_code == 0, result.stdout + result.stderr
    no_raw_controls(result)
    assert out.is_file()
    assert "\\x1b[2J\\u202eevil" in result.stderr


def test_export_split_into_a_hostile_directory_prints_it_escaped(tmp_path):
    snap, _ = seed_and_manifest(tmp_path)
    out = hostile_dir(tmp_path) / "exp"
    result = run_cli("export", "--state", snap, "--split-by", "user", "--out", out)
    assert result.exit_code == 0, result.stdout + result.stderr
    no_raw_controls(result)
    assert (out / "users" / "alice.yaml").is_file()
    assert "\\x1b[2J\\u202eevil" in result.stderr


def test_fmt_in_a_hostile_directory_prints_it_escaped(tmp_path):
    manifest = write_manifest(hostile_dir(tmp_path) / "m.yaml", UNFORMATTED)
    result = run_cli("fmt", manifest)
    assert result.exit_code == 0, result.stdout + result.stderr
    no_raw_controls(result)
    assert "producer_byte_rate: 1MiB" in manifest.read_text(encoding="utf-8")
    assert "\\x1b[2J\\u202eevil" in result.stdout


def test_import_into_a_hostile_directory_prints_it_escaped(tmp_path):
    snap, _ = seed_and_manifest(tmp_path)
    manifests = hostile_dir(tmp_path) / "imported"
    write_manifest(manifests / "base.yaml", "entities: []\n")
    result = run_cli("import", manifests, "--all-unmanaged", "--split-by", "user", "--state", snap)
    assert result.exit_code == 0, result.stdout + result.stderr
    no_raw_controls(result)
    assert (manifests / "users" / "alice.yaml").is_file()
    assert "{user=alice} added to " in result.stdout
    assert "\\x1b[2J\\u202eevil" in result.stdout


# -- 3. the fleet commands honour [limits] max-input-mib -------------------------------------------

def big_fleet(root: Path) -> Path:
    """``big`` (a snapshot of 1.7 MiB) and ``small``, under ``max-input-mib = 1``."""
    many = {Entity.user(f"user-{i:06d}"): {"producer_byte_rate": 1024.0} for i in range(16000)}
    write_snapshot(root / "big.json", many, "big-id")
    assert (root / "big.json").stat().st_size > 1024 * 1024
    write_snapshot(root / "small.json", {Entity.user("a"): {"producer_byte_rate": 1024.0}}, "small-id")
    write_manifest(root / "m" / "q.yaml", "entities:\n  - user: a\n    quotas: {producer_byte_rate: 1KiB}\n")
    config = root / "kqplan.toml"
    config.write_text('[limits]\nmax-input-mib = 1\n'
                      '[clusters.big]\nsnapshot = "big.json"\nmanifests = ["m"]\n'
                      '[clusters.small]\nsnapshot = "small.json"\nmanifests = ["m"]\n', encoding="utf-8")
    return config


def test_fleet_plan_and_snapshot_honour_max_input_mib(tmp_path):
    config = big_fleet(tmp_path)
    refusal = f"cannot read snapshot {tmp_path / 'big.json'}: it is 1.7 MiB, over the 1 MiB limit"
    single = run_cli("--config", config, "plan", "--cluster", "big")
    assert single.exit_code == 1
    assert refusal in single.stderr  # what the fleet commands must say too
    planned = run_cli("--config", config, "fleet", "plan")
    assert planned.exit_code == 1, planned.stdout + planned.stderr  # was 0: big planned past the limit
    clean(planned)
    assert f"big    error: {refusal}" in planned.stdout + planned.stderr
    assert "small  0 to add, 0 to change, 0 to delete" in planned.stdout
    out = tmp_path / "D"
    snapped = run_cli("--config", config, "fleet", "snapshot", "--out", out)
    assert snapped.exit_code == 1, snapped.stdout + snapped.stderr  # was 0: big.json written
    clean(snapped)
    assert f"big: failed: {refusal}" in snapped.stdout + snapped.stderr
    assert sorted(p.name for p in out.iterdir()) == ["small.json"]


# -- 4. a 245-byte file name -------------------------------------------------------------------------

def test_fmt_rewrites_a_manifest_with_a_245_byte_name(tmp_path):
    manifest = write_manifest(tmp_path / "m" / f"{LONG}.yaml", UNFORMATTED)
    assert len(manifest.name.encode()) == 245
    result = run_cli("fmt", manifest)
    assert result.exit_code == 0, result.stdout + result.stderr  # was 1: internal error, File name too long
    clean(result)
    formatted = "  - user: a\n    quotas: {producer_byte_rate: 1MiB}\n"
    assert manifest.read_text(encoding="utf-8").endswith(formatted)
    assert [p.name for p in manifest.parent.iterdir()] == [manifest.name]  # no temporary file left


def test_plan_out_writes_a_file_with_a_245_byte_name(tmp_path):
    snap, manifest = seed_and_manifest(tmp_path)
    out = tmp_path / f"{LONG}.json"
    assert len(out.name.encode()) == 245
    result = run_cli("plan", manifest, "--state", snap, "--out", out)
    assert result.exit_code == 0, result.stdout + result.stderr  # was 1: internal error, File name too long
    clean(result)
    assert json.loads(out.read_text(encoding="utf-8"))["summary"]["add"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["m", "s.json", out.name])


# -- 5. fleet rightsize writes all of its files or none -----------------------------------------------

def test_fleet_rightsize_with_a_directory_in_the_way_writes_nothing(tmp_path):
    body, usage = [], ["cluster,user,client_id,request_percentage,ts"]
    for name in ("alpha", "beta"):
        write_snapshot(tmp_path / f"{name}.json", {Entity.user(None): {"request_percentage": 50.0}},
                       f"{name}-id")
        body.append(f'[clusters.{name}]\nid = "{name}-id"\nsnapshot = "{name}.json"\n')
        usage.append(f"{name},dave,x,0.2,1")
    (tmp_path / "kqplan.toml").write_text("\n".join(body), encoding="utf-8")
    (tmp_path / "usage.csv").write_text("\n".join(usage) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    in_the_way = out / "beta" / "rightsize.yaml"
    in_the_way.mkdir(parents=True)
    result = run_cli("--config", tmp_path / "kqplan.toml", "fleet", "rightsize",
                     "--usage", tmp_path / "usage.csv", "--out", out)
    assert result.exit_code == 1, result.stdout + result.stderr
    clean(result)
    assert str(in_the_way) in result.stderr
    assert not (out / "alpha" / "rightsize.yaml").exists()  # was written, with proposals.parquet
    assert not (out / "proposals.parquet").exists()
    assert not (out / "proposals.md").exists()
    assert in_the_way.is_dir()


# -- 6. cluster names that differ only in case -------------------------------------------------------

def test_cluster_names_differing_only_in_case_are_a_located_error(tmp_path):
    write_manifest(tmp_path / "m" / "q.yaml", BOB)
    config = tmp_path / "kqplan.toml"
    config.write_text('[clusters.prod]\nsnapshot = "a.json"\nmanifests = ["m"]\n\n'
                      '[clusters.PROD]\nsnapshot = "b.json"\nmanifests = ["m"]\n', encoding="utf-8")
    result = run_cli("--config", config, "validate", "--cluster", "prod")
    assert result.exit_code == 1, result.stdout + result.stderr  # was 0
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"{shown(config, tmp_path)}:5:1: error[KQP190] cluster name \"PROD\" "
                            "differs from \"prod\" "), first
    assert first.endswith("only in case"), first


# -- 7. a boolean is not a bound ------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["plain", "schema"])
@pytest.mark.parametrize(("which", "literal"), [("max", "true"), ("min", "false")])
def test_a_boolean_bound_is_a_located_error(tmp_path, which, literal, path):
    config = tmp_path / "kqplan.toml"
    config.write_text(f"[policy.keys.producer_byte_rate]\n{which} = {literal}\n"
                      + ('\n[clusters.a]\nbootstrap_server = "k:9092"\n' if path == "schema" else ""),
                      encoding="utf-8")
    manifests = write_manifest(tmp_path / "m" / "q.yaml", "entities:\n  - user: bob\n"
                               "    quotas: {consumer_byte_rate: 1KiB}\n").parent
    result = run_cli("--config", config, "validate", manifests)
    assert result.exit_code == 1, result.stdout + result.stderr  # was 0: a bound of 1 (true) or 0 (false)
    assert result.stderr.splitlines()[0] == (f"{shown(config, tmp_path)}:2:1: error[KQP190] "
                                             f"policy.keys.producer_byte_rate.{which}: must be a number")


# -- 8. a /proc file read through the bounded reader ------------------------------------------------

PROC_READ = """
import json, resource, sys
from pathlib import Path
resource.setrlimit(resource.RLIMIT_AS, (256 << 20, 256 << 20))
from kqplan.files import read_bounded
from kqplan.core.errors import KqplanError
found = {}
for name, kwargs in (("default", {}), ("huge", {"limit": 10**20}), ("ten", {"limit": 10})):
    try:
        data = read_bounded(Path("/proc/self/status"), **kwargs)
        keys = [line.split(":")[0] for line in data.decode().splitlines()]
        found[name] = {"keys": keys}
    except KqplanError as exc:
        found[name] = {"refused": exc.message}
    except BaseException as exc:
        found[name] = {"error": type(exc).__name__ + ": " + str(exc)}
direct = Path("/proc/self/status").read_text()
found["direct"] = {"keys": [line.split(":")[0] for line in direct.splitlines()]}
print(json.dumps(found))
"""


def test_a_proc_file_is_read_whole_under_any_bound_and_refused_over_a_small_one():
    """In a process of 256 MiB of address space: a buffer the size of the default bound (512 MiB)
    ends in MemoryError there, and a bound of 10**20 does not fit an index."""
    env = {**os.environ, "PYTHONPATH": KQPLAN_ROOT}
    proc = subprocess.run([sys.executable, "-c", PROC_READ], capture_output=True, text=True, timeout=60,
                          env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    assert "Name" in found["direct"]["keys"]
    assert found["default"] == found["direct"], found["default"]  # was: MemoryError
    assert found["huge"] == found["direct"], found["huge"]  # was: OverflowError
    assert "refused" in found["ten"], found["ten"]
    assert "/proc/self/status" in found["ten"]["refused"]
    assert "limit" in found["ten"]["refused"]


# -- 9. an export of a cluster without an id removes no file ------------------------------------------

def test_exports_of_clusters_without_an_id_leave_each_others_files(tmp_path):
    write_snapshot(tmp_path / "n1.json", {Entity.user("erin"): {"producer_byte_rate": 1024.0},
                                          Entity.user("frank"): {"producer_byte_rate": 2048.0}}, None)
    write_snapshot(tmp_path / "n2.json", {Entity.user("gina"): {"producer_byte_rate": 1024.0}}, None)
    out = tmp_path / "out"
    first = run_cli("export", "--state", tmp_path / "n1.json", "--split-by", "user", "--out", out)
    assert first.exit_code == 0, first.stdout + first.stderr
    second = run_cli("export", "--state", tmp_path / "n2.json", "--split-by", "user", "--out", out, "--force")
    assert second.exit_code == 0, second.stdout + second.stderr
    clean(second)
    users = out / "users"
    # was: gina's alone, erin's and frank's "Removed …: its entities are no longer on the cluster"
    assert sorted(p.name for p in users.iterdir()) == ["erin.yaml", "frank.yaml", "gina.yaml"]
    assert "erin" in (users / "erin.yaml").read_text(encoding="utf-8")
    warning = second.stderr
    assert "left in place" in warning, warning
    assert "has no id" in warning, warning
    assert str(users / "erin.yaml") in warning, warning
    assert str(users / "frank.yaml") in warning, warning
    assert "Removed" not in warning, warning
