"""``kind: QuotaTests`` documents: tests on resolved quotas, read beside the manifests (the same
files and layers), checked with located errors, and turned into :class:`kqplan.core.intent.QuotaTest`.

The shape is the pydantic models' (the source of ``schemas/quota-tests-v1.json``); the rules a
shape cannot say are checked here: a connection has real names, a key applies to it, a value
parses as a manifest's does (units for byte rates), ``from`` can apply to the connection, and a
test's name is its own.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

from kqplan.core.diagnostics import Diagnostic, Loc, Pending, did_you_mean, locate
from kqplan.core.entity import CLIENT_ID, IP, USER, Entity, EntityKind, Name, unescape_name
from kqplan.core.intent import Bound, Connection, Expectation, QuotaTest
from kqplan.core.quotas import QUOTA_KEYS, keys_for
from kqplan.manifest.head import TESTS_KIND
from kqplan.manifest.models import QuotaScalar
from kqplan.manifest.parse import yaml_type
from kqplan.manifest.source import SourceFile
from kqplan.manifest.values import Values

__all__ = ["TESTS_KIND", "QuotaTestsDocument", "duplicate_names", "json_schema", "read_tests"]

INVALID_TEST = "KQP200"
"""A quota test that cannot be judged as written (its connection, ``from``, a bound, its name)."""
UNLIMITED = "unlimited"


class Bounds(BaseModel):
    """``{at-most: 50MiB}``, ``{at-least: 1MiB}``, or both: a range."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    at_most: QuotaScalar | None = Field(default=None, alias="at-most",
                                        description="The resolved value is at most this (unlimited fails).")
    at_least: QuotaScalar | None = Field(default=None, alias="at-least",
                                         description="The resolved value is at least this (unlimited holds).")


class TestConnection(BaseModel):
    """A connection: a principal (``user``) with its ``client-id`` (none: every client-id it may
    send; ``""``: a client that sends none), or an ``ip`` address."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    user: StrictStr | None = Field(default=None, description="The principal's name (no 'User:').")
    client_id: StrictStr | None = Field(default=None, alias="client-id", description=(
        "The client-id it connects with; leave it out for every client-id, '' for none sent."))
    ip: StrictStr | None = Field(default=None, description="An address (connection_creation_rate).")


class TestEntry(BaseModel):
    """One test: a connection and the quotas Kafka must resolve for it."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    name: StrictStr = Field(description="What the test holds, unique among all tests.")
    principal: TestConnection
    expect: dict[StrictStr, QuotaScalar | Bounds] = Field(min_length=1, description=(
        "Quota key → the exact effective value (a number, a byte size like 10MiB, or unlimited: no "
        "quota at any level), or bounds {at-most: …, at-least: …}."))
    from_: dict[StrictStr, StrictStr] | None = Field(default=None, alias="from", description=(
        "The entity that must supply every expected key, written as in a manifest "
        "({user: alice}, {user: <default>, client-id: app})."))


class _Entry(TestEntry):
    """A test as read: each expected value is checked by :func:`_expectations`, in kqplan's words
    (a union's errors would name each of its members)."""

    expect: dict[StrictStr, Any] = Field(min_length=1)


class QuotaTestsDocument(BaseModel):
    """A kqplan quota tests file (``apiVersion: kqplan/v1``, ``kind: QuotaTests``)."""

    model_config = ConfigDict(extra="forbid", title="kqplan QuotaTests document", json_schema_extra={
        "$id": "https://kqplan.dev/schemas/quota-tests-v1.json"})
    apiVersion: Literal["kqplan/v1"]
    kind: Literal["QuotaTests"]
    tests: list[TestEntry] = Field(min_length=1)


FIELDS = {
    (): ("apiVersion", "kind", "tests"),
    ("tests", "*"): ("name", "principal", "expect", "from"),
    ("tests", "*", "principal"): ("user", "client-id", "ip"),
    ("tests", "*", "expect", "*"): ("at-most", "at-least"),
}
"""The fields of each place, for "did you mean" (:func:`kqplan.manifest.shape.translate`)."""


def json_schema() -> dict[str, Any]:
    """The QuotaTests JSON Schema as checked in under ``schemas/``."""
    schema = QuotaTestsDocument.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


class _Document(BaseModel):
    """The document around its tests, each test checked on its own (every test's errors in one run)."""

    model_config = ConfigDict(extra="forbid")
    apiVersion: Literal["kqplan/v1"]
    kind: Literal["QuotaTests"]
    tests: list[Any] = Field(min_length=1)


def _shape(source: SourceFile, raw: dict[str, Any], model: type[BaseModel], at: Loc = ()) -> list[Diagnostic]:
    """The part of ``raw`` at ``at`` checked against ``model``: located errors."""
    from kqplan.manifest.shape import translate

    part: Any = raw
    for key in at:
        part = part[key]
    try:
        model.model_validate(part)
    except ValidationError as exc:
        pendings: dict[tuple[Loc, str], Pending] = {}
        for err in exc.errors():
            p = translate(raw, {**err, "loc": (*at, *err["loc"])}, FIELDS)
            pendings.setdefault((p.loc, p.code), p)
        return [locate(source, p) for p in pendings.values()]
    return []


def read_tests(source: SourceFile, raw: dict[str, Any]) -> tuple[list[QuotaTest], list[Diagnostic]]:
    """The tests of one parsed ``QuotaTests`` file (the valid ones), and its located problems."""
    problems = _shape(source, raw, _Document)
    if problems:
        return [], problems
    found: list[tuple[SourceFile, Pending]] = []
    values = Values(found)
    tests = []
    for i, entry in enumerate(raw["tests"]):
        shape = _shape(source, raw, _Entry, ("tests", i))
        if shape:
            problems += shape
            continue
        test = _test(source, ("tests", i), entry, values)
        if test is not None:
            tests.append(test)
    return tests, [*problems, *(locate(s, p) for s, p in found)]


def _test(source: SourceFile, loc: Loc, entry: dict[str, Any], values: Values) -> QuotaTest | None:
    connection = _connection(source, (*loc, "principal"), entry["principal"], values)
    supplier = _supplier(source, loc, entry.get("from"), connection, values) if connection else None
    expect: list[Expectation] = []
    ok = connection is not None and supplier is not False
    kind = EntityKind.IP if entry["principal"].get(IP) is not None else EntityKind.CLIENT
    for key, written in entry["expect"].items():
        at = (*loc, "expect", key)
        if key not in keys_for(kind):
            _wrong_key(source, at, key, kind, values)
            ok = False
            continue
        read = _expectations(source, at, key, written, values)
        ok = ok and read is not None
        expect += read or []
    if not ok:
        return None
    assert connection is not None
    assert supplier is not False
    return QuotaTest(entry["name"], connection, tuple(expect), supplier, source, loc)


def _connection(source: SourceFile, loc: Loc, raw: dict[str, Any], values: Values) -> Connection | None:
    user, client_id, ip = raw.get(USER), raw.get(CLIENT_ID), raw.get(IP)
    problem = None
    if ip is not None and (user is not None or client_id is not None):
        problem = "an ip connection has no user or client-id (ip quotas apply per address)"
    elif ip is None and not user:
        problem = "a connection needs a user (the principal; ANONYMOUS on a listener without " \
                  "authentication), or an ip"
    elif any(n is not None and unescape_name(n) is None for n in (user, client_id, ip)):
        problem = "a connection has real names, not <default> (test the principals a default " \
                  "entity reaches)"
    if problem is not None:
        values.report(source, Pending(INVALID_TEST, problem, loc,
                                      hint="e.g. `principal: {user: alice, client-id: app}`"))
        return None
    if ip is not None:
        return Connection(ip=unescape_name(ip))
    assert user is not None
    return Connection(user=unescape_name(user), client_id=None if client_id is None else
                      (unescape_name(client_id) if client_id else ""))


def _supplier(source: SourceFile, loc: Loc, raw: dict[str, str] | None, connection: Connection,
              values: Values) -> Entity | Literal[False] | None:
    """``from`` as an entity; False after reporting why it cannot supply the connection."""
    if raw is None:
        return None
    at = (*loc, "from")
    unknown = [t for t in raw if t not in (USER, CLIENT_ID, IP)]
    if unknown or not raw:
        values.report(source, Pending(INVALID_TEST, "`from` is an entity: user, client-id and/or ip",
                                      (*at, unknown[0]) if unknown else at, at_key=bool(unknown),
                                      hint="e.g. `from: {user: alice}` or `from: {user: <default>}`"))
        return False
    parts: list[tuple[str, Name]] = [(t, unescape_name(raw[t])) for t in (USER, CLIENT_ID, IP) if t in raw]
    entity = Entity(parts)
    names = {USER: connection.user, CLIENT_ID: connection.client_id, IP: connection.ip}
    reaches = entity.kind is (EntityKind.IP if connection.ip is not None else EntityKind.CLIENT) and all(
        name is None or (t == CLIENT_ID and names[t] is None) or name == names[t] for t, name in parts)
    if not reaches:
        values.report(source, Pending(
            INVALID_TEST, f"`from` {entity.display} never applies to {connection.display}", at,
            hint="name an entity of one of the levels Kafka looks up for this connection "
            "(kqplan resolve --show-overridden lists them)"))
        return False
    return entity


def _wrong_key(source: SourceFile, loc: Loc, key: str, kind: EntityKind, values: Values) -> None:
    valid = keys_for(kind)
    if key in QUOTA_KEYS:
        kind_text = "ip" if kind is EntityKind.IP else "user/client-id"
        values.report(source, Pending("KQP111", f"{key} does not apply to {kind_text} connections",
                                      loc, at_key=True, hint=f"they take {', '.join(valid)}"))
        return
    guess = did_you_mean(key, valid)
    hint = f"did you mean '{guess}'?" if guess else f"valid keys: {', '.join(valid)}"
    values.report(source, Pending("KQP110", f"unknown quota key '{key}'", loc, at_key=True, hint=hint))


def _expectations(source: SourceFile, loc: Loc, key: str, written: Any,
                  values: Values) -> list[Expectation] | None:
    if written == UNLIMITED:
        return [Expectation(key, Bound.EXACT, None, loc)]
    if not isinstance(written, dict):
        if isinstance(written, bool) or not isinstance(written, int | float | str):
            values.report(source, Pending("KQP021", f"{key}: expected a number, a byte size like 10MiB, "
                                          f"unlimited, or bounds, got {yaml_type(written)}", loc,
                                          hint=f"e.g. `{key}: 10MiB` or `{key}: {{at-most: 50MiB}}`"))
            return None
        value = values.parse(source, loc, key, written)
        return None if value is None else [Expectation(key, Bound.EXACT, value, loc)]
    unknown = [k for k in written if k not in ("at-most", "at-least")]
    if unknown:
        guess = did_you_mean(str(unknown[0]), ("at-most", "at-least"))
        hint = f"did you mean '{guess}'?" if guess else "bounds are at-most and at-least"
        values.report(source, Pending("KQP020", f"unknown field '{unknown[0]}' in {key}'s bounds",
                                      (*loc, unknown[0]), at_key=True, hint=hint))
        return None
    out = []
    for name, bound in (("at-most", Bound.AT_MOST), ("at-least", Bound.AT_LEAST)):
        if name not in written:
            continue
        if written[name] == UNLIMITED or written[name] is None:
            values.report(source, Pending(INVALID_TEST, f"{key}: {name} takes a value, not "
                                          f"{written[name] or 'null'}", (*loc, name),
                                          hint=f"for no limit at any level write `{key}: unlimited`"))
            return None
        value = values.parse(source, (*loc, name), key, written[name])
        if value is None:
            return None
        out.append(Expectation(key, bound, value, (*loc, name)))
    if not out:
        values.report(source, Pending(INVALID_TEST, f"{key}: bounds are at-most and/or at-least", loc,
                                      hint=f"e.g. `{key}: {{at-most: 50MiB}}`"))
        return None
    return out


def duplicate_names(tests: list[QuotaTest]) -> list[Diagnostic]:
    """A test's name identifies it in reports and plans: each name once, in all files."""
    first: dict[str, QuotaTest] = {}
    out = []
    for test in tests:
        earlier = first.setdefault(test.name, test)
        if earlier is not test:
            out.append(locate(test.source, Pending(
                INVALID_TEST, f"a test named '{test.name}' already exists", (*test.loc, "name"),
                related=((earlier.source, (*earlier.loc, "name"), "first named"),),
                hint="give each test a name of its own")))
    return out
