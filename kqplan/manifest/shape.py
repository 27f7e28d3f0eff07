"""The shape of a parsed manifest: the usual file checked by hand (no pydantic), any other one by
the pydantic models, whose errors become located diagnostics in kqplan's words."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kqplan.core.diagnostics import Diagnostic, Loc, Pending, did_you_mean, locate
from kqplan.manifest.head import API_VERSION, KIND, OWNERSHIP_FIELDS, ManifestHead, plain_head
from kqplan.manifest.parse import yaml_type
from kqplan.manifest.source import SourceFile

if TYPE_CHECKING:
    from kqplan.manifest.models import Manifest


_FIELDS = {
    (): ("apiVersion", "kind", "cluster", "ownership", "profiles", "released", "entities"),
    ("ownership",): OWNERSHIP_FIELDS,
    ("entities", "*"): ("user", "client-id", "ip", "profile", "quotas"),
}


def _trim_loc(raw: Any, loc: Sequence[str | int], *, keep_missing: bool) -> Loc:
    """Keep the part of a pydantic loc that indexes real data (drops union-member tags)."""
    out: list[str | int] = []
    node = raw
    for part in loc:
        in_map = isinstance(node, dict) and part in node
        in_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        if in_map or in_list:
            node = node[part]
        else:
            if keep_missing and isinstance(part, str):
                out.append(part)  # the missing key itself; the caller points at its parent
            break
        out.append(part)
    return tuple(out)


def _value_at(raw: Any, loc: Loc) -> Any:
    node = raw
    for part in loc:
        node = node[part]  # loc was trimmed to existing data
    return node


def _where(loc: Loc) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "manifest"


def translate(raw: dict[str, Any], error: Any,
              fields: dict[tuple[str, ...], tuple[str, ...]] | None = None) -> Pending:
    """One pydantic error → a pending kqplan diagnostic in kqplan's words (``fields``: the valid
    fields of each place, for "did you mean"; a manifest's by default)."""
    etype: str = error["type"]
    loc = _trim_loc(raw, error["loc"], keep_missing=etype == "missing")
    where = _where(loc)
    if etype == "missing":
        name = str(error["loc"][-1])
        parent = loc[:-1] if loc and loc[-1] == name else loc
        hint = {"apiVersion": f"add `apiVersion: {API_VERSION}`", "kind": f"add `kind: {KIND}`",
                "scope": "list entity patterns, e.g. `scope: [{user: \"payments-*\"}]`"}.get(name)
        return Pending("KQP022", f"missing required field '{name}' in {_where(parent)}", parent,
                       hint=hint)
    if etype == "extra_forbidden":
        name = str(loc[-1])
        generic = tuple("*" if isinstance(p, int) else p for p in loc[:-1])
        choices = (_FIELDS if fields is None else fields).get(generic, ())
        guess = did_you_mean(name, choices)
        hint = f"did you mean '{guess}'?" if guess else (
            f"valid fields here: {', '.join(choices)}" if choices else None)
        return Pending("KQP020", f"unknown field '{name}' in {_where(loc[:-1])}", loc, at_key=True,
                       hint=hint)
    if etype == "literal_error":
        value = _value_at(raw, loc)
        expected = error.get("ctx", {}).get("expected", "")
        field_name = str(loc[-1])
        hint = f"this kqplan reads `{field_name}: {expected.strip(chr(39))}`"
        if field_name == "kind":
            hint = "this kqplan reads `kind: ClientQuotas` (quota entities) and `kind: QuotaTests` (tests)"
        return Pending("KQP011" if field_name == "apiVersion" else "KQP012",
                       f"unsupported {field_name} {value!r}", loc, hint=hint)
    if error["loc"] and error["loc"][-1] == "[key]":  # a mapping key, not its value, is wrong
        key = loc[-1] if loc else "?"
        what = "a quota key" if "quotas" in loc[-2:-1] or loc[:1] == ("profiles",) else "a key"
        return Pending("KQP021", f"{_where(loc[:-1])}: {what} must be a name, got {yaml_type(key)} "
                       f"{key!r}", loc, at_key=True,
                       hint="write the key as text, e.g. `producer_byte_rate: 1MiB`"
                       if what == "a quota key" else f"quote it, e.g. '{key}'")
    value = _value_at(raw, loc) if loc else raw
    got = yaml_type(value)
    if "quotas" in loc[-2:-1] or (len(loc) >= 3 and loc[0] == "profiles"):
        return Pending("KQP021", f"{where}: quota value must be a number (or a byte size like "
                       f"10MiB), got {got}", loc, hint="write e.g. `1048576` or `1MiB`")
    expectations = {
        "string_type": ("a string", "quote it, e.g. '12345'"),
        "bool_type": ("true or false", None),
        "dict_type": ("a mapping", None),
        "model_type": ("a mapping", None),
        "model_attributes_type": ("a mapping", None),
        "list_type": ("a list", "start each item with `- `"),
        "too_short": ("a non-empty list", None),
    }
    if etype in expectations:
        wanted, hint = expectations[etype]
        if etype == "too_short" and isinstance(value, dict):
            wanted = "a non-empty mapping"
        if etype == "string_type" and got != "a number":
            hint = None
        return Pending("KQP021", f"{where} must be {wanted}, got {got}"
                       if etype != "too_short" else f"{where} must be {wanted}", loc, hint=hint)
    return Pending("KQP021", f"{where}: {error['msg']}", loc)


_NAME_FIELDS = ("user", "client-id", "ip", "profile")
_QUOTA_VALUE_TYPES = (int, float, str, type(None))  # exactly these: StrictInt refuses a bool


def plain_entities(entries: Any) -> bool:
    """Whether every entity entry is plainly of the shape ``EntityEntry`` accepts: checked here in
    one loop, because pydantic building 100k models costs 0.2 s (and compile reads the raw
    data anyway). Anything unusual (metadata, a wrong type, a non-string key) answers False,
    and pydantic checks the whole file, locating every error, as before."""
    if not isinstance(entries, list):
        return False
    value_types = _QUOTA_VALUE_TYPES
    for entry in entries:
        if entry.__class__ is not dict:
            return False
        if entry.keys() <= _USUAL_FIELDS:  # the usual entry: only user and client-id to check
            user = entry.get("user")
            client = entry.get("client-id")
            if (user is not None and user.__class__ is not str) or (
                    client is not None and client.__class__ is not str):
                return False
        else:
            for field_name in _NAME_FIELDS:
                value = entry.get(field_name)
                if value is not None and value.__class__ is not str:
                    return False
            if not entry.keys() <= _COMMON_FIELDS and not _plain_rest(entry):
                return False
        quotas = entry.get("quotas", _NO_QUOTAS)
        if quotas.__class__ is not dict:
            return False
        for key, value in quotas.items():
            if key.__class__ is not str or value.__class__ not in value_types:
                return False
    return True


_NO_QUOTAS: dict[str, Any] = {}
_COMMON_FIELDS = frozenset({*_NAME_FIELDS, "quotas"})
_USUAL_FIELDS = frozenset({"user", "client-id", "quotas"})


def _plain_rest(entry: dict[Any, Any]) -> bool:
    """The rarer fields of an entry: ``override``/``protect`` booleans, ``expires`` text, extra
    (custom type) keys."""
    for key, value in entry.items():
        if key.__class__ is not str or key in ("metadata", "client_id"):  # client_id: pydantic's name
            return False
        if key in ("override", "protect") and value.__class__ is not bool:
            return False
        if key == "expires" and value.__class__ not in (str, int, float, bool):
            return False
    return True


def validate_model(source: SourceFile, raw: dict[str, Any]
                   ) -> tuple[Manifest | ManifestHead | None, list[Diagnostic]]:
    """Shape check of one parsed file; every error located. A plainly valid file (the usual one)
    is checked by hand and never imports pydantic; any other goes through the models."""
    entries = raw.get("entities", _NO_ENTRIES)
    plain = entries.__class__ is list and plain_entities(entries)
    if plain:
        head = plain_head(raw)
        if head is not None:
            return head, []
    from pydantic import ValidationError

    from kqplan.manifest.models import Manifest

    try:
        if entries and plain:  # the document's other parts are small
            return Manifest.model_validate({k: v for k, v in raw.items() if k != "entities"}), []
        manifest = Manifest.model_validate(raw)
        manifest.entities = []  # compile reads the raw entries: the models only checked their shape
        return manifest, []
    except ValidationError as exc:
        pendings: dict[tuple[Loc, str], Pending] = {}
        for err in exc.errors():
            p = translate(raw, err)
            pendings.setdefault((p.loc, p.code), p)  # a union reports one error per member
        return None, [locate(source, p) for p in pendings.values()]


_NO_ENTRIES: list[Any] = []
