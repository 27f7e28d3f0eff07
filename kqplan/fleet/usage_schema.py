"""The usage sample's columns, written once: their names, what each holds, which are required.

Every engine takes its column set from here — the local reader (:mod:`kqplan.fleet.usage`), the
DuckDB engine (:mod:`kqplan.fleet.columnar_read`) and Spark (:mod:`kqplan.fleet.spark_usage`) —
and ``schemas/usage-v1.json`` is :func:`json_schema` (a test holds the file equal to it). A usage
file's columns (a CSV header, a Parquet schema, a Spark table's columns, a JSON line's names) are
checked by :func:`column_problem`: a column that is none of these, or a required one missing, is
refused, with the closest name (``client-id`` -> ``client_id``), never read as nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kqplan.core.diagnostics import did_you_mean
from kqplan.core.entity import visible
from kqplan.core.quotas import CLIENT_KEYS

NUMBER = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$"
"""A number written as text: a ``ts`` in seconds since the epoch, a rate in a CSV cell (one regex,
used by every engine)."""
TIME = (r"^[0-9]{4}-[0-9]{2}-[0-9]{2}"
        r"([T ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})?)?$")
"""A ``ts`` written as an ISO 8601 date or time: a date, or a date and a time to the second (with
up to 6 decimals), then ``Z``, an offset ``+HH:MM``, or nothing (UTC)."""

USER_BUCKET, CLIENT_BUCKET = "user", "client-id"
BUCKETS = (USER_BUCKET, CLIENT_BUCKET)
"""The values of ``bucket``: a row of a ``{user=U}`` or of a ``{client-id=C}`` quota bucket."""

SCHEMA_ID = "https://kqplan.dev/schemas/usage-v1.json"
SCHEMA_FILE = "schemas/usage-v1.json"


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a usage sample: its name, whether every row must have it, and its values as
    JSON Schema alternatives (``anyOf``)."""

    name: str
    required: bool
    description: str
    values: tuple[dict[str, Any], ...]


_NAME = ({"type": "string", "minLength": 1},)
_RATE = ({"type": "number", "minimum": 0}, {"type": "string", "pattern": NUMBER},
         {"type": "string", "maxLength": 0}, {"type": "null"})

COLUMNS: tuple[Column, ...] = (
    Column("cluster", True, "The inventory cluster the sample was taken on ([clusters.NAME] in kqplan.toml); "
           "a name the inventory does not list is an error (--allow-unknown-clusters: a warning).", _NAME),
    Column("user", True, "The connection's user principal (its name, without User:); empty or null only "
           "in a row of a {client-id=C} bucket (bucket client-id), which covers all users.",
           ({"type": "string", "minLength": 1}, {"type": "string", "maxLength": 0}, {"type": "null"})),
    Column("client_id", False, "The client-id the connection sends; empty, null or missing: a client "
           "that sends none. An integer is read as its decimal text.",
           ({"type": "string"}, {"type": "integer"}, {"type": "null"})),
    Column("bucket", False, "Empty, null or missing: the row is one principal's (user, client_id). "
           "'user': the row is a {user=U} quota bucket's, all of U's client-ids together (client_id "
           "empty); 'client-id': a {client-id=C} bucket's, all users of C together (user empty). "
           "Kafka measures usage per bucket (kqplan fleet usage writes such rows).",
           ({"type": "string", "enum": list(BUCKETS)}, {"type": "string", "maxLength": 0},
            {"type": "null"})),
    Column("ts", False, "When the sample was taken: seconds since the epoch (not milliseconds), an ISO "
           "8601 date or time (UTC when it has no offset), or a Parquet timestamp; empty or null: no "
           "time (the cluster's buckets are then summed, not windowed).",
           ({"type": "number", "minimum": -62135596800, "maximum": 253402300799},
            {"type": "string", "pattern": NUMBER}, {"type": "string", "pattern": TIME},
            {"type": "string", "maxLength": 0}, {"type": "null"})),
    *(Column(key, False, f"The observed {key}: a finite number at least 0 (bytes per second, percent, "
             "mutations per second), as a number or as text; empty or null: no sample of it.", _RATE)
      for key in CLIENT_KEYS),
)
"""The usage sample's columns, in the order every engine lists them."""

NAMES: tuple[str, ...] = tuple(c.name for c in COLUMNS)
"""cluster, user, client_id, bucket, ts, producer_byte_rate, consumer_byte_rate, request_percentage,
controller_mutation_rate."""
REQUIRED: tuple[str, ...] = tuple(c.name for c in COLUMNS if c.required)
RATES: tuple[str, ...] = tuple(CLIENT_KEYS)
"""The columns that hold observed rates: the four user/client-id quota keys."""
COLUMNS_HINT = (f"columns: {', '.join(REQUIRED)} (required), client_id, bucket, ts and any of "
                f"{', '.join(RATES)} ({SCHEMA_FILE})")
_EMPTY = [{"type": "string", "maxLength": 0}, {"type": "null"}]
_NAMED = [{"type": "string", "minLength": 1}, {"type": "integer"}]


def _rows_rule() -> list[dict[str, Any]]:
    """What ties ``bucket`` to the names: a principal's row and a ``{user=U}`` bucket's name a
    user; a ``{user=U}`` bucket's row has no client_id, a ``{client-id=C}`` bucket's a client_id
    and no user."""
    def when(bucket: str) -> dict[str, Any]:
        return {"properties": {"bucket": {"const": bucket}}, "required": ["bucket"]}

    return [
        {"if": when(CLIENT_BUCKET),
         "then": {"required": ["client_id"], "properties": {"user": {"anyOf": _EMPTY},
                                                            "client_id": {"anyOf": _NAMED}}},
         "else": {"properties": {"user": {"type": "string", "minLength": 1}}}},
        {"if": when(USER_BUCKET), "then": {"properties": {"client_id": {"anyOf": _EMPTY}}}},
    ]


def json_schema() -> dict[str, Any]:
    """One usage sample (a JSON line; a CSV or Parquet row alike) as a JSON Schema."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "kqplan fleet usage sample (one row of fleet impact's and fleet rightsize's --usage)",
        "type": "object",
        "required": list(REQUIRED),
        "additionalProperties": False,
        "properties": {c.name: {"description": c.description, "anyOf": [dict(v) for v in c.values]}
                       for c in COLUMNS},
        "allOf": _rows_rule(),
    }


def _quoted(names: Sequence[str]) -> str:
    return ", ".join(f"'{visible(n)}'" for n in names)


def missing_column(names: Sequence[str]) -> str | None:
    """``no user column`` when a required column is not among ``names`` (with the present column
    that looks like it: ``(is 'usr' meant to be user?)``); None when every required one is there."""
    for column in REQUIRED:
        if column not in names:
            guess = did_you_mean(column, [n for n in names if n not in NAMES])
            meant = f" (is {_quoted([guess])} meant to be {column}?)" if guess else ""
            return f"no {column} column{meant}"
    return None


def unknown_columns(names: Sequence[str]) -> str | None:
    """``unknown column 'client-id' (did you mean 'client_id'?)`` when a name of ``names`` is none of
    :data:`NAMES` (each told with the closest known name; the first five); None when all are known."""
    unknown = [n for n in names if n not in NAMES]
    if not unknown:
        return None
    told = []
    for name in unknown[:5]:
        guess = did_you_mean(name.strip().lower().replace("-", "_").replace(" ", "_"), NAMES)
        told.append(_quoted([name]) + (f" (did you mean '{guess}'?)" if guess else ""))
    more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
    return f"unknown column{'s' if len(unknown) > 1 else ''} {', '.join(told)}{more}"


def column_problem(names: Sequence[str]) -> str | None:
    """What is wrong with a usage file's column set (a CSV header, a Parquet schema, a table's
    columns): a required column missing, else a column that is none of :data:`NAMES`; None: nothing."""
    return missing_column(names) or unknown_columns(names)


BUCKET_HINT = ("a bucket row's usage is all of its members' together, and a plan may split the bucket "
               "in shares no metric shows; give per-(user, client-id) rows: a very high "
               "{user=<default>, client-id=<default>} quota on the cluster makes Kafka measure every "
               "(user, client-id) pair on its own (docs/observability.md)")


def bucket_problem(record: Mapping[str, object]) -> tuple[str, str] | None:
    """Why a usage row is refused for its ``bucket`` (and the hint), None for a principal's row.
    A row of a quota bucket (``bucket`` user or client-id: ``kqplan fleet usage`` writes them for
    Kafka's user-level and client-id-level sensors) is refused where only principals' rows are read
    (``fleet rightsize``, on every engine); another value is no bucket."""
    from kqplan.core.entity import CLIENT_ID, USER, Entity

    raw = record.get("bucket")
    if raw is None or raw == "":
        return None
    if raw not in BUCKETS:
        return (f"bucket is not one of {', '.join(BUCKETS)} (or empty): {raw!r}",
                "empty for a principal's row; " + COLUMNS_HINT)
    column, tag = ("client_id", CLIENT_ID) if raw == CLIENT_BUCKET else ("user", USER)
    name = record.get(column)
    shown = Entity(((tag, str(name)),)).display if isinstance(name, str | int) and name != "" else raw
    return (f"a row of the quota bucket {shown} (bucket {raw}), all its members' usage together: fleet "
            "rightsize sizes each principal's quota from its own usage (rows with an empty bucket), not "
            "a bucket's (fleet impact and plan --usage read bucket rows)", BUCKET_HINT)
