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

from collections.abc import Mapping
from urllib.parse import unquote

from kqplan.core.buckets import bucket
from kqplan.core.entity import Entity
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
