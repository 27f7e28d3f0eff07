"""Where fleets keep their data: which ``--usage`` and ``--out`` values are URIs, which of those are
well formed (anything else is refused before any work), and the local path a value names — one
reading for every fleet command and engine, so that a value is never a URI to one library and a
file name to another (pyarrow, DuckDB and Hadoop read ``file:rel`` as a URI; Python as a name)."""

from __future__ import annotations

import re
from pathlib import Path

from kqplan.core.entity import visible
from kqplan.core.errors import KqplanError

SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+")
"""A URI's scheme (RFC 3986, at least two characters: ``c:`` is no scheme kqplan reads)."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def is_uri(text: str | Path) -> bool:
    """Whether a value of ``--usage`` or ``--out`` is a URI: its first component (before any
    ``/``) has a colon, as pyarrow, DuckDB and Hadoop read it (``s3a://b/u``, and ``file:rel``
    too, which none of them can read). A local name with a colon is written as a path:
    ``./file:rel``."""
    return isinstance(text, str) and ":" in text.split("/", 1)[0]


def checked_uri(flag: str, text: str) -> str:
    """A URI as kqplan passes it on (its scheme in lower case), or a KqplanError before any work:
    ``SCHEME://AUTHORITY/PATH``, the scheme's letters as RFC 3986 has them, no ``?query`` or
    ``#fragment`` (no filesystem reads them), no control character; ``file://`` names this
    machine (no host, or ``localhost``) and an absolute path; any other scheme needs its bucket,
    container or host (``s3a://BUCKET/…``, ``hdfs://NAMENODE:PORT/…``)."""
    from urllib.parse import unquote, urlsplit

    shown = f"{flag} {visible(text)}"
    scheme, colon, rest = text.partition(":")
    if not (colon and SCHEME.fullmatch(scheme) and rest.startswith("//")):
        raise KqplanError(f"{shown}: not a URI (SCHEME://…), and a path whose first part holds a colon "
                          "would be read as one",
                          hint=f"for a local file or directory named so, write ./{visible(text)}; a "
                          "local URI is file:///ABSOLUTE/PATH")
    if _CONTROL.search(text) or _CONTROL.search(unquote(text)):
        raise KqplanError(f"{shown}: a URI with a control character", hint="give the URI as the filesystem "
                          "names it")
    if "?" in text or "#" in text:
        raise KqplanError(f"{shown}: a URI here has no ?query or #fragment",
                          hint="percent-encode them in a name: ? as %3F, # as %23")
    parts = urlsplit(text)
    scheme = scheme.lower()
    if scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise KqplanError(f"{shown}: a file URI names an absolute path of this machine",
                              hint="file:///ABSOLUTE/PATH (or file://localhost/ABSOLUTE/PATH)")
    elif not parts.netloc:
        raise KqplanError(f"{shown}: no bucket, container or host after {scheme}://",
                          hint=f"e.g. {scheme}://NAME/PATH (for HDFS: hdfs://NAMENODE:PORT/PATH or a "
                          "configured nameservice)")
    return scheme + text[len(scheme):]


def local_location(flag: str, text: str | Path) -> Path | None:
    """A ``--usage`` or ``--out`` value as a local path: a path as written, or a ``file://`` URI's
    path (percent-decoded); None for a well-formed URI of another filesystem (Spark's to read or
    write; the caller says what else it takes). A value that is no well-formed URI is refused
    (:func:`checked_uri`)."""
    from urllib.parse import unquote, urlsplit

    if not is_uri(text):
        return Path(text)
    uri = checked_uri(flag, str(text))
    return Path(unquote(urlsplit(uri).path)) if uri.startswith("file:") else None


def arrow_path(path: Path) -> str:
    """``path`` as pyarrow is given it: absolute, for pyarrow reads ``file:rel/x`` or ``in:put/x``
    as a URI (and fails, or reads another filesystem)."""
    return str(path.absolute())
