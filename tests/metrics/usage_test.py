"""``kqplan fleet usage`` against a Prometheus answering scripted series (a tiny local HTTP server):
the rows per bucket (a pair as a principal's row, a user-level or client-id-level bucket as a
bucket's row, never spread over members), the {cluster} placeholder, what it asks, and every
failure a located error with exit 1 — never an empty file that would say "no usage"."""

from __future__ import annotations

import json

import jsonschema
import pyarrow.parquet as pq

import kqplan.cli.fleet  # noqa: F401  (registers the command, whatever kqplan.cli.main lists)
from kqplan.fleet.usage_schema import NAMES, json_schema
from tests.helpers import fleet_cli
from tests.metrics.server import Answer, Request, matrix, serve

T0 = 1_700_000_000.0
HOSTILE = 'odd "app":v2'


def _inventory(tmp_path, *names: str):
    (tmp_path / "kqplan.toml").write_text("".join(f'[clusters.{n}]\nsnapshot = "{n}.json"\n' for n in names))
    return tmp_path


def _script(request: Request) -> Answer:
    query = request.params.get("query", "")
    if 'resource="Produce"' in query:
        quoted = '"' + HOSTILE.replace('"', '\\"') + '"'
        return matrix(({"user": "alice", "client_id": "a1"}, [(T0, 100.0), (T0 + 60, 200.0)]),
                      ({"user": "bob"}, [(T0, 50.0), (T0 + 60, float("nan"))]),
                      ({"client_id": quoted}, [(T0, 7.0)]),
                      ({"instance": "b1"}, [(T0, 1.0)]))
    if 'resource="Fetch"' in query:
        return matrix(({"user": "alice", "client_id": "a1"}, [(T0, 300.0)]))
    return matrix()


def _rows(path):
    return sorted(pq.read_table(path).to_pylist(), key=lambda r: (r["bucket"] or "", r["user"] or "",
                                                                   r["client_id"] or "", r["ts"]))


def test_rows_per_bucket_as_kafka_measured_them(tmp_path):
    root = _inventory(tmp_path, "prod")
    with serve(_script) as served:
        result = fleet_cli(root, "usage", "--prometheus", served.url, "--since", "2m", "--step", "60s",
                           "--out", tmp_path / "out")
    assert result.exit_code == 0, result.stdout + result.stderr
    path = tmp_path / "out" / "prod.parquet"
    assert pq.read_schema(path).names == list(NAMES)
    rows = _rows(path)
    none = dict.fromkeys(("request_percentage", "controller_mutation_rate"))
    assert rows == [
        {"cluster": "prod", "user": "alice", "client_id": "a1", "bucket": None, "ts": T0,
         "producer_byte_rate": 100.0, "consumer_byte_rate": 300.0, **none},
        {"cluster": "prod", "user": "alice", "client_id": "a1", "bucket": None, "ts": T0 + 60,
         "producer_byte_rate": 200.0, "consumer_byte_rate": None, **none},
        {"cluster": "prod", "user": None, "client_id": HOSTILE, "bucket": "client-id", "ts": T0,
         "producer_byte_rate": 7.0, "consumer_byte_rate": None, **none},
        {"cluster": "prod", "user": "bob", "client_id": None, "bucket": "user", "ts": T0,
         "producer_byte_rate": 50.0, "consumer_byte_rate": None, **none},  # NaN: no sample
    ]
    validator = jsonschema.Draft202012Validator(json_schema())
    for row in rows:
        validator.validate(row)
    assert "1 series carry neither label 'user' nor 'client_id'" in result.stderr
    assert "2 of them user-level or client-id-level buckets" in result.stdout
    queries = [r.params["query"] for r in served.requests]
    assert queries[0] == ('max by (user, client_id) (avg_over_time(kafka_server_quota_byte_rate'
                          '{resource="Produce"}[60s]))')
    assert len(queries) == 4


def test_the_selector_placeholder_picks_each_cluster(tmp_path):
    root = _inventory(tmp_path, "east", "west")
    with serve(_script) as served:
        result = fleet_cli(root, "usage", "--prometheus", served.url, "--since", "1m",
                           "--selector", '{kafka_cluster="{cluster}"}', "--out", tmp_path / "out")
    assert result.exit_code == 0, result.stdout + result.stderr
    asked = {r.params["query"].split("kafka_cluster=")[1].split("}")[0] for r in served.requests}
    assert asked == {'"east"', '"west"'}
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"east.parquet", "west.parquet"}
    assert {r["cluster"] for r in pq.read_table(tmp_path / "out" / "west.parquet").to_pylist()} == {"west"}


def test_several_clusters_need_the_placeholder(tmp_path):
    root = _inventory(tmp_path, "east", "west")
    result = fleet_cli(root, "usage", "--prometheus", "http://127.0.0.1:9", "--selector",
                       '{kafka_cluster="prod"}', "--out", tmp_path / "out")
    assert result.exit_code == 1
    assert "every cluster would get the same series" in result.stderr
    assert "{cluster}" in result.stderr
    assert not (tmp_path / "out").exists()


def test_no_series_is_an_error_not_an_empty_file(tmp_path):
    root = _inventory(tmp_path, "prod")
    with serve(lambda _: matrix()) as served:
        result = fleet_cli(root, "usage", "--prometheus", served.url, "--since", "1m",
                           "--out", tmp_path / "out")
    assert result.exit_code == 1
    assert "prod: failed: Prometheus at" in result.stdout
    assert "has no usage series in the window" in result.stdout
    assert not (tmp_path / "out" / "prod.parquet").exists()


def test_prometheus_errors_name_the_server(tmp_path):
    root = _inventory(tmp_path, "prod")
    body = json.dumps({"status": "error", "errorType": "bad_data", "error": "parse error"}).encode()
    for answer, said in ((Answer(400, body), "answered HTTP 400 Bad Request: bad_data: parse error"),
                         (Answer(200, b"<html>login</html>", "text/html"), "not JSON"),
                         (Answer(503, b""), "HTTP 503")):
        with serve(lambda _, a=answer: a) as served:
            result = fleet_cli(root, "usage", "--prometheus", served.url, "--since", "1m",
                               "--out", tmp_path / "out")
        assert result.exit_code == 1, said
        assert said in result.stdout, result.stdout
        assert "Traceback" not in result.stdout + result.stderr
    down = fleet_cli(root, "usage", "--prometheus", "http://127.0.0.1:9", "--since", "1m",
                     "--out", tmp_path / "out")
    assert down.exit_code == 1
    assert "cannot reach Prometheus at http://127.0.0.1:9" in down.stdout


def test_a_bad_selector_is_refused_before_any_query(tmp_path):
    root = _inventory(tmp_path, "prod")
    result = fleet_cli(root, "usage", "--prometheus", "http://127.0.0.1:9", "--selector", "{oops",
                       "--out", tmp_path / "out")
    assert result.exit_code == 1
    assert "--selector" in result.stderr
