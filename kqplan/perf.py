"""Performance helpers shared by the bulk paths (manifest loading, describe decoding)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many small acyclic objects.

    Loading 100k entities allocates millions of dicts, floats and tuples; each allocation
    burst triggers collections that rescan everything built so far (measured: pydantic
    validation of a 100k-entity manifest takes 0.95 s with the collector, 0.32 s without).
    Nothing built in these phases forms reference cycles, so pausing loses nothing.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
