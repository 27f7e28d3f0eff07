"""Where things are in a YAML file: the slow path, taken only when a file has a problem.

pyyaml's composer keeps a line/column mark on every node; :class:`Locator` walks a data path
(``('entities', 3, 'quotas')``) down that node tree. Importing pyyaml and composing a file
costs time, so a source file (:mod:`kqplan.manifest.source`) and the parser
(:mod:`kqplan.manifest.parse`) import this module only when they must report a position.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from kqplan.core.diagnostics import Diagnostic, Related, Span
from kqplan.manifest.items import ENTITIES_HEAD as _ENTITIES
from kqplan.manifest.items import ITEM as _ITEM

Loc = tuple[str | int, ...]
_YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of a character offset."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def second_document(text: str) -> Span | None:
    """Position of a second YAML document in ``text`` (kqplan wants one per file), if any."""
    try:
        docs = list(yaml.compose_all(text, Loader=_YAML_LOADER))
    except yaml.YAMLError:
        return None
    if len(docs) > 1 and docs[1] is not None:
        mark = docs[1].start_mark
        return Span("", mark.line + 1, mark.column + 1)
    return None


class Locator:
    """Maps a data path (``('entities', 3, 'quotas')``) to a line and column in a file."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.text = text
        self._root: yaml.Node | None = None
        self._composed = False

    def root(self) -> yaml.Node | None:
        if not self._composed:
            self._composed = True
            try:
                self._root = yaml.compose(self.text, Loader=_YAML_LOADER)
            except yaml.YAMLError:
                self._root = None
        return self._root

    def span(self, loc: Loc, *, at_key: bool = False) -> Span:
        if len(self.text) > FAST_LOCATE_BYTES:
            # composing a big file costs seconds and ~50 bytes of memory per byte of YAML; the
            # lines of a block-style entity list give the place directly
            fast = fast_span(self.path, self.text, loc, at_key=at_key)
            if fast is not None:
                return fast
        node = self.root()
        if node is None:
            return Span(self.path, 1, 1)
        best = node
        key_node: yaml.Node | None = None
        for part in loc:
            key_node = None
            if isinstance(node, yaml.MappingNode):
                nxt = None
                for k, v in node.value:
                    if isinstance(k, yaml.ScalarNode) and k.value == str(part):
                        key_node, nxt = k, v
                if nxt is None:
                    break
                node = nxt
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
                if not 0 <= part < len(node.value):
                    break
                node = node.value[part]
            else:
                break
            best = node
        target = key_node if (at_key and key_node is not None) else best
        mark = target.start_mark
        return Span(self.path, mark.line + 1, mark.column + 1)


FAST_LOCATE_BYTES = 1 << 20


def fast_span(path: str, text: str, loc: Loc, *, at_key: bool = False) -> Span | None:
    """The place of ``('entities', i, key, ...)`` in a block-style entity list, by scanning lines;
    None when the file is laid out otherwise (the caller composes it then)."""
    if len(loc) < 2 or loc[0] != "entities" or not isinstance(loc[1], int):
        return None
    head = _ENTITIES.search(text)
    if head is None:
        return None
    items = _ITEM.finditer(text, head.end())
    first = next(items, None)
    if first is None:
        return None
    indent = first.group(1)
    start, count = first, 0
    for item in items if loc[1] else ():
        if item.group(1) != indent:
            continue
        count += 1
        start = item
        if count == loc[1]:
            break
    if count != loc[1]:
        return None
    begin = start.end()
    following = re.compile(rf"^{re.escape(indent)}- |^\S", re.M).search(text, begin)
    end = following.start() if following else len(text)
    position = begin if len(loc) == 2 else begin - 1  # from the space after the dash: a key on
    for part in loc[2:]:                                # the dash's line is found too
        found = re.compile(rf"(?:^|[\s{{,])({re.escape(str(part))})\s*:", re.M).search(text, position, end)
        if found is None:
            return None
        position = found.start(1) if at_key and part == loc[-1] else found.end()
        if not (at_key and part == loc[-1]):
            while position < end and text[position] in " \t\n":  # a block value starts below
                position += 1
    line, col = line_col(text, position)
    return Span(path, line, col)


def yaml_error(path: str, text: str, exc: Exception) -> Diagnostic:
    """Locate a YAML problem that the fast parser reported, using pyyaml's marks."""
    message = str(exc)
    if "alias" in message and "limit" in message:
        m = re.search(r"(?m)(?:^|[\s\[{,:-])(\*[^\s,\]}]+)", text)
        line, col = line_col(text, m.start(1)) if m else (1, 1)
        return Diagnostic("KQP005", "YAML aliases expand past the safety limit (alias bomb?)",
                          Span(path, line, col), hint="write the values out, or use profiles")
    try:
        docs = list(yaml.compose_all(text, Loader=_YAML_LOADER))
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        what = " ".join(p for p in (err.context, err.problem) if p)
        opened = err.context_mark
        related: tuple[Related, ...] = ()
        if opened is not None and mark is not None and opened.line != mark.line:
            related = (Related(Span(path, opened.line + 1, opened.column + 1), "started"),)
        return Diagnostic("KQP001", f"YAML syntax error: {what}",
                          Span(path, mark.line + 1 if mark else 1, mark.column + 1 if mark else 1),
                          related=related,
                          hint="check indentation, quoting and brackets near this position")
    except yaml.YAMLError as err:  # pragma: no cover - pyyaml raises marked errors for text input
        return Diagnostic("KQP001", f"YAML error: {err}", Span(path, 1, 1))
    if "duplicate" in message:
        for doc in docs:
            dup = find_duplicate_key(doc)
            if dup:
                first, second = dup
                return Diagnostic(
                    "KQP006", f"duplicate key '{second.value}' in the same mapping",
                    Span(path, second.start_mark.line + 1, second.start_mark.column + 1),
                    related=(Related(Span(path, first.start_mark.line + 1,
                                          first.start_mark.column + 1), "first defined"),),
                    hint="remove one of them, or merge them")
    m = re.search(r"line (\d+), column (\d+)", message)
    line, col = (int(m.group(1)), int(m.group(2))) if m else (1, 1)
    return Diagnostic("KQP001", "YAML error: " + message.splitlines()[0], Span(path, line, col))


def find_duplicate_key(node: yaml.Node | None) -> tuple[yaml.Node, yaml.Node] | None:
    stack = [node] if node is not None else []
    seen_nodes: set[int] = set()
    while stack:
        n = stack.pop()
        if id(n) in seen_nodes:
            continue
        seen_nodes.add(id(n))
        if isinstance(n, yaml.MappingNode):
            keys: dict[str, yaml.Node] = {}
            for k, v in n.value:
                if isinstance(k, yaml.ScalarNode):
                    if k.value in keys:
                        return keys[k.value], k
                    keys[k.value] = k
                stack.append(v)
        elif isinstance(n, yaml.SequenceNode):
            stack.extend(n.value)
    return None
