"""The files a client configuration names, read through :mod:`kqplan.files`' one bounded reader:
the ``--command-config`` properties file, key and trust stores, PEM files, a Kerberos keytab, an
OAuth token file. Regular files only (a FIFO would hang the command, ``/dev/zero`` fill memory),
each under the bound of its format rather than ``[limits]``: a properties file is a few KB, a
trust store with every public CA ~200 KB, so a larger file is a mistaken path."""

from __future__ import annotations

from pathlib import Path

from kqplan.files import checked_input, read_bounded

MAX_PROPERTIES_BYTES = 1024 * 1024
"""A ``--command-config`` file (or an OAuth token file): a few KB."""
MAX_STORE_BYTES = 16 * 1024 * 1024
"""A key store is a few KB and a trust store with every public CA ~200 KB; a PEM bundle or a
keytab is no larger."""


def read_client_file(path: str | Path, *, what: str, limit: int, too_big: str) -> bytes:
    """The bytes of ``path`` (``what`` names it in the refusal); a file over ``limit`` is refused
    with ``too_big`` as the hint, since ``[limits] max-input-mib`` does not move this bound."""
    return read_bounded(Path(path), what=what, limit=limit, too_big_hint=too_big)


def check_client_file(path: str | Path, *, what: str) -> None:
    """Before OpenSSL opens ``path`` itself: a regular file, under :data:`MAX_STORE_BYTES`."""
    checked_input(Path(path), what=what, limit=MAX_STORE_BYTES,
                  too_big_hint=f"a {what} is a few KB: check the path")
