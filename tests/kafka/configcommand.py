"""Kafka's own ``kafka-configs`` (ConfigCommand) from the test jars: an independent client to check against.

Entities come back as tuples of ``(type, name)`` in the order user, client-id, ip; ``None`` is the
default entity. Output format: reference Appendix A.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
import time
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from tests.kafka.broker import TOOL_JVM_OPTS, java_command, write_log_config, write_properties

QuotaEntity = tuple[tuple[str, str | None], ...]
Quotas = dict[QuotaEntity, dict[str, float]]

# kafka_2.13 up to 4.3; rewritten in Java and moved to kafka-tools in 4.4 (KAFKA-14588).
MAIN_CLASSES = ("kafka.admin.ConfigCommand", "org.apache.kafka.tools.ConfigCommand")
_PART = {
    "user": re.compile(r"user-principal '(?P<name>.*)'|the default user-principal"),
    "client-id": re.compile(r"client-id '(?P<name>.*)'|the default client-id"),
    "ip": re.compile(r"ip '(?P<name>.*)'|the default ip"),
}
_LINE = re.compile(r"^Quota configs for (?P<entity>.+?) are (?P<values>.*)$")


class ConfigCommandError(RuntimeError):
    """ConfigCommand exited non-zero."""

    def __init__(self, args: Sequence[str], returncode: int, stdout: str, stderr: str) -> None:
        super().__init__(f"kafka-configs {' '.join(args)} exited with {returncode}:\n{stdout}{stderr}")
        self.args_used, self.returncode, self.stdout, self.stderr = list(args), returncode, stdout, stderr


@dataclass(frozen=True)
class Select:
    """One ``--entity-type`` plus ``--entity-name N``, ``--entity-default``, or neither (all of that type)."""

    entity_type: str  # users | clients | ips
    name: str | None = None
    default: bool = False

    @classmethod
    def named(cls, entity_type: str, name: str) -> Select:
        return cls(entity_type, name)

    @classmethod
    def default_of(cls, entity_type: str) -> Select:
        return cls(entity_type, default=True)

    def arguments(self) -> list[str]:
        args = ["--entity-type", self.entity_type]
        if self.default:
            return [*args, "--entity-default"]
        return [*args, "--entity-name", self.name] if self.name is not None else args


@dataclass(frozen=True)
class Result:
    """What one ConfigCommand run printed, and the quota lines parsed from it."""

    quotas: Quotas
    stdout: str
    stderr: str
    seconds: float


@cache
def main_class(libs: Path) -> str:
    """The ConfigCommand class present in ``libs`` (it moved between Kafka releases)."""
    wanted = {name.replace(".", "/") + ".class": name for name in MAIN_CLASSES}
    for jar in sorted(libs.glob("kafka*.jar")):
        with zipfile.ZipFile(jar) as archive:
            for entry in wanted.keys() & set(archive.namelist()):
                return wanted[entry]
    raise FileNotFoundError(f"no ConfigCommand ({' or '.join(MAIN_CLASSES)}) in {libs}")


def parse_entity(text: str) -> QuotaEntity:
    """``user-principal 'u', the default client-id`` -> ``(("user", "u"), ("client-id", None))``."""
    parts: list[tuple[str, str | None]] = []
    rest = text
    for entity_type, pattern in _PART.items():
        # Greedy names would swallow the next part: try each ", " split point from the left.
        for end in [m.start() for m in re.finditer(", ", rest)] + [len(rest)]:
            found = pattern.fullmatch(rest[:end])
            if found:
                parts.append((entity_type, found.group("name")))
                rest = rest[end + 2:]
                break
    if rest:
        raise ValueError(f"cannot parse the ConfigCommand entity {text!r}")
    return tuple(parts)


def parse_describe(stdout: str) -> Quotas:
    """The ``Quota configs for <entity> are k=v, ...`` lines of ``stdout``; other lines are ignored."""
    quotas: Quotas = {}
    for line in stdout.splitlines():
        found = _LINE.match(line.strip())
        if found is None:
            continue
        values = {}
        for item in filter(None, found.group("values").split(", ")):
            key, _, value = item.partition("=")
            values[key] = float(value)  # Java Double.toString: 1024.0, 1.0E7, Infinity, NaN
        quotas[parse_entity(found.group("entity"))] = values
    return quotas


@dataclass
class ConfigCommand:
    """Runs ConfigCommand (a fresh JVM each time) against ``bootstrap`` with the jars in ``libs``."""

    libs: Path
    bootstrap: str
    properties: Mapping[str, str] = field(default_factory=dict)  # --command-config, e.g. SASL settings
    jvm_opts: Sequence[str] = TOOL_JVM_OPTS
    timeout: float = 120.0

    def describe(self, *selects: Select) -> Result:
        """``--describe`` the selected entities (ConfigCommand's filter is strict, reference App. A)."""
        return self.run("--describe", *(arg for s in selects for arg in s.arguments()))

    def alter(self, *selects: Select, add: Mapping[str, float] | None = None,
              delete: Iterable[str] = ()) -> Result:
        """``--alter --add-config k=v,... --delete-config k,...`` on one entity."""
        args = ["--alter", *(arg for s in selects for arg in s.arguments())]
        if add:
            args += ["--add-config", ",".join(f"{k}={_number(v)}" for k, v in add.items())]
        if deleted := list(delete):
            args += ["--delete-config", ",".join(deleted)]
        return self.run(*args)

    def run(self, *args: str) -> Result:
        """Run ConfigCommand with ``args``; raise :class:`ConfigCommandError` on a non-zero exit."""
        with tempfile.TemporaryDirectory(prefix="kqplan-configcommand-") as scratch:
            log_config = write_log_config(Path(scratch) / "log.properties", libs=self.libs,
                                          target="SYSTEM_ERR", level="WARN")
            argv = ["--bootstrap-server", self.bootstrap, *args]
            if self.properties:
                argv += ["--command-config",
                         str(write_properties(Path(scratch) / "client.properties", self.properties))]
            command = java_command(self.libs, main_class(self.libs), *argv, jvm_opts=self.jvm_opts,
                                   log_config=log_config)
            started = time.monotonic()
            done = subprocess.run(command, capture_output=True, text=True, check=False,
                                  timeout=self.timeout)
            seconds = time.monotonic() - started
        if done.returncode != 0:
            raise ConfigCommandError(argv, done.returncode, done.stdout, done.stderr)
        return Result(parse_describe(done.stdout), done.stdout, done.stderr, seconds)


def _number(value: float) -> str:
    # ConfigCommand parses with Java's toDouble; repr keeps every digit and prints 1024.0 as such.
    return repr(float(value))
