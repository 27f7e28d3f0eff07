"""fleet rightsize: the rounding series, the tolerance rule, both engines giving the same table on
generated fleets, manifests that give exactly the table's "after" once applied, and the command."""

from __future__ import annotations

import itertools
import math
import tempfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kqplan.config.model import ProjectConfig
from kqplan.core.entity import Entity
from kqplan.core.errors import KqplanError
from kqplan.core.policy import KeyBounds, Policy
from kqplan.core.resolve import resolve
from kqplan.core.units import parse_bytes
from kqplan.fleet.impact import impact_rows
from kqplan.fleet.proposals import manifest_text, read_proposals
from kqplan.fleet.rightsize import (
    BYTE_STEPS,
    PLAIN_STEPS,
    Action,
    ProposalRow,
    Rules,
    proposal_rows,
    round_up,
)
from kqplan.fleet.spark_rightsize import spark_proposal_rows, with_rounded
from kqplan.fleet.spark_usage import samples_frame
from kqplan.fleet.usage import USAGE_KEYS, Sample
from kqplan.manifest.compile import load_desired
from kqplan.manifest.export import yaml_value
from kqplan.manifest.fmt import format_text
from kqplan.snapshot.file import write_snapshot
from tests.helpers import run_cli, run_kqplan

P, C, R, M = USAGE_KEYS  # producer_byte_rate, consumer_byte_rate, request_percentage, controller_mutation…
KiB, MiB = 1024.0, 1024.0**2


# -- rounding --------------------------------------------------------------------------------------

@pytest.mark.parametrize(("key", "need", "expected"), [
    (P, -5.0, 1 * KiB), (P, 0.0, 1 * KiB), (P, 10.0, 1 * KiB), (P, 1024.0, 1 * KiB), (P, 1025.0, 2 * KiB),
    (P, 13.2 * MiB, 15 * MiB), (P, 800 * KiB + 1, 1 * MiB), (P, 1.01 * MiB, 2 * MiB),
    (C, 101 * 1024 * MiB, 120 * 1024 * MiB), (R, 0.3, 1.0), (R, 47.0, 50.0), (R, 101.0, 120.0),
    (M, 6.5, 8.0), (M, 8.0, 8.0), (P, math.nan, None), (P, math.inf, None), (P, 2.0**63, None),
    (R, 1e16, None)])
def test_round_up_to_the_series(key, need, expected):
    assert round_up(key, need) == expected


def test_every_byte_step_is_a_whole_count_of_one_unit_that_fmt_keeps():
    shown = [yaml_value(P, step) for step in BYTE_STEPS]
    assert shown[:29] == ["1KiB", "2KiB", "3KiB", "4KiB", "5KiB", "6KiB", "8KiB", "10KiB", "12KiB", "15KiB",
                          "20KiB", "25KiB", "30KiB", "40KiB", "50KiB", "60KiB", "80KiB", "100KiB", "120KiB",
                          "150KiB", "200KiB", "250KiB", "300KiB", "400KiB", "500KiB", "600KiB", "800KiB",
                          "1MiB", "2MiB"]
    assert all(float(parse_bytes(text)) == step for text, step in zip(shown, BYTE_STEPS, strict=True))
    assert all(text.rstrip("KMGTiB").isdigit() for text in shown)
    assert BYTE_STEPS[-1] < 2.0**63  # a LONG holds it
    assert PLAIN_STEPS[-1] < 2.0**53  # a double holds it exactly
    assert list(BYTE_STEPS) == sorted(set(BYTE_STEPS))
    assert list(PLAIN_STEPS) == sorted(set(PLAIN_STEPS))
    for steps in (BYTE_STEPS, PLAIN_STEPS):  # the Spark lookup relies on it
        assert max(b / a for a, b in itertools.pairwise(steps)) == 2


def test_spark_rounding_lookup_is_round_up(spark):
    needs = [-1.0, 0.0, 0.5, 1.0, 7.0, math.nan, math.inf, 2.0**63, 9e15]
    for step in BYTE_STEPS + PLAIN_STEPS:
        needs += [step, math.nextafter(step, 0), math.nextafter(step, math.inf), step * 0.999, step * 1.37]
    rows = [(key, need) for key in (P, R) for need in needs]
    frame = with_rounded(spark, spark.createDataFrame(rows, "key string, need double"))
    got = {(r.key, r.need if not math.isnan(r.need) else "nan"): r.rounded for r in frame.collect()}
    for key, need in rows:
        assert got[(key, need if not math.isnan(need) else "nan")] == round_up(key, need), (key, need)


# -- the rules -------------------------------------------------------------------------------------

RULES = Rules.of(stat="max", headroom=1.5, tolerance=0.5)


@pytest.mark.parametrize(("proposal", "current", "action"), [
    (100.0, None, Action.LIMIT), (100.0, 100.0, Action.KEEP), (100.0, 150.0, Action.KEEP),
    (100.0, 150.1, Action.LOWER), (100.0, 99.0, Action.RAISE), (100.0, math.nan, Action.LOWER)])
def test_tolerance_keeps_a_quota_that_covers_the_proposal_and_is_not_too_generous(proposal, current, action):
    assert RULES.decide(proposal, current) is action


def test_floors_and_caps_from_min_and_policy():
    policy = Policy(key_bounds=(KeyBounds(P, 4096.0, 2 * MiB), KeyBounds("connection_creation_rate", 1, 9)))
    rules = Rules.of(stat="p99", headroom=1.5, tolerance=0.5, mins=[f"{P}=2KiB,{R}=5"], policy=policy)
    assert (rules.q, dict(rules.floors), dict(rules.caps)) == (0.99, {P: 4096.0, R: 5.0}, {P: 2 * MiB})
    assert [rules.propose(P, n) for n in (1.0, 5000.0, 3 * MiB)] == [4096.0, 5 * KiB, 2 * MiB]
    assert rules.propose(R, 1.0) == 5.0
    assert rules.propose(C, 1.0) == KiB
    with pytest.raises(KqplanError, match=r"--min producer_byte_rate=4MiB is above the \[policy\] maximum"):
        Rules.of(stat="max", headroom=1.5, tolerance=0.5, mins=[f"{P}=4MiB"], policy=policy)


@pytest.mark.parametrize(("options", "message", "hint"), [
    ({"headroom": 0.8}, "--headroom 0.8 must be a number of at least 1", "1.5 proposes 50 % above it"),
    ({"headroom": math.nan}, "--headroom nan must be a number of at least 1", None),
    ({"tolerance": -0.1}, "--tolerance -0.1 must be a number of at least 0", None),
    ({"stat": "p100"}, "--stat 'p100' is not a statistic", None),
    ({"mins": ["producer_rate=1MiB"]}, "--min 'producer_rate=1MiB': 'producer_rate' is not a user/client-id "
     "quota key", "did you mean 'producer_byte_rate'?"),
    ({"mins": ["producer_byte_rate=10Mb"]}, "--min 'producer_byte_rate=10Mb': unknown byte unit 'Mb'",
     "reads as bits"),
    ({"mins": ["producer_byte_rate=1.5"]}, "producer_byte_rate cannot be a fractional value", None),
    ({"mins": ["request_percentage=0"]}, "Quota request_percentage must be greater than 0", None),
    ({"mins": ["request_percentage"]}, "--min 'request_percentage' is not KEY=VALUE", None),
    ({"mins": ["request_percentage=x"]}, "'x' is not a number", None),
    ({"mins": ["request_percentage=2", "request_percentage=3"]}, "--min request_percentage is given twice",
     None)])
def test_bad_options_are_named(options, message, hint):
    with pytest.raises(KqplanError) as caught:
        Rules.of(**{"stat": "max", "headroom": 1.5, "tolerance": 0.5, **options})
    assert message in caught.value.message
    assert hint is None or hint in (caught.value.hint or "")


# -- the local engine on a hand-checked cluster ----------------------------------------------------

STATE = {Entity.user(None): {P: 1 * MiB, C: 2 * MiB}, Entity.user("alice"): {R: 10.0},
         Entity.user_client("ops", "tool"): {P: 100 * MiB, R: 50.0}, Entity.user("fay"): {P: 10e6},
         Entity.client("shared"): {R: 10.0}}
USAGE = [  # (user, client_id, key, samples)
    ("alice", "app", P, [600_000.0]), ("alice", "app", R, [3.0, 4.0]), ("bob", "web", P, [2e6]),
    ("carol", "", P, [10_000.0]), ("carol", "app", P, [500_000.0]), ("carol", "app", C, [1e6]),
    ("dave", "", R, [1.0]), ("dave", "shared", R, [3.0]), ("erin", "shared", R, [3.0]),
    ("fay", "f1", P, [5e6]), ("fay", "f2", P, [5e6]), ("fay", "f3", P, [5e6]),
    ("ops", "tool", P, [1e6])]


def samples(cluster: str = "east") -> list[Sample]:
    return [Sample(cluster, u, c, k, v) for u, c, k, values in USAGE for v in values]


def test_local_engine_decisions():
    rows = proposal_rows({"east": STATE}, samples(), Rules.of(stat="p99", headroom=1.5, tolerance=0.5))
    shown = [(r.user, r.client_id, r.key, r.bucket, yaml_value(r.key, r.proposal), r.action, r.current_source,
              r.after_source) for r in rows]
    assert shown == [
        # the default covers alice's producer need (1MiB) within +50 %: no entity of her own
        ("alice", "app", P, "{user=alice}", "1MiB", "keep", "{user=<default>}", "{user=<default>}"),
        # p99 of 3 and 4 is 3.99, × 1.5 = 5.985 -> 6; 10 is more than 1.5 × 6: the bucket's entity
        ("alice", "app", R, "{user=alice}", "6", "lower", "{user=alice}", "{user=alice}"),
        ("bob", "web", P, "{user=bob}", "3MiB", "raise", "{user=<default>}", "{user=bob}"),
        # carol's two clients share {user=carol}: 10,000 + 500,000 × 1.5 -> 800KiB, covered by the 1MiB
        ("carol", "", P, "{user=carol}", "800KiB", "keep", "{user=<default>}", "{user=<default>}"),
        ("carol", "app", C, "{user=carol}", "2MiB", "keep", "{user=<default>}", "{user=<default>}"),
        ("carol", "app", P, "{user=carol}", "800KiB", "keep", "{user=<default>}", "{user=<default>}"),
        # dave sends no client-id and has no quota: {user=dave} is written, which would take dave/shared
        # out of the {client-id=shared} bucket (3 + 3 × 1.5 -> 10, kept): pinned there on its own entity
        ("dave", "", R, None, "2", "limit", None, "{user=dave}"),
        ("dave", "shared", R, "{client-id=shared}", "10", "pin", "{client-id=shared}",
         "{user=dave, client-id=shared}"),
        ("erin", "shared", R, "{client-id=shared}", "10", "keep", "{client-id=shared}", "{client-id=shared}"),
        # the alice example: three clients of 5 MB/s share {user=fay}'s 10 MB: 15 MB/s × 1.5 -> 25MiB
        *[("fay", client, P, "{user=fay}", "25MiB", "raise", "{user=fay}", "{user=fay}")
          for client in ("f1", "f2", "f3")],
        ("ops", "tool", P, "{user=ops, client-id=tool}", "2MiB", "lower", "{user=ops, client-id=tool}",
         "{user=ops, client-id=tool}")]
    pinned = next(r for r in rows if r.action == "pin")
    assert (pinned.current_value, pinned.after_value, pinned.bucket_usage) == (10.0, 10.0, 6.0)
    alice = rows[1]
    assert (alice.usage, alice.bucket_usage, alice.need, alice.proposal) == \
        pytest.approx((3.99, 3.99, 5.985, 6.0))
    fay = rows[-2]
    assert (fay.usage, fay.bucket_usage, fay.need) == (5e6, 15e6, 22.5e6)


def test_a_bucket_is_windowed_as_impact_windows_it():
    # two clients of one user, never at their peaks in the same minute: the bucket carries 5e6 at most
    usage = [Sample("c", "u", "a", P, 4e6, 0.0), Sample("c", "u", "a", P, 1e6, 60.0),
             Sample("c", "u", "b", P, 1e6, 0.0), Sample("c", "u", "b", P, 4e6, 60.0),
             Sample("c", "u", "b", P, 2e6, 61.0)]
    rules = Rules.of(stat="max", headroom=1.0, tolerance=0.5)
    rows = proposal_rows({"c": {Entity.user("u"): {P: 1e6}}}, usage, rules)
    # minute 0: 4e6 + 1e6; minute 1: 1e6 + mean(4e6, 2e6) = 4e6; the max of the bucket's minutes
    assert [(r.client_id, r.usage, r.bucket_usage) for r in rows] == [("a", 4e6, 5e6), ("b", 4e6, 5e6)]
    assert {r.after_source for r in rows} == {"{user=u}"}
    per_minute = proposal_rows({"c": {Entity.user("u"): {P: 1e6}}}, usage, rules, window=120.0)
    assert {r.bucket_usage for r in per_minute} == {2.5e6 + 7e6 / 3}


def test_manifest_lists_what_changes_with_the_keys_the_entity_has(tmp_path):
    rules = Rules.of(stat="p99", headroom=1.5, tolerance=0.5)
    rows = proposal_rows({"east": STATE}, samples(), rules)
    text = manifest_text("east", "east-id", rows, STATE, rules=rules, labels={"team": "platform"})
    body = text[text.index("apiVersion"):]
    assert body == """\
apiVersion: kqplan/v1
kind: ClientQuotas
cluster: east-id
metadata:
  labels: {team: platform}
entities:
  # request_percentage: lower to 6: p99 3.99 × 1.5 = 5.985; now 10 from {user=alice}
  - user: alice
    quotas: {request_percentage: 6}
  # producer_byte_rate: raise to 3MiB: p99 ≈1.91 MiB/s × 1.5 = ≈2.86 MiB/s; now 1MiB from {user=<default>}
  - user: bob
    quotas: {producer_byte_rate: 3MiB}
  # request_percentage: pinned at 10, its bucket's value (now 10 from {client-id=shared}): {user=dave} is \
now set and would take it out of {client-id=shared}
  - user: dave
    client-id: shared
    quotas: {request_percentage: 10}
  # request_percentage: limit to 2: p99 1 × 1.5 = 1.5; now unlimited
  - user: dave
    quotas: {request_percentage: 2}
  # producer_byte_rate: raise to 25MiB: p99 ≈14.31 MiB/s (3 principals together) × 1.5 = ≈21.46 MiB/s; now \
10MB from {user=fay}
  - user: fay
    quotas: {producer_byte_rate: 25MiB}
  # producer_byte_rate: lower to 2MiB: p99 ≈976.56 KiB/s × 1.5 = ≈1.43 MiB/s; now 100MiB from \
{user=ops, client-id=tool}
  - user: ops
    client-id: tool
    quotas: {producer_byte_rate: 2MiB, request_percentage: 50}
"""
    assert format_text(text) == text  # canonical: `kqplan fmt --check` passes


def test_a_name_a_manifest_refuses_is_left_out_with_a_comment():
    rules = Rules.of(stat="max", headroom=1.5, tolerance=0.5)
    rows = proposal_rows({"c": {}}, [Sample("c", "bad\x07name", "x", P, 10.0)], rules)
    text = manifest_text("c", None, rows, {}, rules=rules)
    assert "# not written: {user=bad\\x07name, client-id=x}: its name contains U+0007" in text
    assert text.endswith("entities: []\n")


def test_usage_beyond_any_quota_is_an_error_naming_the_principal():
    with pytest.raises(KqplanError, match=r"cluster c: \{user=u, client-id=x\} needs producer_byte_rate = "
                       r"1\.5e\+30 \(usage × headroom\), beyond any quota kqplan proposes "
                       r"\(at most 8000000TiB\)"):
        proposal_rows({"c": {}}, [Sample("c", "u", "x", P, 1e30)], RULES)


def test_usage_beyond_any_quota_on_spark_is_the_same_error(spark):
    usage = [Sample("c", "v", "", R, 1e20), Sample("c", "u", "x", P, 1e30), Sample("c", "u", "x", R, 1.0)]
    with pytest.raises(KqplanError) as local:
        proposal_rows({"c": {}}, usage, RULES)
    with pytest.raises(KqplanError) as on_spark:
        spark_proposal_rows(spark, {"c": {}}, samples_frame(spark, usage), RULES)
    assert str(on_spark.value) == str(local.value)
    assert "{user=u, client-id=x} needs producer_byte_rate" in str(local.value)  # the first in table order


# -- both engines on generated fleets; the manifest gives the table's "after" -------------------------

users = st.sampled_from(["alice", "bob", "with space", "日本", "<default>", "\\x"])
clients = st.sampled_from(["app", "batch", "", "<default>"])
names = st.one_of(st.none(), users)
client_names = st.one_of(st.none(), clients.filter(bool))
entities = st.one_of(st.builds(Entity.user, names), st.builds(Entity.client, client_names),
                     st.builds(Entity.user_client, names, client_names))
quotas = st.dictionaries(st.sampled_from(USAGE_KEYS), st.sampled_from([2.0, 10.0, 1024.0, 30_000.0, 1 * MiB]),
                         min_size=1, max_size=3)
states = st.dictionaries(entities, quotas, max_size=6)
sample_lists = st.lists(st.builds(Sample, st.just("c"), users, clients, st.sampled_from(USAGE_KEYS),
                                  st.sampled_from([0.0, 1.0, 6.0, 700.0, 5000.0, 1e6])),
                        min_size=1, max_size=25)
rule_sets = st.builds(lambda stat, headroom, tolerance, mins, min_samples: Rules.of(
    stat=stat, headroom=headroom, tolerance=tolerance, mins=mins, min_samples=min_samples),
    st.sampled_from(["max", "p50", "p99"]), st.sampled_from([1.0, 1.5, 2.0]),
    st.sampled_from([0.0, 0.5, 1.0]),
    st.sampled_from([[], [f"{P}=4KiB", f"{R}=5"]]),
    st.sampled_from([0, 0, 2, 3]))  # a lowering held below 2 or 3 windows (without ts: samples)


def applied(state: dict[Entity, dict[str, float]], text: str) -> dict[Entity, dict[str, float]]:
    """The state once the manifest is applied: listed entities replaced whole, nothing else touched."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "rightsize.yaml"
        path.write_text(text, encoding="utf-8")
        desired = load_desired([path], ProjectConfig())
    assert not desired.errors, desired.diagnostics
    return {**state, **desired.quotas}


def shown(entity: Entity | None) -> str | None:
    return entity.display if entity is not None else None


def check_against_resolve(state: dict[Entity, dict[str, float]], rows: list[ProposalRow],
                          rules: Rules) -> None:
    after = applied(state, manifest_text("c", None, rows, state, rules=rules))
    for row in rows:
        now = resolve(state, row.user, row.client_id)[row.key]
        then = resolve(after, row.user, row.client_id)[row.key]
        assert (row.current_value, row.current_source) == (now.value, shown(now.source))
        assert (row.after_value, row.after_source) == (then.value, shown(then.source))
        unwritten = row.action in ("keep", "pin", "hold")
        assert row.after_value == (row.current_value if unwritten else row.proposal)
        if row.action == "hold":  # a lowering, held: too little evidence
            assert row.current_value > row.proposal * (1 + rules.tolerance)
            assert (row.windows if row.windows is not None else row.samples) < rules.min_samples
        if row.action == "keep":
            assert row.proposal <= row.current_value <= row.proposal * (1 + rules.tolerance)


timed_samples = st.lists(st.builds(Sample, st.just("c"), users, clients, st.sampled_from(USAGE_KEYS),
                                   st.sampled_from([0.0, 1.0, 6.0, 700.0, 5000.0, 1e6]),
                                   st.sampled_from([0.0, 30.0, 59.0, 60.0, 200.0])),
                         min_size=1, max_size=25)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(states, st.one_of(sample_lists, timed_samples), rule_sets)
def test_engines_agree_and_the_manifest_gives_the_after_column(spark, state, usage, rules):
    local = proposal_rows({"c": state}, usage, rules)
    assert spark_proposal_rows(spark, {"c": state}, samples_frame(spark, usage), rules) == local
    check_against_resolve(state, local, rules)


@settings(max_examples=150, deadline=None)
@given(states, st.one_of(sample_lists, timed_samples), rule_sets)
def test_manifest_gives_the_after_column(state, usage, rules):  # the local engine alone: many more cases
    check_against_resolve(state, proposal_rows({"c": state}, usage, rules), rules)


@settings(max_examples=150, deadline=None)
@given(states, st.one_of(sample_lists, timed_samples), st.sampled_from([1.0, 1.5]),
       st.sampled_from([0.0, 0.5]), st.sampled_from([60.0, 120.0]))
def test_applied_proposals_leave_no_bucket_over_its_quota(state, usage, headroom, tolerance, window):
    # Kafka's view of the proposals: with the maximum as the statistic, every bucket after the manifest is
    # applied carries at most its quota (a pin takes a member out of its bucket, which only lowers it)
    rules = Rules.of(stat="max", headroom=headroom, tolerance=tolerance)
    rows = proposal_rows({"c": state}, usage, rules, window=window)
    after = applied(state, manifest_text("c", None, rows, state, rules=rules))
    impact = impact_rows({"c": (state, after)}, usage, None, window=window)
    over = [r for r in impact.rows if r.would_throttle]
    assert not over, over
    # a principal written on its bucket's entity stays in that bucket (Kafka's tags name the entity)
    for row in rows:
        if row.action in ("raise", "lower", "limit"):
            groups = {r.after_group for r in impact.rows
                      if (r.user, r.client_id, r.key) == (row.user, row.client_id, row.key)}
            assert groups == {row.after_source}


# -- the command -----------------------------------------------------------------------------------

@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    write_snapshot(tmp_path / "east.json", STATE, "east-id")
    write_snapshot(tmp_path / "west.json", {Entity.user(None): {R: 50.0}}, "west-id")
    (tmp_path / "kqplan.toml").write_text(
        '[clusters.east]\nid = "east-id"\nsnapshot = "east.json"\n\n'
        '[clusters.west]\nid = "west-id"\nsnapshot = "west.json"\n', encoding="utf-8")
    lines = ["cluster,user,client_id,producer_byte_rate,consumer_byte_rate,request_percentage,ts"]
    for user, client, key, values in USAGE:
        for value in values:
            cells = {P: "", C: "", R: ""} | {key: repr(value)}
            lines.append(f"east,{user},{client},{cells[P]},{cells[C]},{cells[R]},1")
    lines += ["west,dave,x,,,0.2,1", "west,erin,y,,,30,1", "north,zed,z,1,,,1"]  # north: not in the inventory
    (tmp_path / "usage.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path


def rightsize(root: Path, *args: str | Path):
    # one sample per principal: --min-samples 1 lowers on it (a day of windows by default:
    # tests/fleet/min_samples_test.py); north is not in the inventory: its rows left out
    config, usage = root / "kqplan.toml", root / "usage.csv"
    return run_cli("--config", config, "fleet", "rightsize", "--usage", usage, "--min-samples", "1",
                   "--allow-unknown-clusters", *args)


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_command_writes_manifests_that_validate_and_plan(fleet, engine):
    out = fleet / f"out-{engine}"
    result = rightsize(fleet, "--out", out, "--engine", engine, "--min", "request_percentage=2")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert result.stdout == f"""\
east: 11 principals, 13 keys observed: 4 to raise, 2 to lower, 1 to limit, 1 pinned, 5 kept, \
0 held (too few samples to lower); 6 entities in {out}/east/rightsize.yaml
  lower  {{user=alice}} request_percentage: 10 from {{user=alice}} -> 6
  raise  {{user=bob}} producer_byte_rate: 1MiB from {{user=<default>}} -> 3MiB
  pin    {{user=dave, client-id=shared}} request_percentage: 10 from {{client-id=shared}} -> 10
  limit  {{user=dave}} request_percentage: unlimited -> 2
  raise  {{user=fay}} producer_byte_rate: 10MB from {{user=fay}} -> 25MiB (3 principals)
  lower  {{user=ops, client-id=tool}} producer_byte_rate: 100MiB from {{user=ops, client-id=tool}} -> 2MiB
west: 2 principals, 2 keys observed: 0 to raise, 1 to lower, 0 to limit, 0 pinned, 1 kept, \
0 held (too few samples to lower); 1 entities in {out}/west/rightsize.yaml
  lower  {{user=dave}} request_percentage: 50 from {{user=<default>}} -> 2
Fleet rightsize: 2 clusters, 7 entities proposed, 0 failed; table: {out}/proposals.parquet
"""
    rows = read_proposals(out / "proposals.parquet")
    assert [r.user for r in rows] == ["alice", "alice", "bob", "carol", "carol", "carol", "dave", "dave",
                                      "erin", "fay", "fay", "fay", "ops", "dave", "erin"]
    assert rows[-2].proposal == 2.0  # 0.2 × 1.5 rounds up to 1, floored by --min to 2
    assert pq.read_table(out / "proposals.parquet").schema.field("current_value").type == "double"
    # the key a code span, as in the plan comment; <default> escaped (GitHub would drop it as a tag)
    assert "| `{user=dave}` | 1 | `request_percentage` | 0.2 | 1 | 1 | 0.3 " \
        "| 50 from {user=&lt;default&gt;} | 2 | lower |" in (out / "proposals.md").read_text(encoding="utf-8")
    for cluster, summary in (("east", "Plan: 3 to add, 3 to change, 0 to delete."),
                             ("west", "Plan: 1 to add, 0 to change, 0 to delete.")):
        folder = out / cluster
        assert run_cli("--config", fleet / "kqplan.toml", "validate", folder).exit_code == 0
        assert run_cli("fmt", "--check", folder / "rightsize.yaml").exit_code == 0
        snapshot = fleet / f"{cluster}.json"
        plan = run_cli("--config", fleet / "kqplan.toml", "plan", folder, "--state", snapshot)
        assert plan.exit_code == 0, plan.stdout + plan.stderr
        assert summary in plan.stdout
    wrong = run_cli("--config", fleet / "kqplan.toml", "plan", out / "east", "--state", fleet / "west.json")
    assert wrong.exit_code == 1
    assert "wrong cluster" in wrong.stderr  # the cluster: guard


def test_both_engines_write_the_same_files(fleet):
    for engine in ("local", "spark"):
        assert rightsize(fleet, "--out", fleet / engine, "--engine", engine, "--stat", "max").exit_code == 0
    assert read_proposals(fleet / "local" / "proposals.parquet") == \
        read_proposals(fleet / "spark" / "proposals.parquet")
    for name in ("east/rightsize.yaml", "west/rightsize.yaml", "proposals.md"):
        assert (fleet / "local" / name).read_text() == (fleet / "spark" / name).read_text()


def test_markdown_and_json_summaries(fleet):
    md = rightsize(fleet, "--out", fleet / "o", "--format", "markdown", "--cluster", "west")
    assert md.exit_code == 0
    assert md.stdout.splitlines()[:10] == [
        "### kqplan fleet rightsize", "",
        "p99 of the observed usage × 1.5, rounded up; a current quota is kept when it covers the proposal "
        "and is at most 50% above it; a lowering needs 1 window of the bucket's usage (without ts: samples), "
        "or is held.", "",
        "| cluster | principals | raise | lower | limit | pin | keep | hold | entities | error |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        "| `west` | 2 | 0 | 1 | 0 | 0 | 1 | 0 | 1 | |", "", "#### `west`", ""]
    js = rightsize(fleet, "--out", fleet / "o", "--format", "json", "--cluster", "west")
    assert js.json["clusters"]["west"] | {"manifest": None} == {
        "principals": 2, "keys": 2, "keep": 1, "raise": 0, "lower": 1, "limit": 0, "pin": 0, "hold": 0,
        "entities": 1, "manifest": None, "error": None}


def test_policy_labels_are_checked_on_the_written_manifest(fleet):
    config = fleet / "kqplan.toml"
    config.write_text(config.read_text() + '\n[policy]\nrequired-labels = ["team"]\n', encoding="utf-8")
    failed = rightsize(fleet, "--out", fleet / "o", "--cluster", "west")
    assert failed.exit_code == 1
    assert "error[KQP154] {user=dave} has no label team" in failed.stderr
    assert "the proposals do not validate under" in failed.stderr
    labelled = rightsize(fleet, "--out", fleet / "o", "--cluster", "west", "--label", "team=platform")
    assert labelled.exit_code == 0


def test_an_unreachable_cluster_is_reported_and_the_others_written(fleet):
    config = fleet / "kqplan.toml"
    config.write_text(config.read_text() + '\n[clusters.down]\nbootstrap-server = "127.0.0.1:1"\n',
                      encoding="utf-8")
    result = rightsize(fleet, "--out", fleet / "o")
    assert result.exit_code == 1
    assert "down: error: cannot connect to 127.0.0.1:1" in result.stdout
    assert (fleet / "o" / "east" / "rightsize.yaml").exists()
    assert not (fleet / "o" / "down").exists()


@pytest.mark.parametrize(("args", "error"), [
    (("--headroom", "0.5"), "Error: --headroom 0.5 must be a number of at least 1\n"
     "  = help: it multiplies the statistic: 1.5 proposes 50 % above it\n"),
    (("--min", "producer_byte_rate=10Mb"),
     "Error: --min 'producer_byte_rate=10Mb': unknown byte unit 'Mb' in '10Mb'\n"),
    (("--label", "team"), "Error: --label 'team' is not KEY=VALUE\n  = help: e.g. --label team=platform\n"),
    (("--engine", "flink"), "Error: --engine must be one of local | spark, not 'flink'\n"),
    (("--usage", "missing.csv"), "Error: --usage missing.csv: no such file or directory\n"),
    (("--cluster", "eats"), "Error: no cluster 'eats' in "),
])
def test_bad_input_is_a_located_error_without_traceback(fleet, args, error, monkeypatch):
    monkeypatch.chdir(fleet)
    result = rightsize(fleet, "--out", fleet / "o", *args)
    assert result.exit_code == 1
    assert result.stderr.startswith(error)
    assert "Traceback" not in result.stderr
    assert "internal error" not in result.stderr


def test_out_must_be_a_directory(fleet):
    (fleet / "file").write_text("")
    result = rightsize(fleet, "--out", fleet / "file")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[0] == f"Error: --out {fleet / 'file'} is a file"


@pytest.mark.slow
def test_through_spark_connect_the_same_files(fleet, connect_server):
    # in a process of its own: pyspark refuses a Connect session beside this one's local session
    remote = run_kqplan("--config", fleet / "kqplan.toml", "fleet", "rightsize", "--usage",
                        fleet / "usage.csv", "--out", fleet / "spark", "--engine", "spark",
                        "--spark-remote", connect_server, "--min-samples", "1", "--allow-unknown-clusters")
    assert remote.exit_code == 0, remote.stdout + remote.stderr
    local = rightsize(fleet, "--out", fleet / "local")
    assert local.stdout == remote.stdout.replace(str(fleet / "spark"), str(fleet / "local"))
    assert read_proposals(fleet / "local" / "proposals.parquet") == \
        read_proposals(fleet / "spark" / "proposals.parquet")
    assert (fleet / "local" / "east" / "rightsize.yaml").read_text() == \
        (fleet / "spark" / "east" / "rightsize.yaml").read_text()
