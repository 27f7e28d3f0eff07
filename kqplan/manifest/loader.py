"""Manifest files → validated models, fast; exact positions only when something is wrong.

The fast path parses with ``yaml_rs`` (Rust, YAML 1.2, ~30× faster than pyyaml's C loader
on a 100k-entity file) and checks the usual shapes by hand (pydantic's models take every other
document and locate its errors); files of 4 MiB or more are read in slices
(:mod:`kqplan.manifest.slices`). Neither parser gives positions for data, so a
:class:`Locator` re-reads a file with pyyaml's composer (nodes carry line/column marks) the
first time a diagnostic in that file needs a location. Valid files never pay for it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml_rs

from kqplan.config.model import ProjectConfig
from kqplan.core.diagnostics import Diagnostic, Loc, Pending, Span, did_you_mean, locate
from kqplan.manifest.head import API_VERSION, KIND, OWNERSHIP_FIELDS, ManifestHead, plain_head
from kqplan.manifest.source import MANIFEST_SUFFIXES, LoadedManifest, LoadResult, SourceFile

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from kqplan.manifest.models import Manifest

# Anchors/aliases are legal YAML, but a few nested aliases can expand to billions of nodes.
ALIAS_LIMITS = yaml_rs.AliasLimits(max_total_replayed_events=100_000)


def discover(paths: Sequence[Path]) -> tuple[list[Path], list[Diagnostic]]:
    """Expand directories (recursively ``*.yaml``/``*.yml``, hidden entries skipped), in order.

    Nothing is skipped silently: a dangling or looping symlink, or a directory that cannot be
    read, is a KQP008 error (with prune, a file left out would be a deletion).
    """
    files: list[Path] = []
    diags: list[Diagnostic] = []

    def problem(path: Path | str, message: str, hint: str | None = None) -> None:
        diags.append(Diagnostic("KQP008", message, Span(str(path), 0, 0), hint=hint))

    for path in paths:
        if path.is_dir():
            found: list[Path] = []
            seen_dirs: set[tuple[int, int]] = set()
            reported = len(diags)

            def unreadable(error: OSError, top: Path = path) -> None:
                problem(error.filename or top, f"cannot read directory: {error.strerror}",
                        "fix its permissions, or move it out of the manifests directory")

            for root, dirnames, filenames in os.walk(path, onerror=unreadable, followlinks=True):
                here = Path(root)
                st = here.stat()
                if (st.st_dev, st.st_ino) in seen_dirs:  # a symlink back up the tree
                    problem(here, "directory symlink loop", "remove the symlink")
                    dirnames.clear()
                    continue
                seen_dirs.add((st.st_dev, st.st_ino))
                dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
                for name in filenames:
                    candidate = here / name
                    if name.startswith(".") or candidate.suffix not in MANIFEST_SUFFIXES:
                        continue
                    if candidate.is_file():
                        found.append(candidate)
                    elif candidate.is_symlink():
                        problem(candidate, "symlink to nothing (dangling, or a loop)",
                                "fix or remove the link: its manifest would be left out")
                    else:
                        problem(candidate, "not a regular file")
            if not found and len(diags) == reported:
                problem(path, "directory contains no *.yaml or *.yml files",
                        "point kqplan at manifest files or their directory")
            files.extend(sorted(found))
        elif path.is_file():
            files.append(path)
        elif path.is_symlink():
            problem(path, "symlink to nothing (dangling, or a loop)")
        else:
            problem(path, "no such file or directory")
    seen: set[Path] = set()
    unique = []
    for f in files:
        key = f.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique, diags


# YAML 1.2's printable set (§5.1): TAB, LF, CR, NEL, and everything from space up but DEL, the
# C1 controls, surrogates and U+FFFE/U+FFFF. Anything else cuts a file short in some parsers.
_ASCII_ALLOWED = bytes([0x09, 0x0A, 0x0D, *range(0x20, 0x7F)])
_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x80-\x84\x86-\x9f\ud800-\udfff\ufffe\uffff]")


def read_text(path: Path, max_bytes: int) -> tuple[str | None, Diagnostic | None]:
    """Read a manifest as UTF-8 (a BOM is allowed), refusing huge or undecodable files."""
    name = str(path)
    try:
        size = path.stat().st_size
        if size > max_bytes:
            return None, Diagnostic(
                "KQP004", f"file is {size / 2**20:.1f} MiB, over the {max_bytes // 2**20} MiB limit",
                Span(name, 0, 0), hint="split it into several files, or raise [limits] "
                "max-file-mib in kqplan.toml")
        data = path.read_bytes()
    except OSError as exc:
        return None, Diagnostic("KQP008", f"cannot read file: {exc.strerror}", Span(name, 0, 0))
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        from kqplan.manifest.positions import line_col

        good = data[: exc.start].decode("utf-8", errors="replace")
        line, col = line_col(good, len(good))
        return None, Diagnostic(
            "KQP002", f"file is not valid UTF-8 (byte 0x{data[exc.start]:02x})", Span(name, line, col),
            hint="save the file as UTF-8")
    # An ASCII file (the usual one) holds a forbidden character only if one of its bytes is not
    # TAB, LF, CR or printable ASCII: bytes.translate deletes those in C at 3 GB/s, 9x the regex.
    bad = None if text.isascii() and not data.translate(None, _ASCII_ALLOWED) else _FORBIDDEN.search(text)
    if bad is not None:
        from kqplan.manifest.positions import line_col

        line, col = line_col(text, bad.start())
        return None, Diagnostic(
            "KQP009", f"character U+{ord(bad.group()):04X} is not allowed in YAML", Span(name, line, col),
            hint="remove it (a NUL or control byte would cut the file short: everything after it "
            "would be ignored); inside a quoted string write it as an escape, e.g. \\x07")
    return text, None


MAX_DEPTH = 64
"""Deepest nesting of YAML collections accepted: a manifest needs 5; parsers recurse per level,
and 30 000 nested ``[`` crashed the process (a C stack overflow in pyyaml's composer)."""


_QUOTED_OR_COMMENT = re.compile(r"""'[^']*'|"(?:[^"\\]|\\.)*"|(?<![^ \t\n])#[^\n]*""")
"""Quoted scalars and comments (a ``#`` first on its line or after a blank), whose brackets are
not YAML's; each starts with a literal, so a scan for them alone runs in C."""
_FLOW = re.compile(r"[\[\]{}]|" + _QUOTED_OR_COMMENT.pattern)


_STACKED = re.compile(r"- +-")


def too_deep(text: str, limit: int = MAX_DEPTH) -> int | None:
    """Offset where collection nesting passes ``limit``, or None. Flow brackets are counted
    outside quoted scalars and comments (closing ones need no care: depth only has to be bounded
    above); block nesting shows as indentation or stacked ``- ``."""
    indent = " " * (4 * limit)
    # The line-by-line search costs 7 ms per MB; only a deep indent or two stacked "- " (which
    # these C-speed checks find) can make it match.
    if ("\n" + indent) in text or text.startswith(indent) or _STACKED.search(text) is not None:
        deep = re.search(rf"^(?: {{{4 * limit},}}|(?: *- ){{{limit + 1}}})", text, re.M)
        if deep is not None:
            return deep.start()
    if text.count("[") + text.count("{") <= limit or _flow_shallow(text, limit):
        return None
    depth = 0  # deep, or unbalanced: find where, token by token
    for token in _FLOW.finditer(text):
        ch = token.group()
        if ch in "[{":
            depth += 1
            if depth > limit:
                return token.start()
        elif ch in "]}":
            depth = max(0, depth - 1)
    return None


_BRACKETS = bytes.maketrans(b"[{]}", b"(())")
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[{]}"))


def _flow_shallow(text: str, limit: int) -> bool:
    """Whether the flow brackets outside quotes and comments are balanced and nest at most
    ``limit`` deep: the same tokens :data:`_FLOW` finds, judged in C (a Python loop over a flow
    mapping per entry took 0.4 s for 100k entries). Each pass removes the innermost pairs."""
    # Quotes and comments are removed only up to the end of the line of the last quote or `#`
    # (often a header comment): no span starts later, and none ends later (a quoted span ends
    # at a quote, a comment at its line's end). The scan for them costs 40 ns a character.
    last = max(text.rfind("'"), text.rfind('"'), text.rfind("#"))
    if last >= 0:
        cut = text.find("\n", last) % (len(text) + 1)  # -1 (no newline after it): the whole text
        text = _QUOTED_OR_COMMENT.sub("", text[:cut]) + text[cut:]
    brackets = text.encode("utf-8", "surrogatepass").translate(_BRACKETS, _NOT_BRACKETS)
    for _ in range(limit):
        fewer = brackets.replace(b"()", b"")
        if not fewer or len(fewer) == len(brackets):
            return not fewer
        brackets = fewer
    return not brackets


def parse_yaml(source: SourceFile) -> tuple[Any, Diagnostic | None]:
    """Fast parse of one file; a located diagnostic when it is not one YAML mapping."""
    deep = too_deep(source.text)
    if deep is not None:
        from kqplan.manifest.positions import line_col

        line, col = line_col(source.text, deep)
        return None, Diagnostic("KQP001", f"YAML nests deeper than {MAX_DEPTH} levels",
                                Span(source.path, line, col),
                                hint="a manifest needs only a few levels; check for unclosed brackets")
    try:
        doc: Any = yaml_rs.loads(source.text, parse_datetime=False, alias_limits=ALIAS_LIMITS)
    except yaml_rs.YAMLDecodeError as exc:
        from kqplan.manifest.positions import yaml_error

        return None, yaml_error(source.path, source.text, exc)
    if doc is None:
        return None, Diagnostic("KQP003", "manifest is empty", Span(source.path, 0, 0),
                                hint=f"start it with `apiVersion: {API_VERSION}` and `kind: {KIND}`")
    if isinstance(doc, list):
        from kqplan.manifest.positions import second_document

        second = second_document(source.text)
        if second is not None:
            return None, Diagnostic(
                "KQP007", "file holds more than one YAML document",
                Span(source.path, second.line, second.column),
                hint="put each manifest in its own file (kqplan reads directories recursively)")
    if not isinstance(doc, dict):
        return None, Diagnostic(
            "KQP010", f"manifest must be a mapping, got {_yaml_type(doc)}", Span(source.path, 1, 1),
            hint=f"start it with `apiVersion: {API_VERSION}` and `kind: {KIND}`")
    return doc, None


def _yaml_type(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    return {dict: "a mapping", list: "a list", str: "a string", int: "a number", float: "a number",
            type(None): "null"}.get(type(value), type(value).__name__)


_FIELDS = {
    (): ("apiVersion", "kind", "cluster", "ownership", "profiles", "entities"),
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


def translate(raw: dict[str, Any], error: Any) -> Pending:
    """One pydantic error → a pending kqplan diagnostic in kqplan's words."""
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
        choices = _FIELDS.get(generic, ())
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
        return Pending("KQP011" if field_name == "apiVersion" else "KQP012",
                       f"unsupported {field_name} {value!r}", loc, hint=hint)
    if error["loc"] and error["loc"][-1] == "[key]":  # a mapping key, not its value, is wrong
        key = loc[-1] if loc else "?"
        what = "a quota key" if "quotas" in loc[-2:-1] or loc[:1] == ("profiles",) else "a key"
        return Pending("KQP021", f"{_where(loc[:-1])}: {what} must be a name, got {_yaml_type(key)} "
                       f"{key!r}", loc, at_key=True,
                       hint="write the key as text, e.g. `producer_byte_rate: 1MiB`"
                       if what == "a quota key" else f"quote it, e.g. '{key}'")
    value = _value_at(raw, loc) if loc else raw
    got = _yaml_type(value)
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
        if etype == "string_type" and got != "a number":
            hint = None
        return Pending("KQP021", f"{where} must be {wanted}, got {got}"
                       if etype != "too_short" else f"{where} must be {wanted}", loc, hint=hint)
    return Pending("KQP021", f"{where}: {error['msg']}", loc)


_NAME_FIELDS = ("user", "client-id", "ip", "profile")
_QUOTA_VALUE_TYPES = (int, float, str, type(None))  # exactly these: StrictInt refuses a bool


def _plain_entities(entries: Any) -> bool:
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
    """The rarer fields of an entry: ``override``/``protect`` booleans, extra (custom type) keys."""
    for key, value in entry.items():
        if key.__class__ is not str or key in ("metadata", "client_id"):  # client_id: pydantic's name
            return False
        if key in ("override", "protect") and value.__class__ is not bool:
            return False
    return True


def validate_model(source: SourceFile, raw: dict[str, Any]
                   ) -> tuple[Manifest | ManifestHead | None, list[Diagnostic]]:
    """Shape check of one parsed file; every error located. A plainly valid file (the usual one)
    is checked by hand and never imports pydantic; any other goes through the models."""
    entries = raw.get("entities", _NO_ENTRIES)
    plain = entries.__class__ is list and _plain_entities(entries)
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


def _read_apart(source: SourceFile, diagnostics: list[Diagnostic]
                ) -> tuple[ManifestHead, dict[str, Any]] | None:
    """A file whose document-level fields are plainly valid and whose entities are read without
    parsing the file whole: a plain list straight from the text (:mod:`kqplan.manifest.plain`),
    or a big file's a slice at a time (:mod:`kqplan.manifest.slices`); None for every other
    file, which is parsed whole."""
    from kqplan.manifest.plain import PLAIN_FILE_CHARS, read_plain
    from kqplan.manifest.slices import BIG_FILE_CHARS, read_sliced

    size = len(source.text)
    if size < min(PLAIN_FILE_CHARS, BIG_FILE_CHARS) or too_deep(source.text) is not None:
        return None
    if size >= BIG_FILE_CHARS:
        return read_sliced(source.text, _plain_entities, ALIAS_LIMITS,
                           lambda: _checked(source, parse_yaml(source), diagnostics))
    return read_plain(source.text, ALIAS_LIMITS)


def _checked(source: SourceFile, parsed: tuple[Any, Diagnostic | None],
             diagnostics: list[Diagnostic]) -> LoadedManifest | None:
    """A parsed file, shape-checked: its manifest, or None with the problems in ``diagnostics``."""
    raw, diag = parsed
    if diag is not None:
        diagnostics.append(diag)
        return None
    manifest, errs = validate_model(source, raw)
    diagnostics.extend(errs)
    return LoadedManifest(source, manifest, raw) if manifest is not None else None


def load(paths: Sequence[Path], config: ProjectConfig) -> LoadResult:
    """Discover, read, parse and shape-check manifests; collect every problem."""
    result = LoadResult()
    result.manifests.extend(iter_load(paths, config, result.diagnostics))
    return result


def iter_load(paths: Sequence[Path], config: ProjectConfig,
              diagnostics: list[Diagnostic]) -> Iterator[LoadedManifest]:
    """:func:`load` one file at a time, in file order, problems appended to ``diagnostics`` as
    they are found: a caller that compiles each file before asking for the next holds the parsed
    form of one batch of files (:func:`parse_ahead`), not of all (73 MiB in 40 files: 757 -> 455
    MiB peak, benchmarks/manifest_memory.py)."""
    files, diags = discover(paths)
    diagnostics.extend(diags)
    read: list[SourceFile | Diagnostic] = []
    for path in files:
        text, diag = read_text(path, config.max_file_bytes)
        if diag is not None or text is None:
            read.append(diag) if diag else None
            continue
        read.append(SourceFile.of(str(path), text))
    sources = [item for item in read if isinstance(item, SourceFile)]
    apart = {id(s): r for s in sources if (r := _read_apart(s, diagnostics)) is not None}
    parsed = parse_ahead([s for s in sources if id(s) not in apart])
    try:
        for item in read:  # in file order, as the files were found
            if isinstance(item, Diagnostic):
                diagnostics.append(item)
                continue
            if id(item) in apart:
                head, raw = apart.pop(id(item))
                yield LoadedManifest(item, head, raw)
                continue
            loaded = _checked(item, next(parsed), diagnostics)
            if loaded is not None:
                yield loaded
                del loaded
    finally:
        parsed.close()


PARALLEL_PARSE_CHARS = 1 << 18
"""Below this much text in all, files are parsed one after the other (a thread costs more)."""
BATCH_CHARS = 16 << 20
"""Files are parsed in batches of about this much text, each compiled before the next is parsed."""


def parse_ahead(sources: Sequence[SourceFile]) -> Generator[tuple[Any, Diagnostic | None], None, None]:
    """:func:`parse_yaml` of each source, in order, a batch of files (:data:`BATCH_CHARS` of text)
    at a time: the caller compiles a batch before the next is parsed, so at most a batch is held
    parsed (~10 times its text), however many files there are. yaml_rs parses without the GIL,
    so a batch is parsed by this thread and a helper together. Smaller batches, or compiling
    while the helper parses, made 100k entities in 10 files ~20 % slower to load (the next
    parse fills the holes the last one left among the compiled objects: see
    benchmarks/README.md), so a usual input is one batch. The results are the same either way."""
    if len(sources) < 2 or sum(len(s.text) for s in sources) < PARALLEL_PARSE_CHARS:
        yield from map(parse_yaml, sources)
        return
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(1, thread_name_prefix="kqplan-parse")
    try:
        start = 0
        while start < len(sources):
            end, size = start + 1, len(sources[start].text)
            while end < len(sources) and (end - start < 2 or size + len(sources[end].text) <= BATCH_CHARS):
                size += len(sources[end].text)
                end += 1
            batch = _parse_together(pool, sources[start:end])
            for i in range(len(batch)):
                done, batch[i] = batch[i], None  # let go as the caller compiles: see compile
                assert done is not None
                yield done
                del done
            start = end
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _parse_together(pool: Executor, sources: Sequence[SourceFile]
                    ) -> list[tuple[Any, Diagnostic | None] | None]:
    """:func:`parse_yaml` of each source, by this thread and the pool's together."""
    results: list[tuple[Any, Diagnostic | None] | None] = [None] * len(sources)
    jobs = iter(range(len(sources)))  # shared: each next() is atomic under the GIL

    def work() -> None:
        for i in jobs:
            results[i] = parse_yaml(sources[i])

    helper = pool.submit(work)
    work()
    helper.result()  # a failure in the helper is raised here, in the caller's thread
    assert all(r is not None for r in results)  # every job ran, or its failure was raised above
    return results
