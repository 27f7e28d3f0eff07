"""Manifest files → validated models, fast; exact positions only when something is wrong.

The loader finds the files (:func:`discover`), reads each with bounds
(:func:`kqplan.manifest.parse.read_text`), gives the usual file to the fast readers
(:mod:`kqplan.manifest.fast`: a plain list read from its text, a file of 4 MiB or more in
slices) and parses every other one with ``yaml_rs`` (Rust, YAML 1.2, ~30× faster than pyyaml's C
loader on a 100k-entity file), a batch of files at a time by two threads (:func:`parse_ahead`),
then checks its shape (:mod:`kqplan.manifest.shape`: by hand, or by the pydantic models, which
locate every error). Neither parser gives positions for data: a source file
(:mod:`kqplan.manifest.source`) re-reads itself with pyyaml's composer the first time a
diagnostic in it needs a location, so valid files never pay for it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kqplan.config.model import ProjectConfig
from kqplan.core.diagnostics import Diagnostic, Span
from kqplan.files import display_path
from kqplan.manifest.fast.read import read_apart
from kqplan.manifest.head import TESTS_KIND
from kqplan.manifest.parse import parse_yaml, read_text
from kqplan.manifest.shape import validate_model
from kqplan.manifest.source import MANIFEST_SUFFIXES, LoadedManifest, LoadedTests, LoadResult, SourceFile

if TYPE_CHECKING:
    from concurrent.futures import Executor


def discover(paths: Sequence[Path]) -> tuple[list[Path], list[Diagnostic]]:
    """Expand directories (recursively ``*.yaml``/``*.yml``, hidden entries skipped), in order.

    Nothing is skipped silently: a dangling or looping symlink, or a directory that cannot be
    read, is a KQP008 error (with prune, a file left out would be a deletion).
    """
    files: list[Path] = []
    diags: list[Diagnostic] = []

    def problem(path: Path | str, message: str, hint: str | None = None) -> None:
        diags.append(Diagnostic("KQP008", message, Span(display_path(path), 0, 0), hint=hint))

    for path in paths:
        if path.is_dir():
            found: list[Path] = []
            seen_dirs: set[tuple[int, int]] = set()
            reported = len(diags)

            def unreadable(error: OSError, top: Path = path) -> None:
                problem(error.filename or top, f"cannot read directory: {error.strerror}",
                        "fix its permissions, or move it out of the manifests directory")

            for root, dirnames, filenames in os.walk(path, onerror=unreadable, followlinks=True):
                here = Path(root)
                st = here.stat()
                if (st.st_dev, st.st_ino) in seen_dirs:  # a symlink back up the tree
                    problem(here, "directory symlink loop", "remove the symlink")
                    dirnames.clear()
                    continue
                seen_dirs.add((st.st_dev, st.st_ino))
                dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
                for name in filenames:
                    candidate = here / name
                    if name.startswith(".") or candidate.suffix not in MANIFEST_SUFFIXES:
                        continue
                    if candidate.is_file():
                        found.append(candidate)
                    elif candidate.is_symlink():
                        problem(candidate, "symlink to nothing (dangling, or a loop)",
                                "fix or remove the link: its manifest would be left out")
                    else:
                        problem(candidate, "not a regular file")
            if not found and len(diags) == reported:
                problem(path, "directory contains no *.yaml or *.yml files",
                        "point kqplan at manifest files or their directory")
            files.extend(sorted(found))
        elif path.is_file() or path.exists():  # a device or FIFO: the reader says what it is
            files.append(path)
        elif path.is_symlink():
            problem(path, "symlink to nothing (dangling, or a loop)")
        else:
            problem(path, "no such file or directory")
    seen: set[Path] = set()
    unique = []
    for f in files:
        key = f.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique, diags


def _whole(source: SourceFile, diagnostics: list[Diagnostic]) -> Callable[[], LoadedManifest | None]:
    """Reads ``source`` whole and shape-checks it (a sliced file found unusual midway; its head
    said ``kind: ClientQuotas``, so it is never a tests file)."""
    def read() -> LoadedManifest | None:
        loaded = _checked(source, parse_yaml(source), diagnostics)
        return loaded if isinstance(loaded, LoadedManifest) else None

    return read


def _checked(source: SourceFile, parsed: tuple[Any, Diagnostic | None],
             diagnostics: list[Diagnostic]) -> LoadedManifest | LoadedTests | None:
    """A parsed file, shape-checked: its manifest (or tests), or None with the problems in
    ``diagnostics``."""
    raw, diag = parsed
    if diag is not None:
        diagnostics.append(diag)
        return None
    if raw.get("kind") == TESTS_KIND:
        from kqplan.manifest.intent import read_tests

        tests, errs = read_tests(source, raw)
        diagnostics.extend(errs)
        return LoadedTests(source, tests)
    manifest, errs = validate_model(source, raw)
    diagnostics.extend(errs)
    return LoadedManifest(source, manifest, raw) if manifest is not None else None


def load(paths: Sequence[Path], config: ProjectConfig) -> LoadResult:
    """Discover, read, parse and shape-check manifests; collect every problem."""
    result = LoadResult()
    result.manifests.extend(iter_load(paths, config, result.diagnostics))
    return result


def iter_load(paths: Sequence[Path], config: ProjectConfig,
              diagnostics: list[Diagnostic]) -> Iterator[LoadedManifest | LoadedTests]:
    """:func:`load` one file at a time, in file order, problems appended to ``diagnostics`` as
    they are found: a caller that compiles each file before asking for the next holds the parsed
    form of one batch of files (:func:`parse_ahead`), not of all (73 MiB in 40 files: 757 -> 455
    MiB peak, benchmarks/manifest_memory.py)."""
    files, diags = discover(paths)
    diagnostics.extend(diags)
    read: list[SourceFile | Diagnostic] = []
    for path in files:
        text, diag = read_text(path, config.max_file_bytes)
        if diag is not None or text is None:
            read.append(diag) if diag else None
            continue
        read.append(SourceFile.of(display_path(path), text, str(path)))
    sources = [item for item in read if isinstance(item, SourceFile)]
    apart = {id(s): r for s in sources if (r := read_apart(s, _whole(s, diagnostics))) is not None}
    parsed = parse_ahead([s for s in sources if id(s) not in apart])
    try:
        for item in read:  # in file order, as the files were found
            if isinstance(item, Diagnostic):
                diagnostics.append(item)
                continue
            if id(item) in apart:
                head, raw = apart.pop(id(item))
                yield LoadedManifest(item, head, raw)
                continue
            loaded = _checked(item, next(parsed), diagnostics)
            if loaded is not None:
                yield loaded
                del loaded
    finally:
        parsed.close()


PARALLEL_PARSE_CHARS = 1 << 18
"""Below this much text in all, files are parsed one after the other (a thread costs more)."""
BATCH_CHARS = 16 << 20
"""Files are parsed in batches of about this much text, each compiled before the next is parsed."""


def parse_ahead(sources: Sequence[SourceFile]) -> Generator[tuple[Any, Diagnostic | None], None, None]:
    """:func:`parse_yaml` of each source, in order, a batch of files (:data:`BATCH_CHARS` of text)
    at a time: the caller compiles a batch before the next is parsed, so at most a batch is held
    parsed (~10 times its text), however many files there are. yaml_rs parses without the GIL,
    so a batch is parsed by this thread and a helper together. Smaller batches, or compiling
    while the helper parses, made 100k entities in 10 files ~20 % slower to load (the next
    parse fills the holes the last one left among the compiled objects: see
    benchmarks/README.md), so a usual input is one batch. The results are the same either way."""
    if len(sources) < 2 or sum(len(s.text) for s in sources) < PARALLEL_PARSE_CHARS:
        yield from map(parse_yaml, sources)
        return
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(1, thread_name_prefix="kqplan-parse")
    try:
        start = 0
        while start < len(sources):
            end, size = start + 1, len(sources[start].text)
            while end < len(sources) and (end - start < 2 or size + len(sources[end].text) <= BATCH_CHARS):
                size += len(sources[end].text)
                end += 1
            batch = _parse_together(pool, sources[start:end])
            for i in range(len(batch)):
                done, batch[i] = batch[i], None  # let go as the caller compiles: see compile
                assert done is not None
                yield done
                del done
            start = end
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _parse_together(pool: Executor, sources: Sequence[SourceFile]
                    ) -> list[tuple[Any, Diagnostic | None] | None]:
    """:func:`parse_yaml` of each source, by this thread and the pool's together."""
    results: list[tuple[Any, Diagnostic | None] | None] = [None] * len(sources)
    jobs = iter(range(len(sources)))  # shared: each next() is atomic under the GIL

    def work() -> None:
        for i in jobs:
            results[i] = parse_yaml(sources[i])

    helper = pool.submit(work)
    work()
    helper.result()  # a failure in the helper is raised here, in the caller's thread
    assert all(r is not None for r in results)  # every job ran, or its failure was raised above
    return results
