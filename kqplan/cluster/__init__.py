"""Cluster backends, each an implementation of the core's ``Cluster`` protocol: the Kafka wire
(``kafka`` over ``transport`` and ``framing``, its failures explained by ``failures``; ``connection``
and ``security`` read the client properties: TLS, SASL, Kerberos, OAuth; ``brokers`` asks each
broker for its quota settings) and a snapshot file (``snapshot``). Imports ``core``, ``snapshot``
and ``perf``.

Importing this package registers kafka-python's top package and its ``kafka.protocol.admin``
package without running their ``__init__`` (see :func:`_defer_init`)."""

from __future__ import annotations

import importlib.util
import sys
from typing import Any


def _defer_init(package: str, homes: dict[str, str] | None = None) -> None:
    """kafka-python's ``kafka/__init__.py`` imports its admin client, consumer and producer
    (0.04 s of every command that talks to a cluster), and ``kafka/protocol/admin/__init__.py``
    builds the classes of every admin API from their JSON schemas (0.05 s); kqplan uses
    ``kafka.net``, ``kafka.errors`` and a few protocol modules. Register the package with its
    path so its modules import as usual, and run the real ``__init__`` the first time anything
    asks the package itself for a name (``from kafka import KafkaAdminClient`` or ``from
    kafka.protocol.admin import AlterConfigsRequest`` in the same process still work). ``homes``
    names the module that defines a name kafka-python itself asks the package for at import
    time; a name not found there runs the whole ``__init__`` as well."""
    if package in sys.modules:
        return
    spec = importlib.util.find_spec(package)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return  # not installed as a package: the import that needs it reports that
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def __getattr__(name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        home = (homes or {}).get(name)
        if home is not None:
            found = getattr(importlib.import_module(f"{package}.{home}"), name, None)
            if found is not None:
                return found
        del module.__dict__["__getattr__"]
        loader.exec_module(module)
        return getattr(module, name)

    module.__dict__["__getattr__"] = __getattr__
    sys.modules[package] = module
    parent, _, child = package.rpartition(".")
    if parent:  # as the import system would: the parent package knows its child
        setattr(sys.modules[parent], child, module)


_defer_init("kafka")
# kafka.net's broker_version_data asks for ListGroupsRequest (old brokers' version probe)
_defer_init("kafka.protocol.admin", {"ListGroupsRequest": "groups"})
