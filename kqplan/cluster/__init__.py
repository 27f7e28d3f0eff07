"""Cluster backends. Importing this package registers kafka-python's top package without running
its ``__init__`` (see :func:`_defer_kafka_init`)."""

from __future__ import annotations

import importlib.util
import sys
from typing import Any


def _defer_kafka_init() -> None:
    """kafka-python's ``kafka/__init__.py`` imports its admin client, consumer and producer
    (0.04 s of every command that talks to a cluster); kqplan uses only ``kafka.net``,
    ``kafka.protocol`` and ``kafka.errors``. Register the package with its path so those import
    as usual, and run the real ``__init__`` the first time anything asks the package itself
    for a name (``from kafka import KafkaAdminClient`` in the same process still works)."""
    if "kafka" in sys.modules:
        return
    spec = importlib.util.find_spec("kafka")
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return  # not installed as a package: the import that needs it reports that
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def __getattr__(name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        del module.__dict__["__getattr__"]
        loader.exec_module(module)
        return getattr(module, name)

    module.__dict__["__getattr__"] = __getattr__
    sys.modules["kafka"] = module


_defer_kafka_init()
