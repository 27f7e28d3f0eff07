"""A series' labels → the quota bucket Kafka measured, and the entity that supplies its quota.

Kafka names each quota sensor by the bucket's metric tags (``kqplan.core.buckets``): ``user`` and
``client-id``, one of them empty for a user-level or client-id-level bucket, and its JMX name
leaves an empty tag out. So a series with both labels is a ``{user=U, client-id=C}`` bucket, one
with only ``user`` a ``{user=U}`` bucket, one with only ``client_id`` a ``{client-id=C}`` bucket;
the bucket is built by the core's :func:`~kqplan.core.buckets.bucket` from the level of the
precedence table with that shape, so there is one definition of a bucket.

Two encodings stand between a name and its label: Kafka writes the user tag *sanitized*
(URL-encoded, ``svc$team`` → ``svc%24team``: ``Sanitizer.sanitize``), and JMX quotes a value with
a character it reserves (``,=:"*?``, a space or a non-ASCII letter: ``"odd:client id,1"``, with
``\\"``, ``\\*``, ``\\?``, ``\\\\`` and ``\\n`` escaped inside), which the exporter passes on as it
is. Both were read off a real Kafka 4.3.1 broker; :func:`tag` undoes them.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from urllib.parse import unquote

from kqplan.core.buckets import bucket
from kqplan.core.entity import CLIENT_ID, USER, Entity, sanitize
from kqplan.core.resolve import CLIENT_LEVELS, Level, Match

_JMX_ESCAPES = {'"': '"', "*": "*", "?": "?", "\\": "\\", "n": "\n"}


def jmx_unquote(value: str) -> str:
    """``ObjectName.unquote``: ``"a\\"b"`` → ``a"b``; a value not in quotes is returned as is."""
    if len(value) < 2 or value[0] != '"' or value[-1] != '"':
        return value
    out: list[str] = []
    inner = value[1:-1]
    i = 0
    while i < len(inner):
        ch = inner[i]
        if ch == "\\" and i + 1 < len(inner) and inner[i + 1] in _JMX_ESCAPES:
            out.append(_JMX_ESCAPES[inner[i + 1]])
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def tag(value: str, *, user: bool) -> str:
    """The name a label carries: JMX's quotes undone, and for the user tag Kafka's sanitizing."""
    plain = jmx_unquote(value)
    return unquote(plain, errors="replace") if user and "%" in plain else plain


_MBEAN_PLAIN = re.compile(r"[A-Za-z0-9_\-%. \t]*")  # Sanitizer.MBEAN_PATTERN, [\w-%\. \t]*
_JMX_QUOTED = {'"': '\\"', "*": "\\*", "?": "\\?", "\\": "\\\\", "\n": "\\n"}


def jmx_quote(value: str) -> str:
    """``Sanitizer.jmxSanitize``: the value as it is when ``MBEAN_PATTERN`` matches it, else
    ``ObjectName.quote`` (in quotes, with ``"``, ``*``, ``?``, ``\\`` and newline escaped)."""
    if _MBEAN_PLAIN.fullmatch(value):
        return value
    return '"' + "".join(_JMX_QUOTED.get(ch, ch) for ch in value) + '"'


def label(name: str, *, user: bool) -> str:
    """The label a name carries (the inverse of :func:`tag`): Kafka's sanitizing for the user
    tag, then JMX's quoting (``JmxReporter`` writes each tag ``jmxSanitize``-d)."""
    return jmx_quote(sanitize(name) if user else name)


def _re2_literal(text: str) -> str:
    """``regexp.QuoteMeta`` (Go's RE2, Prometheus's regular expressions): ``text`` matched literally."""
    return re.sub(r"([\\.+*?()|\[\]{}^$])", r"\\\1", text)


def _promql_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def matchers(buckets: Collection[Entity], user_label: str, client_id_label: str) -> str:
    """Label matchers that select at least the series of ``buckets`` (one alternation per label,
    an absent label as the empty value): a narrower answer, still to be checked series by series
    with :func:`bucket_of_labels`, as the alternations combine."""
    users = sorted({label(b.get(USER) or "", user=True) if USER in b else "" for b in buckets})
    client_ids = sorted({label(b.get(CLIENT_ID) or "", user=False) if CLIENT_ID in b else ""
                         for b in buckets})
    return ",".join(f"{name}=~{_promql_string('|'.join(map(_re2_literal, values)))}"
                    for name, values in ((user_label, users), (client_id_label, client_ids)))


def level_of_tags(user: str, client_id: str) -> Level | None:
    """The first level of the precedence table whose buckets carry these tags (a tag is present
    when non-empty); None when both are empty (no bucket of a user/client-id quota)."""
    shape = (bool(user), bool(client_id))
    for level in CLIENT_LEVELS:
        if (level.user is not Match.ABSENT, level.client_id is not Match.ABSENT) == shape:
            return level
    return None


def bucket_of_tags(user: str, client_id: str) -> Entity | None:
    """The bucket Kafka measured under these metric tags (names, not labels: see :func:`tag`)."""
    level = level_of_tags(user, client_id)
    return None if level is None else bucket(level, user, client_id)


def bucket_of_labels(labels: Mapping[str, str], user_label: str, client_id_label: str) -> Entity | None:
    """The bucket of a series, from its user and client-id labels (absent or empty: no tag)."""
    return bucket_of_tags(tag(labels.get(user_label, ""), user=True),
                          tag(labels.get(client_id_label, ""), user=False))
