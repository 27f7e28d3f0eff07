"""Readers for the two text formats a ``--command-config`` file uses: Java ``.properties``
lines and the ``sasl.jaas.config`` value inside them.

Both are pure (text in, values out) and keep line numbers, so that every complaint about a
setting can point at ``FILE:LINE``. Neither ever puts a *value* into an error message: a
``sasl.jaas.config`` holds a password, and an unknown key may hold anything.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from kqplan.core.errors import KqplanError


@dataclass(frozen=True, slots=True)
class Setting:
    """One ``key=value`` of a properties file; ``line`` is where its logical line starts."""

    key: str
    value: str
    line: int


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    r"""java.util.Properties escapes: ``\t \n \r \f \uXXXX``; any other ``\c`` is ``c``."""
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 == len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2:i + 6]):
            out.append(chr(int(text[i + 2:i + 6], 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Join continuation lines (an odd number of trailing backslashes), as Java does."""
    result: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.lstrip(" \t\f")
        if not pending:
            if not line or line[0] in "#!":
                continue
            start = number
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending.append(line[:-1])
            continue
        pending.append(line)
        result.append((start, "".join(pending)))
        pending = []
    if pending:
        result.append((start, "".join(pending)))
    return result


def parse_properties(text: str) -> list[Setting]:
    """Parse Java properties text into settings in file order (a repeated key: last wins later)."""
    settings: list[Setting] = []
    for number, line in _logical_lines(text):
        # The key ends at the first unescaped '=', ':' or whitespace.
        i = 0
        while i < len(line):
            ch = line[i]
            if ch == "\\":
                i += 2
                continue
            if ch in "=: \t\f":
                break
            i += 1
        key = line[:i]
        rest = line[i:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        settings.append(Setting(_unescape(key), _unescape(rest), number))
    return settings


_ENV_REF = re.compile(r"\$\{(?:env:(?::)?)?([^}]*)\}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def interpolate(value: str, env: Mapping[str, str], *, where: str) -> str:
    """Replace ``${NAME}`` (also Kafka's ``${env:NAME}`` / ``${env::NAME}``) from ``env``.

    ``$${`` is a literal ``${``. A reference to an unset variable is an error naming the
    variable, never the surrounding value.
    """
    if "${" not in value:
        return value
    parts: list[str] = []
    pos = 0
    for match in _ENV_REF.finditer(value):
        if match.start() > 0 and value[match.start() - 1] == "$":
            parts.append(value[pos:match.start() - 1] + match.group(0))
            pos = match.end()
            continue
        name = match.group(1)
        if not _ENV_NAME.fullmatch(name):
            raise KqplanError(f"{where}: ${{{name}}} is not an environment variable reference",
                              hint="write ${NAME} or ${env:NAME}; other config providers are "
                                   "not supported")
        if name not in env:
            raise KqplanError(f"{where}: environment variable {name} is not set")
        parts.append(value[pos:match.start()] + env[name])
        pos = match.end()
    parts.append(value[pos:])
    return "".join(parts)


@dataclass(frozen=True, slots=True)
class JaasConfig:
    """One JAAS login module entry: ``<module class> <flag> name="value" ... ;``."""

    module: str
    options: Mapping[str, str]

    @property
    def module_name(self) -> str:
        """The class name without its package, e.g. ``PlainLoginModule``."""
        return self.module.rsplit(".", 1)[-1]

    def __repr__(self) -> str:  # options hold passwords: show only their names
        return f"JaasConfig(module={self.module!r}, options={sorted(self.options)!r})"


_FLAGS = frozenset({"required", "requisite", "sufficient", "optional"})
_TOKEN = re.compile(r'\s*(?:(?P<word>[A-Za-z0-9_.$\-]+)|(?P<eq>=)|(?P<semi>;)|(?P<quote>"))')


def _quoted(text: str, pos: int) -> tuple[str, int]:
    r"""Read a JAAS quoted string starting after its opening quote; ``\"`` and ``\\`` escape."""
    out: list[str] = []
    while pos < len(text):
        ch = text[pos]
        if ch == "\\" and pos + 1 < len(text):
            out.append(text[pos + 1])
            pos += 2
        elif ch == '"':
            return "".join(out), pos + 1
        else:
            out.append(ch)
            pos += 1
    raise ValueError("a quoted value is not closed")


def parse_jaas(text: str) -> JaasConfig:
    """Parse a ``sasl.jaas.config`` value; ValueError (without any value in it) when malformed."""
    pos = 0
    tokens: list[tuple[str, str]] = []  # (kind, text)
    while True:
        match = _TOKEN.match(text, pos)
        if match is None:
            if text[pos:].strip():
                raise ValueError("unexpected character in the login module entry")
            break
        pos = match.end()
        if match.group("quote"):
            value, pos = _quoted(text, pos)
            tokens.append(("value", value))
        else:
            kind = match.lastgroup or ""
            tokens.append((kind, match.group(kind)))
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise ValueError("expected `<LoginModule class> required name=\"value\" ... ;`")
    module, flag = tokens[0][1], tokens[1][1]
    if flag.lower() not in _FLAGS:
        raise ValueError("the login module class must be followed by `required`")
    options: dict[str, str] = {}
    i = 2
    while i < len(tokens) and tokens[i][0] != "semi":
        if (i + 2 >= len(tokens) or tokens[i][0] != "word" or tokens[i + 1][0] != "eq"
                or tokens[i + 2][0] not in ("word", "value")):
            after = f" after option '{tokens[i - 3][1]}'" if i > 2 else ""
            raise ValueError(f"expected name=\"value\"{after}")
        options[tokens[i][1]] = tokens[i + 2][1]
        i += 3
    if i >= len(tokens):
        raise ValueError("the login module entry must end with ';'")
    if i + 1 != len(tokens):
        raise ValueError("exactly one login module is allowed (Kafka's rule)")
    return JaasConfig(module, options)
